"""RMSprop preconditioning (pSGLD) against plain SGLD: lambda_hat on the linear networks.

`slt.llc(..., sampler=slt.samplers.SGLD(preconditioner="rmsprop"))` scales each coordinate's
step by 1 / (delta + sqrt(v)), v the running mean of its squared gradient (Li et al. 2016).
Hitchcock & Hoogland (2025, arXiv 2507.21449) found it the most faithful SGMCMC sampler on deep
linear networks with known LLC; this section measures it with slt's own protocol: the reduced-rank
regression and deep linear network cases of the accuracy table (benchmarks/llc_accuracy.py:
lambda_hat at w0, 4 data sets of n = 20 000, 4 chains x 10 000 draws after 5000 warmup, step
size by `llc_calibrate` on every data set, the same keys), once with each sampler. Columns: the
mean over data sets and its relative error, the median configurational temperature T
(1 = unbiased sampling) and step size.
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import numpy as np

from benchmarks import llc_accuracy


def _cells(case, estimates) -> str:
    error = estimates.mean / case.exact - 1
    return (f"{estimates.mean:.3f} ± {estimates.se:.3f} | {error:+.1%} "
            f"| {np.median(estimates.temperature):.2f} | {np.median(estimates.step_size):.2g}")


def run(key=None) -> str:
    key = jax.random.key(0) if key is None else key
    jax.config.update("jax_enable_x64", False)  # sampling in float32, as users run it
    lines = [
        "## LLC: RMSprop preconditioning against plain SGLD\n",
        __doc__.split("\n\n", 1)[1],
        "| case | exact λ | SGLD λ̂ ± se | error | T | step | RMSprop λ̂ ± se | error | T | step "
        "| time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors = {"SGLD": [], "RMSprop": []}
    for case in llc_accuracy.cases():
        if case.group != "linear network":
            continue
        start = time.perf_counter()
        plain = llc_accuracy.estimate(case, key)
        preconditioned = llc_accuracy.estimate(case, key, preconditioner="rmsprop")
        for name, estimates in (("SGLD", plain), ("RMSprop", preconditioned)):
            errors[name].append(abs(estimates.mean / case.exact - 1))
        print(f"llc_preconditioner: {case.name}: SGLD {plain.mean:.4g}, RMSprop "
              f"{preconditioned.mean:.4g} (exact {case.exact:.4g})", file=sys.stderr, flush=True)
        lines.append(f"| {case.name} | {case.exact:.4g} | {_cells(case, plain)} "
                     f"| {_cells(case, preconditioned)} | {time.perf_counter() - start:.0f} |")
    lines.append("\n" + "; ".join(
        f"{name}: median |relative error| {statistics.median(values):.1%}, worst "
        f"{max(values):.1%}" for name, values in errors.items()) + ".\n")
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
