"""Argument checks shared by the modules of `slt.truth`.

Each returns its argument in the type the formulas use (Python int or float, exact
:class:`fractions.Fraction`, float64 numpy array), or raises ValueError naming the argument.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np


def _as_int(name: str, value, minimum: int | None = None) -> int:
    """`value` as a Python int, or ValueError naming `name`.

    Accepts Python and numpy integers; rejects bools, floats (even integral ones) and
    anything else, so that a width of 2.5 or True is an error rather than a guess.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got the bool {value!r}")
    try:
        result = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {result}")
    return result


def _as_int_list(name: str, values, minimum: int) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}")
    return [_as_int(f"{name}[{i}]", v, minimum) for i, v in enumerate(values)]


def _positive_rational(name: str, value) -> Fraction:
    """`value` (int, Fraction or float > 0) as an exact Fraction; a float is read as the
    decimal it prints as (0.1 -> 1/10), not as its binary expansion."""
    problem = ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if isinstance(value, (bool, np.bool_)):
        raise problem
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise problem
        value = Fraction(str(float(value)))
    elif isinstance(value, (int, np.integer)):
        value = Fraction(int(value))
    elif not isinstance(value, Fraction):
        raise problem
    if value <= 0:
        raise problem
    return value


def _positive(name: str, value) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not (math.isfinite(result) and result > 0.0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return result


def _finite(name: str, value, *, nonnegative: bool = False) -> float:
    """`value` as a finite float (>= 0 with `nonnegative`), else a ValueError naming `name`."""
    message = f"{name} must be a finite number{' >= 0' if nonnegative else ''}, got {value!r}"
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not (math.isfinite(result) and (result >= 0.0 or not nonnegative)):
        raise ValueError(message)
    return result


def _vector(name: str, value) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf")
    return array


def _design(X, y) -> tuple:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n, d), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf")
    y = _vector("y", y)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
    return X, y


def _same_length(name_x: str, x: np.ndarray, name_y: str, y: np.ndarray) -> None:
    if x.shape != y.shape:
        raise ValueError(
            f"{name_x} and {name_y} must have the same length, got {x.shape} and {y.shape}"
        )
