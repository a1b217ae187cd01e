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
    "require_choices",
    "require_data",
    "require_finite_tree",
    "require_float_array",
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


# The largest integer an argument may be: what a NumPy / JAX int64 holds (a count beyond it
# cannot become an array shape, an index or a log's argument).
MAX_INT = np.iinfo(np.int64).max
# Parameter dtypes the samplers and the geometry compute in (float16 / bfloat16 have no
# Gaussian draws in jax.random, and too few bits for a Langevin step).
PARAM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Parameter dtypes of models trained in low precision: accepted where a Problem keeps a float32
# master copy and casts to them inside the model (`Problem.from_loss`, the estimators' params).
LOW_PRECISION_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(np.float16))


def _is_real_number(value: Any) -> bool:
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, numbers.Integral):  # a Python int beyond int64 too
        return True
    return isinstance(value, numbers.Real | np.ndarray | jax.Array) and np.ndim(value) == 0 and (
        np.asarray(value).dtype.kind in "iuf"
    )


def _float(value: Any) -> float:
    """A real number as a float; a Python int too large for one as +-inf (refused as not
    finite, not raised as OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue `message` as a `category` warning attributed to the first frame outside slt: the
    user's call, however deep inside slt the warning arises (estimators share their runs, so a
    fixed `stacklevel` would point into slt from some of their callers)."""
    frame, level = sys._getframe(1), 2  # stacklevel 1 is this function, 2 its caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("slt."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def require_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """`value` as an int >= `minimum` and <= `MAX_INT` (an int64); bools, non-integral floats
    and NaN are refused.

    Raises:
      InputError: `value` is not an integer (a float such as 2.0 counts as one), is below
        `minimum` or does not fit an int64 (1e300, 10**20).
    """
    bound = "" if minimum is None else f" >= {minimum}"
    if not _is_real_number(value) or (
        not isinstance(value, numbers.Integral)
        and (not np.isfinite(value) or value != int(value))
    ):
        raise InputError(f"{name} must be an integer{bound}, got {value!r}")
    result = int(value)
    if minimum is not None and result < minimum:
        raise InputError(f"{name} must be an integer{bound}, got {result}")
    if abs(result) > MAX_INT:
        raise InputError(
            f"{name} must be an integer{bound} that fits a 64-bit integer (at most {MAX_INT}), "
            f"got {value!r}")
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
    result = _float(value)
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
    if not _is_real_number(value) or not inside(_float(value)):
        raise InputError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


def require_float_array(name: str, values: Any, *, allow_bool: bool = False) -> np.ndarray:
    """`values` (a number, a sequence or an array of numbers) as a float64 NumPy array.

    Raises:
      InputError: anything but integers and floats (and booleans, with `allow_bool`: data
        such as 0/1 observations): strings (even "0.5"), None, dicts, nested sequences of
        different lengths.
    """
    try:
        array = np.asarray(values)
    except ValueError:  # a ragged nested sequence
        array = None
    if array is None or array.dtype.kind not in ("biuf" if allow_bool else "iuf"):
        raise InputError(f"{name} must be a number or an array of numbers, got {values!r}")
    return array.astype(np.float64)


def require_one_of(name: str, value: Any, choices: Collection) -> Any:
    """`value` if it is one of `choices`.

    Raises:
      InputError: otherwise; the message lists the choices.
    """
    if not isinstance(value, str | type(None) | numbers.Number) or value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise InputError(f"{name} must be one of {listed}; got {value!r}")
    return value


def require_choices(name: str, value: Any, choices: Collection) -> tuple:
    """`value` as a tuple of entries of `choices`: one of them (a string), or a
    non-empty sequence of them.

    Raises:
      InputError: None, an empty sequence, a non-string entry or one not among `choices`;
        the message lists the choices.
    """
    listed = ", ".join(repr(choice) for choice in choices)
    entries = (value,) if isinstance(value, str) else value
    if not isinstance(entries, Collection) or isinstance(entries, Mapping) or not entries:
        raise InputError(f"{name} must be one or a sequence of {listed}; got {value!r}")
    unknown = [entry for entry in entries if not isinstance(entry, str) or entry not in choices]
    if unknown:
        raise InputError(f"{name}: unknown {unknown[0]!r}; available: {listed}")
    return tuple(entries)


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


def require_finite_tree(tree: Any, name: str, *, low_precision: bool = False) -> Any:
    """`tree` if every leaf is a finite float32 or float64 array (or bfloat16 / float16, with
    `low_precision`: the caller computes in float32 and casts to them inside the model).

    Raises:
      InputError: naming the first leaf that is not a float array (float16 and bfloat16
        included, without `low_precision`: slt computes in float32 or float64) or not finite.
    """
    allowed = PARAM_DTYPES + (LOW_PRECISION_DTYPES if low_precision else ())
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        label = f"{name}{jax.tree_util.keystr(path)}"
        array = np.asarray(leaf)
        if array.dtype.kind not in "fV" or (array.dtype.kind == "V"
                                            and array.dtype not in LOW_PRECISION_DTYPES):
            raise InputError(f"{label} has dtype {array.dtype}; parameters must be floats")
        if array.dtype not in allowed:
            raise InputError(
                f"{label} has dtype {array.dtype}; parameters must be float32 or float64 "
                f"(e.g. {name} = jax.tree.map(lambda a: a.astype(jnp.float32), {name}))")
        bad = ~np.isfinite(array)
        if bad.any():
            raise InputError(
                f"{label} is not finite ({int(bad.sum())} NaN or inf value(s)): {array}"
            )
    return tree


def require_params(problem: Any, params: Any, name: str = "params") -> Any:
    """`params` if it is a point of `problem`: same pytree structure and leaf shapes as
    `problem.init(key)` (unconstrained coordinates), float and finite (bfloat16 and float16
    too: `Problem.ravel` moves them to float32, and a `Problem.from_loss` casts them back to
    the model's dtypes inside the model).

    Raises:
      InputError: a missing or extra site, a leaf of the wrong shape, a non-float or a
        non-finite value; the message names the leaf.
    """
    expected = problem.unravel(jnp.zeros(problem.dim, problem.dtype))
    if jax.tree_util.tree_structure(params) != jax.tree_util.tree_structure(expected):
        given = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        wanted = sorted(expected) if isinstance(expected, Mapping) else "the model's pytree"
        if given == wanted:  # the same sites: a leaf given as a list or a tuple, not an array
            site = next(site for site in wanted if jax.tree_util.tree_structure(params[site])
                        != jax.tree_util.tree_structure(expected[site]))
            raise InputError(
                f"{name}[{site!r}] is a {type(params[site]).__name__}, not an array: give "
                f"jnp.asarray(...) of shape {np.shape(expected[site])} for each site"
            )
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
    return require_finite_tree(params, name, low_precision=True)


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
