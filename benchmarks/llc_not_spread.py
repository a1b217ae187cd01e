"""How often `slt.NotSpread` fires with `slt.llc`'s defaults on the accuracy table's exact cases.

The reduced-rank regression and deep linear network rows of benchmarks/llc_accuracy.py, built
as that script builds them (key 0, the first data set, n = 20 000, w* = w0, float32 unless
--x64), each run once by `slt.llc(problem, w0, jax.random.key(0))` with every default
(gamma = 1, n beta = n / log n, calibrated SGLD step, run length "auto"). A row: lambda_hat
with its standard error against the exact lambda (TRUTH.md), the configurational temperature T,
the virial temperature T_v = E[(w - w*) . grad U] / k (`LLCResult.virial_temperature`, 1 at
the local posterior) beside the share of directions in which L_n curves at w0
(`curved_share`: what T_v is when the chains have not moved along the flat ones), the mean
distance |w - w*| of the draws, and the warnings the run raised.
NotSpread fires when T_v < 0.95 by more than one standard error.

lambda is the n -> infinity limit; what `slt.llc` estimates is the local posterior's
E_pi[n beta (L_n - L_n(w*))] at this n and gamma. For the reduced-rank regressions (depth 2)
the table also gives that exactly, by blocked Gibbs sampling on the same data
(benchmarks/rrr_gibbs.py, `GIBBS_RUN`), with the Gibbs chains' mean |w - w*|.

Run: python -m benchmarks.llc_not_spread [--x64]
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

import slt
from benchmarks import llc_accuracy, rrr_gibbs

GIBBS_RUN = {"num_chains": 8, "num_warmup": 1000, "num_samples": 20_000, "seed": 0}

HEADER = [
    "| case | exact λ | λ̂ ± se | error | E_π (Gibbs) | λ̂ − E_π | T | T_v ± se | curved share "
    "| mean \\|w − w*\\| (Gibbs) | draws × chains | step size | time (s) | warnings |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def curved_share(values: dict) -> float:
    """The fraction of directions in which L_n curves at w0 = (W1, ..., WL): rank J / d, J the
    Jacobian of the product W_L ... W_1 in the weights (the Hessian of the population loss at
    w0 is J^T (I / s^2 ⊗ E[x x^T]) J, x ~ N(0, I)). With P = W_L ... W_1,
    dP = sum_l (W_L ... W_{l+1}) dW_l (W_{l-1} ... W_1), and for row-major vec,
    vec(L X R) = (L ⊗ R^T) vec(X). Chains that sample the curved directions at temperature T
    but have not moved along the flat ones have T_v ≈ T x this share."""
    weights = [np.asarray(values[f"W{layer + 1}"], np.float64) for layer in range(len(values))]
    blocks = []
    for layer, weight in enumerate(weights):
        left, right = np.eye(weight.shape[0]), np.eye(weights[0].shape[1])
        for above in weights[layer + 1:]:
            left = above @ left
        for below in weights[:layer]:
            right = below @ right
        blocks.append(np.kron(left, right.T))
    jacobian = np.hstack(blocks)
    # float32 weights: a product "of rank r" has further singular values near 1e-7 of the
    # largest, whose curvature (1e-14 n beta) is nothing against gamma
    return np.linalg.matrix_rank(jacobian, rtol=1e-4) / jacobian.shape[1]


def row(case: llc_accuracy.Case, key: jax.Array) -> str:
    """One case's row: `slt.llc` with its defaults at w0 on the case's first data set."""
    spec, values = built = case.build(key)
    problem = spec.problem(llc_accuracy.simulate(case, key, 0, built))
    start = time.perf_counter()
    result = slt.llc(problem, problem.unconstrain(values), jax.random.key(0),
                     plan=slt.RunPlan(progress=False))
    seconds = time.perf_counter() - start
    jax.clear_caches()
    distance = f"{np.nanmean(result.distance_trace):.3g}"
    exact, versus = "", ""
    if len(values) == 2:  # a reduced-rank regression: its exact E_pi by Gibbs
        gibbs = rrr_gibbs.gibbs_llc(
            rrr_gibbs.Statistics.of(problem.data, noise_scale=1.0),
            jax.tree.map(np.asarray, problem.unconstrain(values)), nbeta=result.nbeta,
            gamma=result.gamma, **GIBBS_RUN)
        exact = f"{gibbs.mean:.3f} ± {gibbs.std_error:.2g}"
        versus = f"{result.llc_mean / gibbs.mean - 1:+.1%}"
        distance += f" ({gibbs.distance_mean:.3g})"
    return (
        f"| {case.name} | {case.exact:.4g} | {result.llc_mean:.3f} ± {result.std_error:.2g} "
        f"| {result.llc_mean / case.exact - 1:+.1%} | {exact} | {versus} "
        f"| {result.temperature:.2f} ± {result.temperature_std_error:.2f} "
        f"| {result.virial_temperature:.3f} ± {result.virial_temperature_std_error:.3f} "
        f"| {curved_share(values):.3f} | {distance} "
        f"| {result.num_samples} × {result.num_chains} | {result.step_size:.2g} "
        f"| {seconds:.0f} | {', '.join(result.warning_names) or 'none'} |")


def run(x64: bool = False) -> str:
    jax.config.update("jax_enable_x64", x64)
    key = jax.random.key(0)
    lines = list(HEADER)
    for case in llc_accuracy.cases():
        if case.group == "linear network":
            lines.append(row(case, key))
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(x64="--x64" in sys.argv[1:]))
