"""The exact samplers beside SGLD: does SGLD's lambda_hat agree with an exact sampler's?

`slt.llc(..., sampler=slt.samplers.MALA())` and `HMC()` sample the same local posterior as SGLD
with a Metropolis-adjusted kernel on the full data (no step-size bias). Three checks, each
against an answer computed outside the sampler under test:

- reduced-rank regression (M, N, H, r) = (5, 5, 3, 1) at its true parameter, n = 10^4: SGLD
  (calibrated step), MALA and HMC against each other and against lambda = 8;
- a one-hidden-layer tanh network 1-2-1 at f = 0 (where SGLD's default runs hot), n = 5000:
  against a long NUTS run of the same local posterior by NumPyro (its potential written here
  from `Problem.loss`: an independent sampler);
- the equal-power normal crossings (1, 1) and (2, 2) at w* = 0, n = 5000: against the exact
  expectation by quadrature (`slt.truth.normal_crossing_expected_llc`).

Every run: 4 chains, NUM_WARMUP warmup steps, NUM_SAMPLES draws, gamma = 1, n beta = n / log n,
float64. z: the difference in combined standard errors (sqrt(se_1^2 + se_2^2)).
"""

from __future__ import annotations

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

import slt
from slt import models, truth

NUM_WARMUP, NUM_SAMPLES = 2000, 5000
REFERENCE_DRAWS = 20_000  # per NUTS chain, 4 chains
SAMPLERS = {
    "SGLD (auto)": slt.samplers.SGLD(),
    "MALA": slt.samplers.MALA(),
    "HMC": slt.samplers.HMC(),
}


def _llc(problem, params, sampler, key):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc(problem, params, key, sampler=sampler,
                         plan=slt.RunPlan(num_warmup=NUM_WARMUP, num_samples=NUM_SAMPLES,
                                          progress=False))
    return result, time.perf_counter() - start


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


def _rows(name, problem, params, exact, exact_se, key) -> list[str]:
    rows, sgld = [], None
    for label, sampler in SAMPLERS.items():
        result, seconds = _llc(problem, params, sampler, key)
        sgld = sgld or result
        against_exact = (result.llc_mean - exact) / np.hypot(result.std_error, exact_se)
        gap = (result.llc_mean - sgld.llc_mean) / np.hypot(result.std_error, sgld.std_error)
        against_sgld = "" if result is sgld else f"{gap:+.1f}"
        rows.append(
            f"| {name} | {label} | {result.llc_mean:.4g} ± {result.std_error:.2g} "
            f"| {exact:.4g}{f' ± {exact_se:.2g}' if exact_se else ''} | {against_exact:+.1f} "
            f"| {against_sgld} | {result.temperature:.2f} | {result.mala_acceptance:.2f} "
            f"| {result.step_size:.2g} | {seconds:.0f} | {len(result.warnings)} |")
    return rows


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
    spec = models.reduced_rank_regression(5, 3, 5)
    values = models.random_low_rank(jax.random.fold_in(key, 1), [5, 3, 5], 1)
    problem = spec.problem(spec.simulate(jax.random.fold_in(key, 2), values, 10_000))
    lines += _rows("RRR (5,5,3,1) at w0, n = 10⁴", problem, problem.unconstrain(values),
                   float(truth.rrr_rlct(5, 5, 3, 1).value), 0.0, jax.random.fold_in(key, 3))
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
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    print(run())
