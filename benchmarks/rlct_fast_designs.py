"""λ̂ from fewer temperatures: which design can replace the five-temperature fit in `compare`?

`slt.compare`'s fast path runs NUTS chains at β = 1 (for F, LOO), at 1/log n (WBIC) and at
λ̂'s five temperatures c_j / log n (c = 0.25 … 4). The five are most of the NUTS work. Three
cheaper designs read only chains the fast path runs anyway, and are measured here against the
five-temperature fit and against exact answers:

* "five": `slt.rlct`'s fit of E_β[n L_n] ≈ a + λ/β − (m − 1)/(β log nβ) over the five
  temperatures (`rlct_from_draws`; m chosen by the fit);
* "slope": the local slope β₀² Var_β₀[n L_n] at β₀ = 1/log n (exactly dE_β[n L_n]/d(1/β),
  `rlct.local_slopes`), WBIC's chains alone; its se by the delta method on the squared
  deviations (their ESS, ArviZ) and, for comparison, from the 4 per-chain values;
* "two-T": Watanabe's (E_β₀ − E_1) / (1/β₀ − 1), the chains at 1/log n and at 1;
* "slope1": the local slope at β = 1, Var_1[n L_n], the chains at β = 1 alone.

Cases: conjugate linear regression (regular, λ = d/2; its E_β[n L_n] in closed form,
`slt.truth.linear_regression_tempered_expected_nll`, so every design's value with exact
expectations, "exact E", is given too), the product model y = a b x + ε at ab = 0 (λ = 1/2,
m = 2; E_β and Var_β from the exact log Z(β) by quadrature, `slt.truth.product_model_log_evidence`
at noise s / sqrt(β)) and Old Faithful `gaussian_mixture(2)` (regular, λ = 2.5). NUTS: 4 chains ×
(500 + 2000) per temperature, started at the MAP optima, as `FromDraws` runs them; each
temperature in its own call, so that its CPU seconds are measured alone (compilation is in the
first call, reported apart).

Run: `python -m benchmarks.rlct_fast_designs CASE KEY [KEY ...] >> out.jsonl` (CASE e.g.
`reg-d2-n42`, `product-n1000`, `faithful-k2`), then `python -m benchmarks.rlct_fast_designs
table out.jsonl` for the markdown tables.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings

import jax
import numpy as np

NUTS_SETTINGS = {"num_chains": 4, "num_warmup": 500, "num_samples": 2000}
DESIGNS = ("five", "slope", "two-T", "slope1")


def build(case: str):
    """(problem, exact (beta -> (E_beta[n L_n], beta^2 Var_beta[n L_n])) or None, lambda, m)."""
    import slt

    parts = case.split("-")
    if parts[0] == "reg":
        d, n = int(parts[1][1:]), int(parts[2][1:])
        spec = slt.models.linear_regression(d)
        data = spec.simulate(jax.random.key(100 + d), {"w": 0.5 * np.ones(d)}, n)
        x, y = np.asarray(data["x"], np.float64), np.asarray(data["y"], np.float64)

        def expected(beta):
            return slt.truth.linear_regression_tempered_expected_nll(x, y, 1.0, 1.0, beta)

        return spec.problem(data), _with_slope(expected), d / 2, 1
    if parts[0] == "product":
        n = int(parts[1][1:])
        spec = slt.models.product_model()
        data = spec.simulate(jax.random.key(7), {"w": np.zeros(2)}, n)
        x, y = np.asarray(data["x"], np.float64), np.asarray(data["y"], np.float64)

        def log_z(beta):  # Z(beta) = (2 pi)^{n(1-beta)/2} beta^{-n/2} Z_{s = 1/sqrt(beta)}
            return (0.5 * n * (1 - beta) * math.log(2 * math.pi) - 0.5 * n * math.log(beta)
                    + slt.truth.product_model_log_evidence(x, y, 1.0, beta**-0.5))

        def exact(beta):
            h = 1e-3 * beta
            up, mid, down = log_z(beta + h), log_z(beta), log_z(beta - h)
            return -(up - down) / (2 * h), beta**2 * (up - 2 * mid + down) / h**2

        return spec.problem(data), exact, 0.5, 2
    if parts[0] == "faithful":
        from benchmarks.evidence_old_faithful import old_faithful_mixture

        k = int(parts[1][1:])
        return old_faithful_mixture(k), None, (3 * k - 1) / 2, 1
    raise ValueError(f"unknown case {case!r}")


def reference_free_energy(case: str, problem) -> float:
    """F = -log Z: exact (regression, product model) or the outside reference (Old Faithful,
    benchmarks.evidence_old_faithful.REFERENCES)."""
    import slt

    x = np.asarray(problem.data.get("x", 0.0), np.float64)
    y = np.asarray(problem.data["y"], np.float64)
    if case.startswith("reg"):
        return -slt.truth.linear_regression_log_evidence(x, y, 1.0, 1.0)
    if case.startswith("product"):
        return -slt.truth.product_model_log_evidence(x, y)
    from benchmarks.evidence_old_faithful import REFERENCES

    return REFERENCES.get(int(case.split("-")[1][1:]), float("nan"))


def _with_slope(expected):
    """(E_beta, beta^2 Var_beta) from E_beta alone: Var_beta = -dE_beta/dbeta (exact identity),
    by a central difference."""
    def exact(beta):
        h = 1e-4 * beta
        return expected(beta), -beta**2 * (expected(beta + h) - expected(beta - h)) / (2 * h)
    return exact


def measure(case: str, seed: int) -> dict:
    import arviz as az

    import slt
    from slt.estimators.evidence.draws import _optima
    from slt.estimators.evidence.rlct import inverse_temperatures, rlct_from_draws
    from slt.estimators.evidence.wbic import TemperedDraws, tempered_draws, wbic_beta

    problem, exact, lam, m = build(case)
    n = problem.n
    key = jax.random.key(seed)
    fit = slt.fit_map(problem, key)
    five = inverse_temperatures(n)
    beta0 = wbic_beta(n)
    betas = np.unique(np.concatenate([five, [beta0, 1.0]]))
    nuts = slt.NUTS(**NUTS_SETTINGS)
    optima = _optima(problem, fit, slt.FromDraws().optimum_window)
    starts = optima[np.arange(nuts.num_chains) % len(optima)]
    groups, cpu, compile_time = {}, {}, 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, beta in enumerate(betas):
            start = time.process_time()
            groups[beta] = tempered_draws(problem, jax.random.fold_in(key, index), [beta], nuts,
                                          init=starts, progress=False)
            cpu[beta] = time.process_time() - start
            compile_time += groups[beta].compile_time
    first = betas[0]  # its call compiled the program; its run costs about what the others do
    cpu[first] = float(np.median([cpu[b] for b in betas if b != first]))

    def joined(chosen):
        parts = [groups[b] for b in chosen]
        return TemperedDraws(
            nll=np.concatenate([p.nll for p in parts]),
            betas=np.concatenate([p.betas for p in parts]),
            positions=np.concatenate([p.positions for p in parts]),
            sample_stats={k: np.concatenate([p.sample_stats[k] for p in parts])
                          for k in parts[0].sample_stats},
            compile_time=0.0, run_time=0.0)

    def at(beta):
        return groups[min(groups, key=lambda b: abs(b - beta))]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = rlct_from_draws(problem, joined(five), sampler="nuts", fit=fit)
    out = {"case": case, "seed": seed, "n": n, "dim": problem.dim, "lambda": lam, "m": m,
           "nll_hat": -float(fit.loglik), "free_energy": reference_free_energy(case, problem),
           "compile_s": compile_time,
           "five": [result.rlct, result.std_error], "five_m": result.multiplicity,
           "five_window": result.window}
    means = {}
    for name, beta in (("slope", beta0), ("slope1", 1.0)):
        nll = np.asarray(at(beta).nll, np.float64)
        deviation2 = (nll - nll.mean()) ** 2
        ess = float(az.ess(deviation2))
        per_chain = beta**2 * nll.var(axis=1)
        out[name] = [float(beta**2 * deviation2.mean()),
                     float(beta**2 * deviation2.std() / math.sqrt(ess))]
        out[name + "_chain_se"] = float(per_chain.std(ddof=1) / math.sqrt(per_chain.size))
        mean_ess = float(az.ess(nll))
        means[beta] = (float(nll.mean()), float(nll.std() / math.sqrt(mean_ess)))
    span = 1.0 / beta0 - 1.0
    out["two-T"] = [(means[beta0][0] - means[1.0][0]) / span,
                    math.hypot(means[beta0][1], means[1.0][1]) / span]
    out["cpu"] = {"five": sum(cpu[min(cpu, key=lambda b: abs(b - f))] for f in five),
                  "slope": cpu[min(cpu, key=lambda b: abs(b - beta0))],
                  "two-T": cpu[min(cpu, key=lambda b: abs(b - beta0))], "slope1": 0.0,
                  "beta1": cpu[1.0]}
    if exact is not None:
        values = {b: exact(b) for b in five}
        e0, s0 = exact(beta0)
        e1, s1 = exact(1.0)
        design = np.stack([np.ones_like(five), 1.0 / five], axis=1)
        coefficients = np.linalg.lstsq(design, [values[b][0] for b in five], rcond=None)[0]
        offset = -(m - 1) / (five * np.log(n * five))
        with_m = np.linalg.lstsq(design, [values[b][0] for b in five] - offset, rcond=None)[0]
        low, high = result.window
        inside = five[(five >= low * (1 - 1e-9)) & (five <= high * (1 + 1e-9))]
        chosen = np.stack([np.ones_like(inside), 1.0 / inside], axis=1)
        shift = -(result.multiplicity - 1) / (inside * np.log(n * inside))
        as_chosen = np.linalg.lstsq(chosen, [exact(b)[0] for b in inside] - shift, rcond=None)[0]
        out["exact"] = {"five": float(as_chosen[1]), "five_full_m1": float(coefficients[1]),
                        "five_true_m": float(with_m[1]),
                        "slope": s0, "two-T": (e0 - e1) / span, "slope1": s1}
    return out


def table(path: str) -> str:
    """The markdown table of the measurements in the JSON lines file `path`: per case and
    design, the value with exact expectations (mean over keys: the five-temperature fit's
    window and m are the sampled run's), the mean error against lambda and against that exact
    value (± its se over keys), the spread over keys, the mean reported se, and the CPU seconds
    of the design's own chains (beyond those at beta = 1; compilation excluded)."""
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    lines = ["| case | λ (m) | keys | design | exact E | λ̂ − λ | λ̂ − exact E | sd over keys "
             "| mean reported se | CPU s of its own chains |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        chosen = [r for r in rows if r["case"] == case]
        lam = chosen[0]["lambda"]
        for design in DESIGNS:
            values = np.array([r[design][0] for r in chosen])
            errors = np.array([r[design][1] for r in chosen])
            spread = values.std(ddof=1) if len(values) > 1 else float("nan")
            of_mean = spread / math.sqrt(len(values))
            exact = [r["exact"][design] for r in chosen if "exact" in r]
            exact_text = against = ""
            if exact:
                exact_text = f"{np.mean(exact):.3f}"
                against = f"{np.mean(values - np.array(exact)):+.3f} ± {of_mean:.3f}"
            extra = ""
            if design == "five":
                extra = " (m̂ " + ",".join(str(r["five_m"]) for r in chosen) + ")"
            lines.append(
                f"| {case} | {lam:g} ({chosen[0]['m']}) | {len(chosen)} | {design}{extra} | "
                f"{exact_text} | {values.mean() - lam:+.3f} ± {of_mean:.3f} | {against} | "
                f"{spread:.3f} | {errors.mean():.3f} | "
                f"{np.mean([r['cpu'][design] for r in chosen]):.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "table":
        print(table(sys.argv[2]))
    else:
        for seed in sys.argv[2:]:
            print(json.dumps(measure(sys.argv[1], int(seed))), flush=True)
