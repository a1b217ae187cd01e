"""The exact samplers beside SGLD: does SGLD's lambda_hat agree with an exact sampler's?

`slt.llc(..., sampler=slt.samplers.MALA())` and `HMC()` sample the same local posterior as SGLD
with a Metropolis-adjusted kernel on the full data (no step-size bias). Three checks, each
against an answer computed outside the sampler under test:

- reduced-rank regression (M, N, H, r) = (5, 5, 3, 1) at its true parameter, n = 10^4: SGLD
  (calibrated step), MALA and HMC against each other and against the exact expectation of
  lambda_hat at this n by blocked Gibbs sampling with exact Gaussian conditionals
  (benchmarks/rrr_gibbs.py: no step size, no accept / reject; lambda = 8 is its n -> infinity
  limit);
- a one-hidden-layer tanh network 1-2-1 at f = 0 (where SGLD's default runs hot), n = 5000:
  against a long NUTS run of the same local posterior by NumPyro (its potential written here
  from `Problem.loss`: an independent sampler);
- the equal-power normal crossings (1, 1) and (2, 2) at w* = 0, n = 5000: against the exact
  expectation by quadrature (`slt.truth.normal_crossing_expected_llc`).

Every run: 4 chains, NUM_WARMUP warmup steps, NUM_SAMPLES draws, gamma = 1, n beta = n / log n,
float64. z: the difference in combined standard errors (sqrt(se_1^2 + se_2^2)).

`rrr_wide_gamma` repeats the RRR check at gamma = 100 (the flat directions 0.1 wide instead of
1), with SGLD's defaults, a long SGLD run and the virial temperature of each run.
"""

from __future__ import annotations

import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

import slt
from benchmarks import rrr_gibbs
from slt import models, truth

NUM_WARMUP, NUM_SAMPLES = 2000, 5000
REFERENCE_DRAWS = 20_000  # per NUTS chain, 4 chains
# The Gibbs reference on RRR: 8 dispersed chains of 50 000 sweeps (after 1000) give a standard
# error near 0.003, a tenth of the exact samplers' at this table's run length.
GIBBS_RUN = {"num_chains": 8, "num_warmup": 1000, "num_samples": 50_000, "seed": 0}
SAMPLERS = {
    "SGLD (auto)": slt.samplers.SGLD(),
    "MALA": slt.samplers.MALA(),
    "HMC": slt.samplers.HMC(),
}


TABLE_PLAN = slt.RunPlan(num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES, progress=False)
TABLE_POSTERIOR = slt.LocalPosterior()  # gamma = 1, n beta = n / log n


def _llc(problem, params, sampler, key, posterior=TABLE_POSTERIOR, plan=TABLE_PLAN):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc(problem, params, key, posterior=posterior, sampler=sampler, plan=plan)
    return result, time.perf_counter() - start


def _z(result, value, std_error) -> float:
    """result's lambda_hat minus `value`, in combined standard errors."""
    return (result.llc_mean - value) / np.hypot(result.std_error, std_error)


def _nuts_reference(problem, params, key) -> tuple[float, float]:
    """lambda_hat's exact expectation by NumPyro's NUTS on the local posterior (gamma = 1,
    n beta = n / log n), 4 chains of REFERENCE_DRAWS: its mean and standard error."""
    nbeta = problem.n / np.log(problem.n)
    center_loss = float(problem.loss(params))
    flat_center = problem.ravel(params)

    def potential(flat):
        return nbeta * problem.loss(problem.unravel(flat)) + 0.5 * jnp.sum(
            (flat - flat_center) ** 2)

    mcmc = MCMC(NUTS(potential_fn=potential), num_warmup=2000, num_samples=REFERENCE_DRAWS,
                num_chains=4, chain_method="vectorized", progress_bar=False)
    mcmc.run(key, init_params=jnp.tile(flat_center, (4, 1)))
    draws = mcmc.get_samples(group_by_chain=True)
    losses = jax.vmap(jax.vmap(lambda flat: problem.loss(problem.unravel(flat))))(draws)
    values = nbeta * (np.asarray(losses) - center_loss)
    _, std_error, _, _ = slt.estimators.local.posterior.trace_statistics(values)
    return float(values.mean()), std_error


def rrr_case(key):
    """Reduced-rank regression (M, N, H, r) = (5, 5, 3, 1) at its true parameter, n = 10^4:
    (data, Problem, w*) from `key` (2026 in this table)."""
    spec = models.reduced_rank_regression(5, 3, 5)
    values = models.random_low_rank(jax.random.fold_in(key, 1), [5, 3, 5], 1)
    data = spec.simulate(jax.random.fold_in(key, 2), values, 10_000)
    problem = spec.problem(data)
    return data, problem, problem.unconstrain(values)


def gibbs_reference(data, problem, params, gamma: float = 1.0) -> rrr_gibbs.GibbsResult:
    """lambda_hat's exact expectation on `rrr_case` by blocked Gibbs (`GIBBS_RUN`, `gamma`,
    n beta = n / log n)."""
    return rrr_gibbs.gibbs_llc(rrr_gibbs.Statistics.of(data, noise_scale=1.0), params,
                               nbeta=problem.n / np.log(problem.n), gamma=gamma, **GIBBS_RUN)


def gibbs_summary(result: rrr_gibbs.GibbsResult) -> str:
    """The Gibbs reference's settings and diagnostics, in words."""
    return (
        f"Gibbs reference (RRR): {result.mean:.4f} ± {result.std_error:.2g} (Rao-Blackwellised; "
        f"{GIBBS_RUN['num_chains']} chains from dispersed starts × ({GIBBS_RUN['num_warmup']} + "
        f"{GIBBS_RUN['num_samples']}) sweeps, {result.run_time:.0f} s); standard error by ESS "
        f"{result.std_error:.2g}, by batch means {result.batch_std_error:.2g}, between chains "
        f"{result.between_chain_std_error:.2g}; R-hat {result.rhat:.4f}, ESS {result.ess:.0f}; "
        f"plain estimator {result.plain_mean:.4f} ± {result.plain_std_error:.2g}; chain means "
        + ", ".join(f"{m:.3f}" for m in result.chain_means)
        + f"; the distance |w - w*| (slowest: it moves along the GL(H) orbits): mean "
        f"{result.distance_mean:.3f}, ESS {result.distance_ess:.0f}, R-hat "
        f"{result.distance_rhat:.3f}.")


def _rows(name, problem, params, exact, exact_se, key) -> list[str]:
    rows, sgld = [], None
    for label, sampler in SAMPLERS.items():
        result, seconds = _llc(problem, params, sampler, key)
        sgld = sgld or result
        against_exact = _z(result, exact, exact_se)
        against_sgld = "" if result is sgld else f"{_z(result, sgld.llc_mean, sgld.std_error):+.1f}"
        rows.append(
            f"| {name} | {label} | {result.llc_mean:.4g} ± {result.std_error:.2g} "
            f"| {exact:.4g}{f' ± {exact_se:.2g}' if exact_se else ''} | {against_exact:+.1f} "
            f"| {against_sgld} | {result.temperature:.2f} | {result.mala_acceptance:.2f} "
            f"| {result.step_size:.2g} | {seconds:.0f} | {len(result.warnings)} |")
    return rows


WIDE_GAMMA = 100.0  # the flat directions' width 1 / sqrt(gamma) = 0.1
# SGLD at its calibrated step (2e-6) relaxes along a flat direction in about
# 2 / (gamma eps) = 10^4 steps at WIDE_GAMMA: three such times of warmup, three of draws.
LONG_SGLD_PLAN = slt.RunPlan(num_warmup=30_000, num_samples=30_000, progress=False)


def rrr_wide_gamma(key) -> str:
    """`rrr_case` at gamma = WIDE_GAMMA (same data, w*, n beta = n / log n): the Gibbs
    reference (`GIBBS_RUN`), SGLD with every default but gamma (keys 0 and 1), MALA and HMC
    at the table's run length (key fold_in(key, 3), as at gamma = 1), and SGLD with key 0 run
    `LONG_SGLD_PLAN` (long enough to spread along the flat directions). Columns as in `run`,
    with the virial temperature T_v (`LLCResult.virial_temperature`), the draws' mean
    |w - w*| (the Gibbs chains': in the summary) and the warnings by name."""
    data, problem, params = rrr_case(key)
    gibbs = gibbs_reference(data, problem, params, gamma=WIDE_GAMMA)
    posterior = slt.LocalPosterior(gamma=WIDE_GAMMA)
    runs = [(f"SGLD (defaults), key {seed}",
             *_llc(problem, params, slt.samplers.SGLD(), jax.random.key(seed), posterior,
                   slt.RunPlan(progress=False))) for seed in (0, 1)]
    runs += [(label, *_llc(problem, params, SAMPLERS[label], jax.random.fold_in(key, 3),
                           posterior)) for label in ("MALA", "HMC")]
    runs.append(("SGLD (defaults but the run length), key 0", *_llc(
        problem, params, slt.samplers.SGLD(), jax.random.key(0), posterior, LONG_SGLD_PLAN)))
    lines = [
        "| sampler | chains × (warmup + draws) | λ̂ ± se | z vs exact | z vs SGLD key 0; key 1 "
        "| T | T_v | mean \\|w − w*\\| | acceptance | step size | time (s) | warnings |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, result, seconds in runs:
        against_sgld = "; ".join(f"{_z(result, sgld.llc_mean, sgld.std_error):+.1f}"
                                 for _, sgld, _ in runs[:2] if sgld is not result)
        lines.append(
            f"| {label} | {result.num_chains} × ({result.num_warmup} + {result.num_samples}) "
            f"| {result.llc_mean:.4g} ± {result.std_error:.2g} "
            f"| {_z(result, gibbs.mean, gibbs.std_error):+.1f} | {against_sgld} "
            f"| {result.temperature:.2f} ± {result.temperature_std_error:.2f} "
            f"| {result.virial_temperature:.3f} ± {result.virial_temperature_std_error:.3f} "
            f"| {np.nanmean(result.distance_trace):.3f} | {result.mala_acceptance:.2f} "
            f"| {result.step_size:.2g} | {seconds:.0f} "
            f"| {', '.join(result.warning_names) or 'none'} |")
    return "\n".join([*lines, "", f"γ = {WIDE_GAMMA:g}. " + gibbs_summary(gibbs)])


def run() -> str:
    key = jax.random.key(2026)
    lines = [
        "## The exact samplers beside SGLD (`slt.samplers.MALA`, `HMC`)",
        "",
        __doc__.split("\n\n", 1)[1].strip(),
        "",
        "| case | sampler | λ̂ ± se | exact | z vs exact | z vs SGLD | T | acceptance "
        "| step size | time (s) | warnings |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    data, problem, params = rrr_case(key)
    gibbs = gibbs_reference(data, problem, params)
    lines += _rows("RRR (5,5,3,1) at w0, n = 10⁴", problem, params, gibbs.mean, gibbs.std_error,
                   jax.random.fold_in(key, 3))
    spec = models.two_layer_network(1, 2, 1, bias=False)
    zero = {"V": jnp.zeros((2, 1)), "U": jnp.zeros((1, 2))}
    problem = spec.problem(spec.simulate(jax.random.fold_in(key, 4), zero, 5000))
    reference, reference_se = _nuts_reference(problem, zero, jax.random.fold_in(key, 5))
    lines += _rows("tanh 1-2-1 at f = 0, n = 5000", problem, zero, reference, reference_se,
                   jax.random.fold_in(key, 6))
    for power in (1, 2):
        spec, n = models.normal_crossing((power, power)), 5000
        data = spec.simulate(jax.random.fold_in(key, 7 + power), {"w": jnp.zeros(2)}, n)
        x, y = np.asarray(data["x"], float), np.asarray(data["y"], float)
        exact = truth.normal_crossing_expected_llc(n / np.log(n), power,
                                                   second_moment=x @ x / n,
                                                   cross_moment=x @ y / n)
        lines += _rows(f"normal crossing ({power}, {power}), n = 5000", spec.problem(data),
                       {"w": jnp.zeros(2)}, exact, 0.0, jax.random.fold_in(key, 9 + power))
    lines += ["", gibbs_summary(gibbs), "", f"### The same RRR at γ = {WIDE_GAMMA:g}", "",
              rrr_wide_gamma(key)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    print(rrr_wide_gamma(jax.random.key(2026)) if "--wide-gamma" in sys.argv[1:] else run())
