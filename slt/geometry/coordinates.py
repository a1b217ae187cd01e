"""Coordinates for Fisher geometry: a model's latent sites as one flat vector theta in R^d.

Two coordinate systems are offered; a Fisher matrix is only meaningful together with the
system it is written in (under theta = phi(u), I_u = J^T I_theta J with J = d theta / d u).

* ``"natural"`` (the default): every site's own constrained value, entry by entry, e.g.
  (pi, mu, sigma) for the slides' mixture, the weights and biases for a network. A simplex
  site (mixture weights w_1..w_K) contributes its first K - 1 entries, w_K = 1 - sum(others).
  Boundary points of a site's support (pi = 0, a zero mixture weight) are allowed: the
  singular sets of mixtures lie there.
* ``"unconstrained"``: the coordinates NumPyro and `slt.Problem` sample in
  (`numpyro.distributions.biject_to`): log sigma, logit pi, stick-breaking simplex, ...
  Boundary points are at infinity in these coordinates and are refused.

Coordinates are named ``site`` for a scalar site and ``site[i,j]`` for an array site, in the
order the model samples its sites and row-major (C) order within a site.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import biject_to, constraints

__all__ = ["COORDINATE_SYSTEMS", "Coordinates", "coordinate_names", "in_support"]

COORDINATE_SYSTEMS = ("natural", "unconstrained")


def _base_constraint(support):
    while isinstance(support, constraints._IndependentConstraint):
        support = support.base_constraint
    return support


def _is_simplex(support) -> bool:
    return isinstance(_base_constraint(support), constraints._Simplex)


def _coordinate_shape(system: str, shape: tuple[int, ...], support) -> tuple[int, ...]:
    """The shape of a site's block of coordinates (a simplex loses its last entry)."""
    if system == "unconstrained":
        return tuple(biject_to(support).inverse_shape(shape))
    if _is_simplex(support):
        return shape[:-1] + (shape[-1] - 1,)
    return shape


def _check_natural_support(name: str, support) -> None:
    """Natural coordinates exist for supports that are boxes (open, half-open) or simplices."""
    base = _base_constraint(support)
    if isinstance(base, (constraints._Real, constraints._GreaterThan, constraints._LessThan,
                         constraints._Interval, constraints._Simplex)):
        return
    raise ValueError(
        f"site {name!r} has support {support}, which has no natural flat coordinates; "
        "use coordinates='unconstrained'"
    )


_SIMPLEX_TOL = 1e-6  # NumPyro's own tolerance on the sum of a simplex


def in_support(value: np.ndarray, support) -> bool:
    """Whether a (numpy) value lies in a support, boundary included (pi = 0 is allowed).

    Boxes and simplices are checked in numpy; any other constraint by NumPyro itself.
    """
    base = _base_constraint(support)
    value = np.asarray(value, dtype=np.float64)
    if isinstance(base, constraints._Simplex):
        total = value.sum(axis=-1)
        return bool(np.all(value >= 0) and np.all(np.abs(total - 1.0) < _SIMPLEX_TOL))
    if isinstance(base, constraints._Interval):
        return bool(np.all((value >= base.lower_bound) & (value <= base.upper_bound)))
    if isinstance(base, constraints._GreaterThan):
        return bool(np.all(value > base.lower_bound))
    if isinstance(base, constraints._LessThan):
        return bool(np.all(value < base.upper_bound))
    if isinstance(base, constraints._Real):
        return bool(np.all(np.isfinite(value)))
    return bool(np.all(support(value)))


def coordinate_names(site_names, shapes) -> tuple[str, ...]:
    """Labels ``site`` (scalar) or ``site[i,j]`` (row-major) for blocks of the given shapes."""
    names = []
    for site, shape in zip(site_names, shapes, strict=True):
        if shape == ():
            names.append(site)
        else:
            names.extend(
                f"{site}[{','.join(map(str, index))}]" for index in product(*map(range, shape))
            )
    return tuple(names)


@dataclass(frozen=True, eq=False)
class Coordinates:
    """A flat coordinate system theta in R^d for the latent sites of a model.

    Build one with `Coordinates.build(system, site_names, shapes, supports)`; `to_values`
    and `from_values` are pure, differentiable JAX maps between theta and the dict of
    constrained site values that the model (and `ModelSpec.simulate`) takes.

    Attributes:
      system: "natural" or "unconstrained" (see the module docstring).
      site_names: the latent sites, in the model's order.
      shapes: each site's constrained shape.
      supports: each site's support (a NumPyro constraint).
      sizes: how many coordinates each site contributes.
      names: one label per coordinate, length `dim`.
    """

    system: str
    site_names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    supports: tuple[Any, ...]
    sizes: tuple[int, ...]
    names: tuple[str, ...]

    @classmethod
    def build(cls, system: str, site_names, shapes, supports) -> Coordinates:
        """The coordinate system `system` for sites of the given shapes and supports."""
        if system not in COORDINATE_SYSTEMS:
            raise ValueError(f"coordinates must be one of {COORDINATE_SYSTEMS}, got {system!r}")
        shapes = tuple(tuple(int(s) for s in shape) for shape in shapes)
        if system == "natural":
            for name, support in zip(site_names, supports, strict=True):
                _check_natural_support(name, support)
        blocks = [_coordinate_shape(system, s, c) for s, c in zip(shapes, supports, strict=True)]
        sizes = tuple(int(np.prod(block, dtype=int)) for block in blocks)
        names = coordinate_names(site_names, blocks)
        return cls(system, tuple(site_names), shapes, tuple(supports), sizes, names)

    @property
    def dim(self) -> int:
        """The number of coordinates d."""
        return sum(self.sizes)

    def split(self, theta: jnp.ndarray) -> list:
        """theta (d,) -> one block per site, in site order (views, for a numpy theta)."""
        offsets = np.cumsum((0,) + self.sizes)
        return [theta[offsets[k] : offsets[k + 1]] for k in range(len(self.sizes))]

    def to_values(self, theta: jnp.ndarray) -> dict[str, jnp.ndarray]:
        """theta (d,) -> {site: constrained value}; differentiable, works under jit and vmap."""
        values = {}
        for name, shape, support, part in zip(
            self.site_names, self.shapes, self.supports, self.split(theta), strict=True
        ):
            if self.system == "unconstrained":
                transform = biject_to(support)
                values[name] = transform(part.reshape(transform.inverse_shape(shape)))
            elif _is_simplex(support):
                free = part.reshape(shape[:-1] + (shape[-1] - 1,))
                last = 1.0 - jnp.sum(free, axis=-1, keepdims=True)
                values[name] = jnp.concatenate([free, last], axis=-1)
            else:
                values[name] = part.reshape(shape)
        return values

    def from_values(self, values: Mapping[str, Any]) -> jnp.ndarray:
        """{site: constrained value} -> theta (d,); the inverse of `to_values`."""
        parts = []
        for name, support in zip(self.site_names, self.supports, strict=True):
            value = jnp.asarray(values[name])
            if self.system == "unconstrained":
                value = biject_to(support).inv(value)
            elif _is_simplex(support):
                value = value[..., :-1]
            parts.append(jnp.ravel(value))
        return jnp.concatenate(parts)

    @cached_property
    def _host_maps(self):
        return jax.jit(self.to_values), jax.jit(self.from_values)

    def values_at(self, theta: Any) -> dict[str, np.ndarray]:
        """`to_values` on the host: numpy in, numpy out (compiled once per system)."""
        values = self._host_maps[0](jnp.asarray(theta, dtype=jnp.float64))
        return {name: np.asarray(value) for name, value in values.items()}

    def theta_at(self, values: Mapping[str, Any]) -> np.ndarray:
        """`from_values` on the host: numpy in, numpy out (compiled once per system)."""
        values = {name: jnp.asarray(values[name], dtype=jnp.float64) for name in self.site_names}
        return np.asarray(self._host_maps[1](values))

    def index(self, key) -> int:
        """The position in theta of a coordinate named by `key`.

        `key` is a coordinate label ("mu", "V[1,0]"), a site name of a one-coordinate site,
        or a pair (site, index) with index an int or a tuple of ints ("V", (1, 0)).
        """
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str):
            site, index = key
            index = (index,) if isinstance(index, (int, np.integer)) else tuple(index)
            label = f"{site}[{','.join(str(int(i)) for i in index)}]" if index else site
        elif isinstance(key, str):
            label = key
        else:
            raise ValueError(f"a scan axis is a coordinate name or (site, index), got {key!r}")
        if label in self.names:
            return self.names.index(label)
        if label in self.site_names:
            k = self.site_names.index(label)
            if self.sizes[k] == 1:
                return int(sum(self.sizes[:k]))
            raise ValueError(
                f"site {label!r} has {self.sizes[k]} coordinates; name one, e.g. "
                f"({label!r}, 0) or {self.names[sum(self.sizes[:k])]!r}"
            )
        raise ValueError(f"unknown coordinate {label!r}; the coordinates are {list(self.names)}")
