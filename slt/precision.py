"""Models evaluated with float32 matrix products at full float32 precision.

On NVIDIA GPUs since Ampere, XLA computes float32 matrix products in TensorFloat-32 unless
told otherwise (JAX's `jax_default_matmul_precision` unset): 10 bits of mantissa, relative
errors near 1e-3 instead of 1e-7. slt's estimators compare log-densities of nearby points:
MALA's acceptance ratio, the configurational temperature, nβ (L(w) − L(w*)), differences of
losses summed over thousands of examples. Those differences drown in TensorFloat-32's error.
On an H200, `llc`'s calibration of a reduced-rank regression at d = 1e4 measured MALA
acceptances of 0.53–0.59 for every candidate step and raised; in full float32 the same
calibration passes, with the λ̂, temperature and warmup that the CPU gives.

So every function of the parameters that a `Problem` evaluates (log-likelihood, log prior,
constraining transforms) is traced with `jax.default_matmul_precision("highest")`, and so are
the linear readouts of losses that `run_chains` observes (subset means, whose differences
`susceptibilities` takes; rounded to TensorFloat-32's 10 bits they lose the shift): on a GPU,
products in full float32; on a CPU, where float32 products are exact to float32 anyway,
nothing changes; float64 is unaffected everywhere. A user who has chosen a precision
(`jax.config.update("jax_default_matmul_precision", ...)` or the context manager of that
name around slt's calls) keeps it: then their setting governs, TensorFloat-32 included.

**Opting out.** The environment variable `SLT_MATMUL_PRECISION` sets slt's own choice:
unset, "highest" (the default, above); "off" leaves JAX's default (TensorFloat-32 on a recent
NVIDIA GPU: faster, for a large model whose losses are not compared this finely, or one trained
and run in bfloat16 anyway); any other of JAX's precision names ("high", "default",
"bfloat16", "tensorfloat32", "float32", ...) is used instead of "highest". It is read when a
function is traced: set it before building the Problem (a Problem's compiled programs keep the
precision they were traced with). Example, in a shell: `SLT_MATMUL_PRECISION=off python run.py`;
in Python, `os.environ["SLT_MATMUL_PRECISION"] = "off"` before `slt.Problem(...)`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["FULL_PRECISION", "PRECISION_ENVIRONMENT", "at_full_precision", "slt_precision"]

FULL_PRECISION = "highest"
# The environment variable of slt's precision (module doc): unset or a JAX precision name;
# "off": JAX's default.
PRECISION_ENVIRONMENT = "SLT_MATMUL_PRECISION"


def slt_precision() -> str | None:
    """The matrix-product precision slt traces its models with: `SLT_MATMUL_PRECISION`, by
    default "highest"; None for "off" (JAX's default governs)."""
    value = os.environ.get(PRECISION_ENVIRONMENT, "").strip() or FULL_PRECISION
    return None if value.lower() == "off" else value


def at_full_precision(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, run (and so traced) with float32 matrix products at full precision (or at
    `SLT_MATMUL_PRECISION`'s), unless the caller has set `jax_default_matmul_precision`
    (module docstring).

    Raises:
      ValueError: `SLT_MATMUL_PRECISION` is not "off" nor one of JAX's precision names (JAX's
        message lists them), when the function is called.
    """

    @functools.wraps(function)
    def evaluated(*args, **kwargs):
        precision = slt_precision()
        if jax.config.jax_default_matmul_precision is not None or precision is None:
            return function(*args, **kwargs)
        with jax.default_matmul_precision(precision):
            return function(*args, **kwargs)

    return evaluated
