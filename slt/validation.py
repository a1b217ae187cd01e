"""Argument checks shared by the public entry points: one place, one wording.

Every public function of slt checks its arguments on entry with these helpers, so bad input
fails at once, with a message that names the argument, shows the offending value and says
what is allowed, instead of as a NaN, a hang or a shape error deep inside compiled code.

The contract of the public API (README, "When to distrust a number"):

* bad input raises `InputError`, a `ValueError` (and a `TypeError`, so that either handler
  catches an argument of the wrong type); a few older checks raise a plain `ValueError`
  with the same kind of message;
* a computation that breaks down numerically (every chain diverged, a non-finite Fisher
  matrix, a non-finite n L_n at a draw) raises `FloatingPointError` with a suggestion;
* a computation that completes but should not be trusted returns its result with the
  diagnostic recorded on it (`result.warnings`, `LaplaceResult.singular`,
  `FisherResult.rank`, ...) and issues a Python warning; a NaN is never returned unflagged.

Example:
  >>> require_positive("step_size", 1e-4)
  0.0001
  >>> require_int("num_chains", 0, minimum=1)
  Traceback (most recent call last):
  slt.validation.InputError: num_chains must be an integer >= 1, got 0
"""

from __future__ import annotations

import numbers
import sys
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "InputError",
    "call_naming_shapes",
    "require_bool",
    "require_callable",
    "require_data",
    "require_finite_tree",
    "require_in_interval",
    "require_instance",
    "require_int",
    "require_key",
    "require_one_of",
    "require_params",
    "require_positive",
    "require_step_size",
    "set_field",
    "warn_caller",
]


class InputError(ValueError, TypeError):
    """An argument of a public function is invalid; the message names it and what is allowed."""


def _is_real_number(value: Any) -> bool:
    return isinstance(value, numbers.Real | np.ndarray | jax.Array) and np.ndim(value) == 0 and (
        np.asarray(value).dtype.kind in "iuf"
    ) and not isinstance(value, bool | np.bool_)


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue `message` as a `category` warning attributed to the first frame outside slt: the
    user's call, however deep inside slt the warning arises (estimators share their runs, so a
    fixed `stacklevel` would point into slt from some of their callers)."""
    frame, level = sys._getframe(1), 2  # stacklevel 1 is this function, 2 its caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("slt."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def require_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """`value` as an int >= `minimum`; bools, non-integral floats and NaN are refused.

    Raises:
      InputError: `value` is not an integer (a float such as 2.0 counts as one) or is below
        `minimum`.
    """
    bound = "" if minimum is None else f" >= {minimum}"
    if not _is_real_number(value) or not np.isfinite(value) or value != int(value):
        raise InputError(f"{name} must be an integer{bound}, got {value!r}")
    result = int(value)
    if minimum is not None and result < minimum:
        raise InputError(f"{name} must be an integer{bound}, got {result}")
    return result


def set_field(value: Any, name: str, converted: Any) -> None:
    """Store a checked field on a frozen dataclass value, from its `__post_init__`, where the
    checks above normalise what the user gave (2.0 -> 2, a list -> a tuple, NumPy scalars ->
    Python numbers)."""
    object.__setattr__(value, name, converted)


def require_bool(name: str, value: Any) -> bool:
    """`value` as a bool: True or False (NumPy's booleans too), nothing else.

    Raises:
      InputError: anything else (1, "yes", None).
    """
    if not isinstance(value, bool | np.bool_):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def require_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """`value` as a finite float > 0 (>= 0 with `allow_zero`).

    Raises:
      InputError: `value` is not a real number, is NaN or infinite, or is not positive.
    """
    allowed = ">= 0" if allow_zero else "> 0"
    if not _is_real_number(value):
        raise InputError(f"{name} must be a finite number {allowed}, got {value!r}")
    result = float(value)
    if not np.isfinite(result) or result < 0 or (result == 0 and not allow_zero):
        raise InputError(f"{name} must be a finite number {allowed}, got {result!r}")
    return result


def require_step_size(name: str, value: Any) -> float | str:
    """A step size: "auto" (calibrate it) or a finite float > 0.

    Raises:
      InputError: any other string, or a number that is not finite and positive.
    """
    if isinstance(value, str):
        if value == "auto":
            return value
        raise InputError(f'{name} must be a finite number > 0 or "auto", got {value!r}')
    return require_positive(name, value)


def require_in_interval(
    name: str, value: Any, low: float, high: float, *, closed: bool = False
) -> float:
    """`value` as a float in the open interval (low, high), or [low, high] when `closed`.

    Raises:
      InputError: `value` is not a real number or lies outside the interval (NaN included).
    """
    interval = f"[{low}, {high}]" if closed else f"({low}, {high})"
    inside = (lambda v: low <= v <= high) if closed else (lambda v: low < v < high)
    if not _is_real_number(value) or not inside(float(value)):
        raise InputError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


def require_one_of(name: str, value: Any, choices: Collection) -> Any:
    """`value` if it is one of `choices`.

    Raises:
      InputError: otherwise; the message lists the choices.
    """
    if not isinstance(value, str | type(None) | numbers.Number) or value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise InputError(f"{name} must be one of {listed}; got {value!r}")
    return value


def require_callable(name: str, value: Any, *, optional: bool = False) -> Any:
    """`value` if it is callable (or None, when `optional`).

    Raises:
      InputError: otherwise.
    """
    if (value is None and optional) or callable(value):
        return value
    raise InputError(f"{name} must be a function, got {type(value).__name__} {value!r}")


def require_key(key: Any, name: str = "key") -> jax.Array:
    """`key` if it is a JAX PRNG key: `jax.random.key(seed)` or a legacy `PRNGKey(seed)`.

    Raises:
      InputError: anything else (an int seed, a float array, a batch of keys).
    """
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape == ():
            return key
    elif isinstance(key, jax.Array | np.ndarray) and key.dtype == np.uint32 and key.shape == (2,):
        return key
    what = f"{type(key).__name__} {key!r}" if np.ndim(key) == 0 else f"array {np.shape(key)}"
    raise InputError(
        f"{name} must be one JAX PRNG key, e.g. jax.random.key(0), got {what}"
    )


def require_instance(name: str, value: Any, cls: type, what: str) -> Any:
    """`value` if it is an instance of `cls`; `what` describes it ("a FitResult from ...").

    Raises:
      InputError: otherwise.
    """
    if not isinstance(value, cls):
        raise InputError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def require_finite_tree(tree: Any, name: str) -> Any:
    """`tree` if every leaf is a finite float array.

    Raises:
      InputError: naming the first leaf that is not a float array or not finite.
    """
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        label = f"{name}{jax.tree_util.keystr(path)}"
        array = np.asarray(leaf)
        if array.dtype.kind != "f":
            raise InputError(f"{label} has dtype {array.dtype}; parameters must be floats")
        bad = ~np.isfinite(array)
        if bad.any():
            raise InputError(
                f"{label} is not finite ({int(bad.sum())} NaN or inf value(s)): {array}"
            )
    return tree


def require_params(problem: Any, params: Any, name: str = "params") -> Any:
    """`params` if it is a point of `problem`: same pytree structure and leaf shapes as
    `problem.init(key)` (unconstrained coordinates), float and finite.

    Raises:
      InputError: a missing or extra site, a leaf of the wrong shape, a non-float or a
        non-finite value; the message names the leaf.
    """
    expected = problem.unravel(jnp.zeros(problem.dim, problem.dtype))
    if jax.tree_util.tree_structure(params) != jax.tree_util.tree_structure(expected):
        given = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        wanted = sorted(expected) if isinstance(expected, Mapping) else "the model's pytree"
        raise InputError(
            f"{name} must have the structure of problem.init(key) (sites {wanted}), got {given}"
        )
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    for (path, leaf), template in zip(leaves, jax.tree_util.tree_leaves(expected), strict=True):
        if np.shape(leaf) != np.shape(template):
            raise InputError(
                f"{name}{jax.tree_util.keystr(path)} has shape {np.shape(leaf)}; the model "
                f"needs {np.shape(template)} (unconstrained coordinates)"
            )
    return require_finite_tree(params, name)


def require_data(data: Any) -> tuple[dict[str, np.ndarray], int]:
    """Check that `data` is a non-empty dict of finite numeric arrays sharing a leading axis.

    Returns:
      The arrays (as numpy) and n, the length of their shared leading (example) axis.

    Raises:
      InputError: not a dict, no arrays, a scalar or empty array, a non-numeric dtype, a NaN
        or inf (the message gives the first index), or leading axes of different lengths.
    """
    if not isinstance(data, Mapping):
        raise InputError(f"data must be a dict of arrays, got {type(data).__name__}")
    if not data:
        raise InputError("data is empty: give at least one array (e.g. {'y': y})")
    arrays = {}
    for key, value in data.items():
        array = np.asarray(value)
        if array.ndim == 0:
            raise InputError(f"data[{key!r}] is a scalar; every data array needs an example axis")
        if array.shape[0] == 0:
            raise InputError(f"data[{key!r}] is empty (shape {array.shape})")
        if array.dtype.kind not in "biuf":
            raise InputError(
                f"data[{key!r}] has dtype {array.dtype}; expected numbers (bool, int or float)"
            )
        bad = ~np.isfinite(array) if array.dtype.kind == "f" else np.zeros(array.shape, bool)
        if bad.any():
            first = np.unravel_index(np.argmax(bad), array.shape)
            raise InputError(
                f"data[{key!r}] has {int(bad.sum())} non-finite value(s) (NaN or inf), "
                f"the first at index {tuple(int(i) for i in first)}"
            )
        arrays[key] = array
    lengths = {key: array.shape[0] for key, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise InputError(
            f"data arrays must share their first (example) axis; lengths are {lengths}"
        )
    return arrays, next(iter(lengths.values()))


def call_naming_shapes(function: Callable[[], Any], what: str, data: Mapping) -> Any:
    """Call `function()`; turn a TypeError (JAX's shape or dtype mismatch) into an InputError
    that names `what` failed and the shapes of `data`.

    Raises:
      InputError: `function` raised a TypeError.
    """
    try:
        return function()
    except TypeError as error:
        shapes = {key: tuple(np.shape(value)) for key, value in data.items()}
        raise InputError(
            f"{what} failed on data of shapes {shapes} (check the shapes the model expects): "
            f"{error}"
        ) from None
