"""The fast path's NUTS stage in `compare`: CPU, leapfrog steps per temperature.

Old Faithful `gaussian_mixture(K)`: 4 chains × (500 + 2000) NUTS steps at β = 1, at λ̂'s
default temperatures and at 1/log n, started at the MAP optima (round robin), as
`slt.compare`'s fast path runs them (`tempered_draws`). Prints one JSON line: wall and CPU
seconds of the stage (compilation included), compile seconds, the useful leapfrog steps, the
mean and largest leapfrog steps per draw at each temperature (vmapped chains advance in
lockstep at their longest trajectory: `slt.samplers.nuts`), and E_β[n L_n] per temperature.

Run: `python -m benchmarks.evidence_nuts_groups K LABEL [DESIGN]`, e.g. in two checkouts side
by side (each with its own empty `SLT_COMPILATION_CACHE`) for a before/after comparison
(benchmarks/RESULTS.md, "where a cold compare of K = 1…4 spends its time"). DESIGN "five"
(the default) runs the chains of the five-temperature fit of λ̂ too, as the fast path did
before λ̂ came from two temperatures; "two" only those at β = 1 and 1/log n, as it runs them
now by default (benchmarks/RESULTS.md, "λ̂ from two temperatures").
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import jax
import numpy as np


def measure(k: int, label: str, design: str = "five") -> dict:
    import slt
    from benchmarks.evidence_old_faithful import old_faithful_mixture
    from slt.estimators.evidence.draws import _optima
    from slt.estimators.evidence.rlct import inverse_temperatures
    from slt.estimators.evidence.wbic import tempered_draws, wbic_beta

    problem = old_faithful_mixture(k)
    fit = slt.fit_map(problem, jax.random.key(0))
    five = inverse_temperatures(problem.n) if design == "five" else []
    betas = np.unique(np.concatenate([five, [wbic_beta(problem.n), 1.0]]))
    nuts = slt.NUTS(num_chains=4, num_warmup=500, num_samples=2000)
    optima = _optima(problem, fit, slt.FromDraws().optimum_window)
    starts = optima[np.arange(nuts.num_chains * betas.size) % len(optima)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, cpu = time.perf_counter(), time.process_time()
        draws = tempered_draws(problem, jax.random.key(1), betas, nuts, init=starts,
                               progress=False)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    steps = draws.sample_stats["n_steps"]
    return {
        "K": k, "code": label, "design": design, "wall": wall, "cpu": cpu,
        "compile_time": draws.compile_time,
        "useful_leapfrogs": float(steps.sum()),
        "steps_per_beta_mean_max": {f"{b:.4f}": [float(steps[draws.betas == b].mean()),
                                                 int(steps[draws.betas == b].max())]
                                    for b in betas},
        "E_per_beta": [round(float(draws.nll[draws.betas == b].mean()), 2) for b in betas],
        "load": os.getloadavg(),
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "",
                             *sys.argv[3:4])))
