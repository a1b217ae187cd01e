"""Why lambda_hat from temperatures is biased high on a regular mixture (issue 37, item 4).

Old Faithful eruption durations (n = 272), `gaussian_mixture(2)`: two well-separated
clusters, a regular model at its optimum, lambda = d/2 = 2.5. `slt.rlct` fits
E_beta[n L_n] ≈ n L_n(w0) + lambda / beta over beta_j = c_j / log n, c_j = 0.25 … 4, and gets
2.7–2.8. This script measures, per inverse temperature on a finer grid (NUTS, `CHAINS` chains
× `DRAWS` draws at each beta, started at the MAP optimum, in one program):

* E_beta[n L_n] ± se and the local slope between neighbouring temperatures,
  lambda_j = (E_j - E_{j+1}) / (1/beta_j - 1/beta_{j+1}) (regular: d/2 at every j);
* beta² Var_beta[n L_n], which equals lambda where E_beta[n L_n] = a + lambda/beta holds
  (d/dbeta E_beta[n L_n] = -Var_beta[n L_n]);
* the fraction of draws in the poorly fitting region (the smaller weight below
  `SMALL_WEIGHT`, or the two means within `CLOSE_MEANS` of each other: one component doing
  the work of two), where n L_n is tens of nats above the optimum.

Run: `python -m benchmarks.rlct_regular_bias` (prints a markdown table).
"""

from __future__ import annotations

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

MULTIPLIERS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)
CHAINS, WARMUP, DRAWS = 8, 500, 2000
SMALL_WEIGHT = 0.1
CLOSE_MEANS = 1.0


def measure(seed: int = 0, k: int = 2) -> list[dict]:
    import slt
    from benchmarks.evidence_old_faithful import old_faithful_mixture
    from slt.estimators.evidence.wbic import tempered_draws

    problem = old_faithful_mixture(k)
    n = problem.n
    betas = np.array(MULTIPLIERS) / np.log(n)
    key = jax.random.key(seed)
    fit = slt.fit_map(problem, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draws = tempered_draws(problem, jax.random.fold_in(key, 1), betas,
                               slt.NUTS(num_chains=CHAINS, num_warmup=WARMUP,
                                        num_samples=DRAWS),
                               init=fit.params, progress=False)
    constrain = jax.jit(jax.vmap(lambda flat: problem.constrain(problem.unravel(flat))))
    rows = []
    for beta in betas:
        chosen = draws.betas == beta
        nll = draws.nll[chosen]
        values = constrain(jnp.asarray(draws.positions[chosen].reshape(-1, problem.dim),
                                       problem.dtype))
        weights, means = np.asarray(values["weights"]), np.asarray(values["means"])[..., 0]
        poor = ((weights.min(axis=1) < SMALL_WEIGHT)
                | (np.abs(means[:, 0] - means[:, -1]) < CLOSE_MEANS)) if k > 1 else np.zeros(
                    weights.shape[0], bool)
        per_chain = nll.mean(axis=1)
        good = nll.reshape(-1)[~poor]
        rows.append({"beta": float(beta), "c": float(beta * np.log(n)),
                     "mean": float(nll.mean()),
                     "se": float(per_chain.std(ddof=1) / np.sqrt(per_chain.size)),
                     "b2var": float(beta**2 * nll.var()), "poor": float(poor.mean()),
                     "mean_good": float(good.mean()) if good.size else float("nan"),
                     "b2var_good": float(beta**2 * good.var()) if good.size else float("nan")})
    for row, colder in zip(rows, rows[1:], strict=False):
        span = 1 / row["beta"] - 1 / colder["beta"]
        row["local"] = (row["mean"] - colder["mean"]) / span
        row["local_good"] = (row["mean_good"] - colder["mean_good"]) / span
    rows[-1]["local"] = rows[-1]["local_good"] = float("nan")
    result = slt.rlct(problem, jax.random.fold_in(key, 2), fit=fit,
                      sampler=slt.NUTS(num_chains=CHAINS, num_warmup=WARMUP,
                                       num_samples=DRAWS), progress=False)
    rows.append({"rlct": result.rlct, "rlct_se": result.std_error, "m": result.multiplicity,
                 "window": result.window, "dim": problem.dim})
    return rows


def table(rows) -> str:
    lines = ["| c = β log n | β | E_β[n L_n] ± se | local λ (to next β) | β² Var | "
             "draws in poor-fit region | local λ, good region | β² Var, good region |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows[:-1]:
        lines.append(
            f"| {row['c']:.2f} | {row['beta']:.4f} | {row['mean']:.2f} ± {row['se']:.2f} | "
            f"{row['local']:.2f} | {row['b2var']:.2f} | {row['poor']:.3f} | "
            f"{row['local_good']:.2f} | {row['b2var_good']:.2f} |")
    last = rows[-1]
    lines.append(f"\n`slt.rlct` (NUTS, default multipliers): λ̂ = {last['rlct']:.2f} ± "
                 f"{last['rlct_se']:.2f}, m = {last['m']}, window {last['window']}, "
                 f"d/2 = {last['dim'] / 2}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(measure(*(int(a) for a in sys.argv[1:]))), flush=True)


def run(key=None) -> str:
    """The section for `make bench` (`python -m benchmarks`)."""
    return ("## λ̂ from temperatures on a regular mixture: the local slope\n\n"
            "Old Faithful K = 2, NUTS at nine temperatures (`benchmarks.rlct_regular_bias`).\n\n"
            + table(measure()) + "\n")
