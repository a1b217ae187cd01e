"""Docstring examples run as doctests: `make test` collects slt/ with `--doctest-modules`.

Besides the names of its own module (doctest's default), an example may use these without
defining them; everything else it defines itself:

- `jax`, `jnp` (jax.numpy), `np` (numpy), `slt`: the modules;
- `key`: `jax.random.key(0)`, fresh for every example;
- `problem`: Bayesian linear regression with two features, `slt.models.linear_regression(2)`
  (w ~ N(0, I), noise sd 1), on n = 100 examples simulated at w = (1, -0.5) with
  `jax.random.key(1)`; its exact evidence is `slt.truth.linear_regression_log_evidence`.
  n = 100 keeps `slt.rlct`'s default temperatures (up to 4 / log n) at most 1;
- `params`: those true parameters, `{"w": jnp.array([1.0, -0.5])}` (unconstrained and
  constrained coincide for this model).

`problem` is built when the first example runs and then shared by every example of the
session, so what is compiled for it is compiled once. Examples run in float64, as the tests
do (tests/conftest.py).
"""

import functools
import os
import shutil
import subprocess
import sys
import tempfile

# One persistent compilation cache per test run, shared by the xdist workers and the
# processes the tests start (all inherit this process's environment): slt passes data as
# program arguments, so problems of the same shapes lower to the same programs, and a program
# one test compiled is loaded by the next (measured: 7.3 s -> 1.6 s for a first llc call in a
# new process). A cached executable is the same program, so no number changes. The process
# that starts the run (xdist's controller, or the only process) makes the folder and removes
# it at the end; a cache folder set by the user is used as it is and kept.
_OWN_CACHE = not {"PYTEST_XDIST_WORKER", "JAX_COMPILATION_CACHE_DIR"} & set(os.environ)
if _OWN_CACHE:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="slt-test-jax-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

# Compiling is over half of a test run: ~4,800 XLA programs, 1,270 of 2,250 worker-seconds in
# XLA's backend compiler (measured with jax.monitoring). The tests' programs are small, so the
# test processes (and those they start, which inherit the environment) compile with LLVM at
# optimisation level 1 and without its expensive passes: CPU time -9% on test_fit.py and
# test_wbic.py (compile-bound), -17% on three sampling-bound tests (level 0 saved more compile
# time but ran 35% slower). Where XLA has them, also with its older CPU fusion emitters
# (`--xla_cpu_use_fusion_emitters=false`), which compile faster: test_fit.py 75-81 -> 46-56 s
# of CPU, test_llc.py with test_free_energy.py 145 -> 132 s, the whole suite on a clean clone
# 935-949 -> 656-673 s (2026-11-29; benchmarks/RESULTS.md). The operations compiled are the
# same; only their machine code differs, and with it the last bits of some float64 sums. And
# each program's machine code in one piece (`--xla_cpu_parallel_codegen_split_count=1`): XLA
# splits it to generate code on several threads, which the workers, already one more than the
# cores, only pay for (test_fit.py with test_local_diagnostics.py: 83.6-91.8 -> 72.6-80.2 s of
# CPU; the same bits). Users' programs and the benchmarks keep XLA's defaults (with these
# emitters a warm `compare` ran 11% slower; one process compiles on every core).
_FAST_COMPILE = "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true"
_WHERE_ACCEPTED = "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"


def _xla_accepts(flags: str) -> bool:
    """Whether this jaxlib's XLA knows `flags`: an unknown flag in XLA_FLAGS ends the process
    that starts a backend, so a new Python tries them first (about 1 s, once per run)."""
    probe = [sys.executable, "-c", "import jax; jax.devices('cpu')"]
    environment = os.environ | {"XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(probe, env=environment, capture_output=True).returncode == 0


if _FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):  # not yet set by the run's first process
    flags = [os.environ.get("XLA_FLAGS", ""), _FAST_COMPILE]
    if _xla_accepts(_WHERE_ACCEPTED):  # all of them in one try; otherwise each on its own
        flags.append(_WHERE_ACCEPTED)
    else:
        flags += [flag for flag in _WHERE_ACCEPTED.split() if _xla_accepts(flag)]
    os.environ["XLA_FLAGS"] = " ".join(flags).strip()

import jax  # noqa: E402  (after the cache settings, which JAX reads when imported)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from _pytest.doctest import DoctestItem  # noqa: E402

jax.config.update("jax_enable_x64", True)  # before slt is imported, as in tests/conftest.py


@functools.cache
def _shared_names() -> dict:
    import slt

    spec = slt.models.linear_regression(2)
    params = {"w": jnp.array([1.0, -0.5])}
    problem = spec.problem(spec.simulate(jax.random.key(1), params, 100))
    return {"jax": jax, "jnp": jnp, "np": np, "slt": slt, "problem": problem, "params": params}


@pytest.fixture(autouse=True)
def _doctest_names(request):
    """Fill `doctest_namespace` for docstring examples only (tests build their own objects)."""
    if isinstance(request.node, DoctestItem):
        namespace = request.getfixturevalue("doctest_namespace")
        namespace.update(_shared_names(), key=jax.random.key(0))


def pytest_sessionfinish(session):
    """The run's own compilation cache goes when the run ends."""
    if _OWN_CACHE and not hasattr(session.config, "workerinput"):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
