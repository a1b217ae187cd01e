"""Whole Equinox modules as parameters: slt samples their float arrays, the rest held fixed.

An Equinox module is a pytree whose leaves are not all weights: an `eqx.nn.MLP` holds its
activation functions, `eqx.nn.Dropout` a rate (a Python float) and a flag, a model may keep
integer buffers. Given a module as `params`, `slt.Problem.from_loss` (and `from_predict`)
split it as Equinox's own `eqx.partition(module, eqx.is_inexact_array)` does: the float arrays
are the parameters slt samples, ravels and localizes; every other leaf is held at its value
in the module given, and the user's `nll_fn` still receives whole modules
(`eqx.combine(weights, fixed)`). Every function taking `params` (`slt.llc`, `slt.llc_table`,
`slt.LocalPosterior(restrict_to=...)` masks, ...) then takes the module as it is, and
`Problem.unravel` returns modules. The same λ̂ comes out (same key) as from the explicit
partition, `Problem.from_loss(lambda w, batch: nll_fn(eqx.combine(w, fixed), batch), w, data)`.

Other pytrees are unchanged: a non-float leaf of a dict is refused, as before.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import jax

from slt.validation import InputError

__all__ = ["FixedLeaves", "held_fixed", "sampled_part", "whole"]


class FixedLeaves(NamedTuple):
    """What a module's parameters leave out.

    Attributes:
      is_weight: a pytree of booleans shaped like the module: True at the float arrays.
      fixed: the module with its float arrays set to None (`eqx.partition`'s second part).
    """

    is_weight: Any
    fixed: Any


def held_fixed(params: Any) -> FixedLeaves | None:
    """The non-weight leaves of `params` if it is an Equinox module, else None."""
    equinox = sys.modules.get("equinox")  # a module exists only once Equinox is imported
    if equinox is None or not isinstance(params, equinox.Module):
        return None
    is_weight = jax.tree_util.tree_map(equinox.is_inexact_array, params)
    return FixedLeaves(is_weight, equinox.filter(params, is_weight, inverse=True))


def sampled_part(params: Any, fixed: FixedLeaves | None) -> Any:
    """The leaves slt samples: `params` itself, or a module's float arrays (the others None).

    The positions come from the problem's module, not from the leaves given: a mask or a
    point shaped like the module (a float at an activation's place) splits the same way.

    Raises:
      InputError: `params` not shaped like the problem's module.
    """
    if fixed is None:
        return params
    expected = jax.tree_util.tree_structure(fixed.is_weight)
    if jax.tree_util.tree_structure(params) != expected:
        raise InputError(f"params must have the structure of the module the problem was "
                         f"built from, {expected}; got {jax.tree_util.tree_structure(params)}")
    return sys.modules["equinox"].filter(params, fixed.is_weight)


def whole(sampled: Any, fixed: FixedLeaves | None) -> Any:
    """The module from its sampled float arrays and its fixed leaves (`eqx.combine`)."""
    if fixed is None:
        return sampled
    return sys.modules["equinox"].combine(sampled, fixed.fixed)
