"""Which of slt's samplers reaches the soft directions of small nonlinear networks.

`slt.llc` with every default but the sampler, on points of benchmarks/llc_nonlinear.py (key 0
of that benchmark, its NUTS references or linearised values), for each sampler named:
"sgld" (the default), "rmsprop" (`SGLD(preconditioner="rmsprop")`), "mala" and "hmc" (the
exact full-batch samplers, `slt.samplers.MALA()`, `slt.samplers.HMC()`: step size and diagonal
mass adapted during the warmup). One line per (point, sampler): lambda_hat +- se, the
reference, the error, the configurational and virial temperatures, the warnings, the draws per
chain and the wall time.

    python -m benchmarks.llc_nonlinear_samplers POINT[,POINT...] SAMPLER[,SAMPLER...]
"""

from __future__ import annotations

import sys
import time
import warnings

import jax

import slt
from benchmarks import llc_nonlinear as nonlinear

SAMPLERS = {
    "sgld": slt.samplers.SGLD(),
    "rmsprop": slt.samplers.SGLD(preconditioner="rmsprop"),
    "mala": slt.samplers.MALA(),
    "hmc": slt.samplers.HMC(),
}


def run(points: list[str], samplers: list[str]) -> None:
    references = nonlinear._load(nonlinear.REFERENCE_FILE)
    for name in points:
        point = nonlinear.BY_NAME[name]
        built = point.built()
        reference, kind = nonlinear._reference(references.get(name))
        for label in samplers:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    result = slt.llc(built.problem, built.params, nonlinear._key(point, 0),
                                     sampler=SAMPLERS[label], plan=slt.RunPlan(progress=False))
                except Exception as error:  # noqa: BLE001 -- reported, not hidden
                    print(f"{name} {label}: raised {type(error).__name__}: "
                          f"{str(error).splitlines()[0]}", flush=True)
                    continue
            error = f"{result.llc_mean / reference - 1:+.1%}" if reference else "n/a"
            print(f"{name} {label}: {result.llc_mean:.4g} ± {result.std_error:.2g}, reference "
                  f"{reference} ({kind}), error {error}, T {result.temperature:.2f}, T_v "
                  f"{result.virial_temperature:.2f}, {list(result.warning_names)}, draws "
                  f"{result.num_samples}, {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    run(sys.argv[1].split(","), sys.argv[2].split(",") if len(sys.argv) > 2 else ["hmc"])
