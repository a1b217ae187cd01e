"""Evidence in a minute (issue 37): the fast path of `free_energy` and `compare`, cold and warm.

Old Faithful eruption durations (n = 272), `gaussian_mixture(K)`, K = 1…4, as `slt compare`
builds them (`benchmarks.evidence_old_faithful.old_faithful_mixture`); references computed
outside slt: F = 429.609, 296.61, 293.38 for K = 1, 2, 3, and 293.2723 ± 0.0043 for K = 4 (long
importance sampling in float64, RESULTS.md "Old Faithful K = 4's reference free energy").

* `fast_rows(keys)`: `slt.free_energy(problem, key)` with its defaults (the fast path: MAP
  restarts, NUTS from the optima, importance and bridge sampling from two proposals, the
  self-check, the tempered fallback) for every K and key: F, se, error, which path, k-hat,
  the bridge estimate, seconds.
* `compare_cold_warm()`: `slt.compare` of K = 1…4 in two fresh processes that share one
  new, empty persistent compilation cache (`SLT_COMPILATION_CACHE`): the first compiles
  everything (cold), the second loads the programs (warm). Each prints its total, table and
  per-step timings, and the CPU seconds of the process (all its threads): on a machine shared
  with other jobs the wall time is an upper bound, and CPU seconds say how much work was done.

Run: `python -m benchmarks.evidence_fast [fast KEYS...|compare|cold-warm]`
(`EVIDENCE_FAST_KS=1,2` compares K = 1, 2 only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import jax
import numpy as np

REFERENCES = {1: 429.609, 2: 296.61, 3: 293.38, 4: 293.2723}
DEFAULT_COLUMNS = ("bic", "laplace", "wbic", "free_energy", "rlct", "loo")


def _problems(ks=(1, 2, 3, 4)):
    from benchmarks.evidence_old_faithful import old_faithful_mixture

    return {f"K={k}": old_faithful_mixture(k) for k in ks}


def default_free_energy(problem, seed: int):
    """`slt.free_energy(problem, key(seed))` with its defaults, quietly: (result, wall s)."""
    import slt

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.free_energy(problem, jax.random.key(seed), progress=False)
    return result, time.perf_counter() - start


def fast_rows(keys=range(5), ks=(1, 2, 3, 4)) -> list[str]:
    """One markdown row per (K, key): the default `free_energy` on Old Faithful."""
    rows = []
    for name, problem in _problems(ks).items():
        k = int(name[2:])
        for seed in keys:
            result, seconds = default_free_energy(problem, seed)
            reference = REFERENCES.get(k, float("nan"))
            draws = result.draws_run
            rows.append(
                f"| {k} | {seed} | {result.free_energy:.3f} ± {result.std_error:.3f} | "
                f"{result.free_energy - reference:+.3f} | {result.path} | "
                f"{draws.pareto_k:.2f} | {-draws.bridge_log_evidence:.3f} ± "
                f"{draws.bridge_std_error:.3f} | {'; '.join(result.checks) or '—'} | "
                f"{seconds:.0f} |")
            print(rows[-1], flush=True)
    return rows


def compare_once(methods=DEFAULT_COLUMNS) -> dict:
    """One `slt.compare` of K = 1…4 in this process: total seconds, table, timings."""
    start, cpu = time.perf_counter(), time.process_time()
    import slt

    ks = tuple(int(k) for k in os.environ.get("EVIDENCE_FAST_KS", "1,2,3,4").split(","))
    problems = _problems(ks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.compare(problems, jax.random.key(0), methods=methods, progress=False)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    columns = [c for c in ("free_energy", "free_energy_se", "free_energy_path", "wbic",
                           "rlct", "elpd_loo") if c in result.table]
    return {"total_s": total, "cpu_s": cpu, "table": result.table[columns].to_dict(orient="index"),
            "checks": result.table.get("free_energy_checks", {}).to_dict()
            if "free_energy_checks" in result.table else {},
            "timings": result.timings.round(2).to_dict(orient="index"),
            "choices": result.choices, "cache": jax.config.jax_compilation_cache_dir,
            "traced_store": {what: slt.compile_cache.stored_program_count(what)
                             for what in ("loaded", "stored", "unkeyed")}}


def compare_cold_warm(methods=DEFAULT_COLUMNS) -> list[dict]:
    """`compare_once` in two fresh processes sharing one new, empty compilation cache."""
    runs = []
    with tempfile.TemporaryDirectory() as cache:
        environment = dict(os.environ, SLT_COMPILATION_CACHE=cache)
        for label in ("cold", "warm"):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.evidence_fast", "compare", *methods],
                env=environment, capture_output=True, text=True, check=True)
            record = json.loads(out.stdout.strip().splitlines()[-1])
            record |= {"label": label, "process_s": time.perf_counter() - start,
                       "load": os.getloadavg()}
            print(json.dumps(record), flush=True)
            runs.append(record)
    return runs


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "cold-warm"
    if command == "fast":
        fast_rows([int(k) for k in sys.argv[2:]] or range(5))
    elif command == "compare":
        print(json.dumps(compare_once(tuple(sys.argv[2:]) or DEFAULT_COLUMNS),
                         default=lambda v: v.item() if isinstance(v, np.generic) else str(v)))
    else:
        compare_cold_warm(tuple(sys.argv[2:]) or DEFAULT_COLUMNS)
