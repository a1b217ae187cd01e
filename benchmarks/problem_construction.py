"""What building a `Problem` costs: slt's abstract trace against running the model eagerly.

`Problem(model, data)` needs the model's structure (sites, supports, shapes, plates) and a
check that its initial point is finite. It gets the structure from a trace on shapes
(`jax.eval_shape`) and checks the point in one jitted evaluation. The baseline is what a
NumPyro user does to see a model's sites, and what `Problem` did before: run the model once
eagerly under `handlers.trace(handlers.seed(...))` and evaluate every site's log-density.
Eager JAX compiles each operation the first time it meets it in a process, so every
measurement runs in a fresh Python process (imports and data excluded from the time); the
table gives the median over `REPEATS` processes. Ratio = eager / slt.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

REPEATS = 3
CASES = {
    "gaussian_mixture(1)": "models.gaussian_mixture(1)",
    "gaussian_mixture(3)": "models.gaussian_mixture(3)",
    "linear_regression(3)": "models.linear_regression(3)",
    "two_layer_network(2, 8, 1)": "models.two_layer_network(2, 8, 1)",
    "deep_linear_network([4, 6, 2, 4])": "models.deep_linear_network([4, 6, 2, 4])",
}

_SCRIPT = """
import json, sys, time
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from numpyro import handlers
from slt import Problem, models
spec = {spec}
rng = np.random.default_rng(0)
n = 500
if "mixture" in spec.name:
    data = {{"y": rng.normal(size=(n, 1))}}
else:
    data = {{"x": rng.normal(size=(n, {x_dim})), "y": rng.normal(size=(n,) + {y_shape})}}
start = time.perf_counter()
if sys.argv[1] == "slt":
    Problem(spec.model, data)
else:
    trace = handlers.trace(handlers.seed(spec.model, 0)).get_trace(**data)
    for site in trace.values():
        if site["type"] == "sample":
            np.asarray(site["fn"].log_prob(site["value"]))
print(json.dumps(time.perf_counter() - start))
"""

_SHAPES = {  # (inputs per example, shape of one output) of the regression cases
    "linear_regression(3)": (3, ()),
    "two_layer_network(2, 8, 1)": (2, (1,)),
    "deep_linear_network([4, 6, 2, 4])": (4, (4,)),
}


def _seconds(case: str, how: str) -> float:
    x_dim, y_shape = _SHAPES.get(case, (0, ()))
    script = _SCRIPT.format(spec=CASES[case], x_dim=x_dim, y_shape=y_shape)
    output = subprocess.run([sys.executable, "-c", script, how], capture_output=True,
                            text=True, check=True)
    return float(json.loads(output.stdout.strip().splitlines()[-1]))


def run(key=None) -> str:
    rows = ["| model (n = 500) | slt `Problem` (s) | eager trace + log-densities (s) | ratio |",
            "|---|---|---|---|"]
    for case in CASES:
        times = {how: [] for how in ("slt", "eager")}
        for _ in range(REPEATS):  # interleaved, so that a busy moment hits both
            for how in times:
                times[how].append(_seconds(case, how))
        slt_time, eager_time = (float(np.median(times[how])) for how in ("slt", "eager"))
        rows.append(f"| {case} | {slt_time:.2f} | {eager_time:.2f} | "
                    f"{eager_time / slt_time:.1f} |")
    return (
        "## Building a Problem\n\n"
        "Seconds to build a `Problem` in a fresh process (imports and data excluded), median of "
        f"{REPEATS} processes, against running the model once eagerly and evaluating its "
        "log-densities (what `Problem` did before; module doc of "
        "benchmarks/problem_construction.py).\n\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    print(run())
