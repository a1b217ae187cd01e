"""What the data cost `llc`: compile time and the memory a call adds, as n and the width grow.

Issue 17: a jitted program that closes over the data carries x and y as constants, so its
compile time and memory grow with the data (a second copy of them per program). Measured here
on a `Problem.from_loss` linear regression y = x w + noise (float32, x standard normal,
features p = 10 and 784, n = 60 000 and 10^6), `slt.llc` with 4 chains of 200 draws after 200
warmup steps, batch 256, `SGLD(step_size=0.6 / n)` (no calibration; the default
`mala_every=10`). The λ̂ column is not an estimate worth reading (so few draws are not
equilibrated at d = 784); it is there to show that a change of how the data reach the program
leaves the arithmetic unchanged.

Each configuration runs in a fresh process (`python -m benchmarks.llc_data_size CHILD p n`):
after building the data and the Problem, VmHWM is reset to the current RSS (`clear_refs`), one
`llc` call runs, and the report gives its compile time (`LLCResult.compile_time`, the chunk
program), its wall time, and the peak RSS minus the RSS before the call: the memory the call
adds. The data's own size is x and y in float32. The targets: compile time within 1.3x
(+0.5 s) of the 10-feature case at 784 features, and added memory under half the data's size.
Part of what a call adds does not depend on the data at all (the compiler's and XLA's runtime
memory: the 10-feature case at n = 60 000 holds 3 MiB of data), so the report also gives the
excess over that case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.llc_speed import _reset_peak_rss, _rss_mb

ROOT = Path(__file__).resolve().parent.parent
CASES = ((10, 60_000), (784, 60_000), (10, 1_000_000), (784, 1_000_000))


def _child(features: int, n: int) -> dict:
    import warnings

    import jax
    import jax.numpy as jnp
    import numpy as np

    import slt

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, features), dtype=np.float32)
    w = rng.standard_normal(features).astype(np.float32) / np.sqrt(features)
    y = (x @ w + rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    def nll(params, batch):
        residual = batch["y"] - batch["x"] @ params["w"]
        return 0.5 * residual**2 + 0.5 * jnp.log(2 * jnp.pi)

    problem = slt.Problem.from_loss(nll, {"w": jnp.asarray(w)}, {"x": x, "y": y})
    _reset_peak_rss()
    before, _ = _rss_mb()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc(problem, {"w": jnp.asarray(w)}, jax.random.key(0),
                         posterior=slt.LocalPosterior(nbeta=None),
                         sampler=slt.samplers.SGLD(step_size=0.6 / n),
                         plan=slt.RunPlan(num_samples=200, num_warmup=200, progress=False))
    seconds = time.perf_counter() - start
    _, peak = _rss_mb()
    return {
        "features": features, "n": n, "data_mb": (x.nbytes + y.nbytes) / 2**20,
        "compile_s": result.compile_time, "wall_s": seconds, "added_mb": peak - before,
        "llc": float(result.llc_mean),
    }


def _measure(features: int, n: int) -> dict:
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.llc_data_size", "CHILD", str(features), str(n)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def run() -> str:
    rows = [_measure(features, n) for features, n in CASES]
    base = rows[0]["compile_s"]
    lines = [
        "## `llc` and the size of the data: compile time and added memory\n",
        __doc__.split("\n\n", 1)[1].strip(),
        "",
        "| features | n | data (MiB) | compile (s) | compile / 10 features | call wall (s) | "
        "memory the call adds (MiB) | added / data | excess over the first row / data | λ̂ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['features']} | {row['n']:,} | {row['data_mb']:.0f} | {row['compile_s']:.2f} | "
            f"{row['compile_s'] / base:.2f} | {row['wall_s']:.1f} | {row['added_mb']:.0f} | "
            f"{row['added_mb'] / row['data_mb']:.2f} | "
            f"{(row['added_mb'] - rows[0]['added_mb']) / row['data_mb']:.2f} | {row['llc']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "CHILD":
        print(json.dumps(_child(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        print(run())
