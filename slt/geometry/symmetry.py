"""Parameter-space symmetries of two-layer networks and the Fisher null directions they explain.

For F(x) = U act(V x + b) + c with widths (n, h, m) = (input, hidden, output), parameters
V (h, n), b (h,), U (m, h), c (m,) (`slt.models.two_layer_network`; b, c optional), flattened
in the order V, b, U, c, row-major: the natural coordinates of `fisher_information`.

Symmetries (Zhao, Ganev, Walters, Yu, Dehmamy 2023; seed 003), each leaving F unchanged:

* identity activation: GL_h acts by (V, b, U, c) -> (g V, g b, U g^-1, c); with biases also
  the translations (b, c) -> (b + t, c - U t), so the affine group of the hidden layer.
  Generic orbit dimension h^2 - (h-n)+ (h-m)+, plus h with biases.
* ReLU (positively homogeneous): per-neuron scaling (V_k, b_k, U_:k) -> (g_k V_k, g_k b_k,
  U_:k / g_k), g_k > 0. Generic orbit dimension h (not min(h, max(n, m)) as printed in the
  paper's Theorem 3.3, which holds only at an aligned point: digest seed-003, erratum 1).
* tanh, sigmoid: no continuous symmetry (only permutations and, for tanh, sign flips).

An infinitesimal generator xi(theta) = d/dt (exp(tM) . theta) at t = 0 is tangent to the
orbit, so grad L(theta) . xi = 0 and I(theta) xi = 0 for every invariant likelihood: the
orbit directions lie in the Fisher null space. Whatever else is null is excess degeneracy
(dead, duplicated or silent units; for linear networks with min(n, m) < h < max(n, m), the
hidden directions the input layer never excites). `null_space_split` separates the two.

Under gradient flow on any invariant loss the quantities Q = V V^T + b b^T - U^T U (linear,
h x h) and q_k = |V_k|^2 + b_k^2 - |U_:k|^2 (ReLU, per neuron) are conserved; one gradient
descent step of size eta moves them by exactly eta^2 (G_V G_V^T + G_b G_b^T - G_U^T G_U)
(the diagonal of it for ReLU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from slt.geometry.fisher import FisherResult

__all__ = [
    "SYMMETRY_GROUPS",
    "NullSpaceSplit",
    "conserved_quantities",
    "expected_fisher_nullity",
    "expected_orbit_dimension",
    "generators",
    "move_along_orbit",
    "null_space_split",
    "orbit_dimension",
]

SYMMETRY_GROUPS = {
    "identity": "GL_h (and hidden-layer translations with biases)",
    "relu": "per-neuron positive scaling (R_>0)^h",
    "tanh": None,
    "sigmoid": None,
}

_SPAN_TOL = 1e-8  # relative singular-value cut for the span of the generators


def _check_activation(activation: str) -> None:
    if activation not in SYMMETRY_GROUPS:
        raise ValueError(f"activation must be one of {sorted(SYMMETRY_GROUPS)}, got {activation!r}")


def _network(values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """V, U (and b, c if present) as float arrays with consistent shapes."""
    if not isinstance(values, Mapping) or not {"V", "U"} <= set(values):
        raise ValueError("values must be a dict with 'V' (h, n), 'U' (m, h) and optionally b, c")
    unknown = set(values) - {"V", "b", "U", "c"}
    if unknown or (("b" in values) != ("c" in values)):
        raise ValueError(f"values must have V, U and both or neither of b, c; got {sorted(values)}")
    net = {k: np.asarray(values[k], dtype=np.float64) for k in ("V", "b", "U", "c") if k in values}
    h = net["V"].shape[0]
    expected = {"V": (h, net["V"].shape[-1]), "U": (net["U"].shape[0], h)}
    if "b" in net:
        expected.update(b=(h,), c=(net["U"].shape[0],))
    for name, shape in expected.items():
        if net[name].ndim != len(shape) or net[name].shape != shape:
            raise ValueError(f"{name} has shape {net[name].shape}, expected {shape}")
        if not np.all(np.isfinite(net[name])):
            raise ValueError(f"{name} is not finite")
    return net


def _flatten(tangent: dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([tangent[k].ravel() for k in ("V", "b", "U", "c") if k in tangent])


def generators(values: Mapping[str, Any], activation: str) -> np.ndarray:
    """The infinitesimal symmetry generators at `values`, as columns of a (d, g) matrix.

    identity: one column per E_ab (h^2 of them): (E V, E b, -U E, 0), then with biases one
    per translation e_a: (0, e_a, 0, -U e_a). ReLU: one per neuron k, E = E_kk.
    tanh / sigmoid: no columns. Rows follow the flat order V, b, U, c (row-major).

    Example:
      >>> spec = slt.models.two_layer_network(2, 2, 1, activation="identity", bias=False)
      >>> values = {"V": jnp.array([[1.0, 0.5], [-0.5, 1.0]]), "U": jnp.array([[1.0, -1.0]])}
      >>> request = slt.FisherRequest(x=jax.random.normal(key, (20, 2)))
      >>> fisher = slt.fisher_information(spec, values, request=request)
      >>> xi = generators(values, "identity")         # (h n + m h, h^2): U V = U A^-1 A V
      >>> xi.shape, fisher.dim - fisher.rank          # the generators span the null space
      ((6, 4), 4)
      >>> bool(np.abs(fisher.matrix @ xi).max() < 1e-12)
      True
    """
    _check_activation(activation)
    net = _network(values)
    h = net["V"].shape[0]
    zeros = {k: np.zeros_like(v) for k, v in net.items()}
    if activation in ("tanh", "sigmoid"):
        return np.zeros((sum(v.size for v in net.values()), 0))
    pairs = [(a, a) for a in range(h)] if activation == "relu" else [
        (a, c) for a in range(h) for c in range(h)
    ]
    columns = []
    for a, c in pairs:
        unit = np.zeros((h, h))
        unit[a, c] = 1.0
        tangent = dict(zeros, V=unit @ net["V"], U=-net["U"] @ unit)
        if "b" in net:
            tangent["b"] = unit @ net["b"]
        columns.append(_flatten(tangent))
    if activation == "identity" and "b" in net:
        for a in range(h):
            shift = np.eye(h)[a]
            columns.append(_flatten(dict(zeros, b=shift, c=-net["U"] @ shift)))
    return np.stack(columns, axis=1)


def _span_rank(matrix: np.ndarray) -> int:
    if matrix.size == 0:
        return 0
    singular = np.linalg.svd(matrix, compute_uv=False)
    return int(np.sum(singular > _SPAN_TOL * singular[0])) if singular[0] > 0 else 0


def orbit_dimension(values: Mapping[str, Any], activation: str) -> int:
    """The dimension of the symmetry orbit through `values`: the rank of `generators`."""
    return _span_rank(generators(values, activation))


def _widths(n, h, m) -> tuple[int, int, int]:
    widths = tuple(int(w) for w in (n, h, m))
    if min(widths) < 1:
        raise ValueError(f"widths must be positive, got {(n, h, m)}")
    return widths


def expected_orbit_dimension(n: int, h: int, m: int, activation: str, *, bias: bool = True) -> int:
    """Generic orbit dimension for widths (n, h, m): see the module docstring.

    identity: h^2 - (h-n)+ (h-m)+ (+ h with biases: the stabiliser of the affine action is
    still {M : M V = 0, U M = 0}); ReLU: h; tanh, sigmoid: 0.
    """
    _check_activation(activation)
    n, h, m = _widths(n, h, m)
    if activation == "identity":
        return h * h - max(h - n, 0) * max(h - m, 0) + (h if bias else 0)
    return h if activation == "relu" else 0


def expected_fisher_nullity(
    n: int,
    h: int,
    m: int,
    activation: str,
    *,
    bias: bool = True,
    dead_units: int = 0,
    zero_output_units: int = 0,
) -> int:
    """d - rank I(theta) at a generic point of a two-layer network (TRUTH.md section 4).

    Assumes inputs whose second-moment matrix E[[x; 1][x; 1]^T] is positive definite and
    numerous enough (n_inputs * m >= d).

    * identity: rank r (n + m - r) (+ m with biases), r = min(n, h, m); so nullity
      h (n + m) - r (n + m - r), or h (n + m + 1) - r (n + m - r) with biases.
      E.g. (3, 5, 2) without biases: 19; (5, 50, 10): 700.
    * ReLU: h (one scaling direction per neuron). A dead unit (inactive on every input; with
      biases) makes all its n + 1 incoming and m outgoing weights null: it adds n + m
      (TRUTH.md's "n + 1" is the scalar-output case m = 1). A live unit with zero outgoing
      weights adds n + bias - 1 (its incoming weights, less the scaling already counted).
    * tanh, sigmoid: 0; a unit with zero outgoing weights adds n + bias (its incoming
      weights and bias).

    Args:
      n, h, m: input, hidden and output widths.
      activation: "identity", "relu", "tanh" or "sigmoid".
      bias: whether the network has biases b, c.
      dead_units: ReLU units inactive on every input (needs biases).
      zero_output_units: live units whose outgoing weights U[:, k] are all 0.
    """
    _check_activation(activation)
    n, h, m = _widths(n, h, m)
    if dead_units < 0 or zero_output_units < 0 or dead_units + zero_output_units > h:
        raise ValueError("dead_units and zero_output_units must be >= 0 and at most h in total")
    if activation == "identity":
        if dead_units or zero_output_units:
            raise ValueError("for linear networks the rank formula already covers every point")
        r = min(n, h, m)
        return h * (n + m + (1 if bias else 0)) - r * (n + m - r)
    if dead_units and (activation != "relu" or not bias):
        raise ValueError("dead units are ReLU units with biases")
    if activation == "relu":
        return h + dead_units * (n + m) + zero_output_units * (n + int(bias) - 1)
    return zero_output_units * (n + int(bias))


@dataclass(frozen=True)
class NullSpaceSplit:
    """The Fisher null space split into symmetry directions and excess degeneracy.

    Attributes:
      nullity: d - rank of the Fisher matrix.
      symmetry_dimension: the dimension of the part of the null space spanned by the
        symmetry generators (the orbit's tangent space).
      excess_dimension: nullity - symmetry_dimension: null directions no symmetry explains.
      symmetry_basis: (d, symmetry_dimension), orthonormal; excess_basis: (d, excess), the
        orthogonal complement of the symmetry part within the null space.
      generator_leakage: |G - P G| / |G| for the generators G and the projector P on the
        null space: ~0 when the generators lie in the Fisher kernel, as they must.
      names: the coordinate names.
    """

    nullity: int
    symmetry_dimension: int
    excess_dimension: int
    symmetry_basis: np.ndarray = field(repr=False)
    excess_basis: np.ndarray = field(repr=False)
    generator_leakage: float
    names: tuple[str, ...] = field(repr=False)

    def excess_loadings(self) -> pd.Series:
        """How much of the excess null space sits on each coordinate (sums to the excess)."""
        return pd.Series((self.excess_basis**2).sum(axis=1), index=list(self.names))


def null_space_split(fisher: FisherResult, generator_matrix: np.ndarray) -> NullSpaceSplit:
    """Split the Fisher null space into the span of the symmetry generators and the excess.

    Args:
      fisher: a `FisherResult` in natural coordinates of a two-layer network.
      generator_matrix: (d, g) from `generators` at the same point.

    Returns:
      A `NullSpaceSplit`.

    Example:
      >>> spec = slt.models.two_layer_network(1, 2, 1, activation="relu")
      >>> values = {"V": jnp.array([[1.0], [-1.0]]), "b": jnp.array([0.5, 0.5]),
      ...           "U": jnp.array([[1.0, 2.0]]), "c": jnp.array([0.0])}
      >>> request = slt.FisherRequest(x=jnp.linspace(-2.0, 2.0, 9)[:, None])
      >>> fisher = slt.fisher_information(spec, values, request=request)
      >>> split = null_space_split(fisher, generators(values, "relu"))
      >>> split.symmetry_dimension, split.excess_dimension      # (h, 0) generically
      (2, 0)
    """
    generator_matrix = np.asarray(generator_matrix, dtype=np.float64)
    if generator_matrix.ndim != 2 or generator_matrix.shape[0] != fisher.dim:
        raise ValueError(
            f"generators must be (d={fisher.dim}, g), got {generator_matrix.shape}"
        )
    null = fisher.null_space()
    if generator_matrix.shape[1] == 0 or null.shape[1] == 0:
        rank, left, leakage = 0, np.eye(null.shape[1]), 0.0
    else:
        projected = null.T @ generator_matrix
        left = np.linalg.svd(projected, full_matrices=True)[0]
        rank = _span_rank(projected)
        leakage = float(
            np.linalg.norm(generator_matrix - null @ projected) / np.linalg.norm(generator_matrix)
        )
    return NullSpaceSplit(
        nullity=fisher.nullity,
        symmetry_dimension=rank,
        excess_dimension=fisher.nullity - rank,
        symmetry_basis=null @ left[:, :rank],
        excess_basis=null @ left[:, rank:],
        generator_leakage=leakage,
        names=fisher.names,
    )


def conserved_quantities(values: Mapping[str, Any], activation: str) -> np.ndarray:
    """Q of gradient flow: V V^T + b b^T - U^T U (identity, h x h); per neuron for ReLU (h,).

    Raises ValueError for tanh and sigmoid, which have no continuous symmetry.
    """
    _check_activation(activation)
    if SYMMETRY_GROUPS[activation] is None:
        raise ValueError(f"{activation} networks have no continuous symmetry, so no Q")
    net = _network(values)
    bias = net.get("b", np.zeros(net["V"].shape[0]))
    matrix = net["V"] @ net["V"].T + np.outer(bias, bias) - net["U"].T @ net["U"]
    return np.diag(matrix).copy() if activation == "relu" else matrix


def move_along_orbit(
    values: Mapping[str, Any], activation: str, group_element: Any, shift: Any = None
) -> dict[str, np.ndarray]:
    """Apply a symmetry: a new parameter point with the same network function.

    identity: g (h, h) invertible: (g V, g b + t, U g^-1, c - U g^-1 t) with t = `shift`
    (biases only; default 0). ReLU: g (h,) positive: (g_k V_k, g_k b_k, U_:k / g_k).

    Returns:
      The moved values, same keys as `values`.
    """
    _check_activation(activation)
    if SYMMETRY_GROUPS[activation] is None:
        raise ValueError(f"{activation} networks have no continuous symmetry to move along")
    net = _network(values)
    h = net["V"].shape[0]
    g = np.asarray(group_element, dtype=np.float64)
    if activation == "relu":
        if g.shape != (h,) or not np.all(g > 0):
            raise ValueError(f"a ReLU symmetry is a positive vector of shape ({h},)")
        g = np.diag(g)
    elif g.shape != (h, h) or not np.isfinite(np.linalg.cond(g)) or np.linalg.cond(g) > 1e12:
        raise ValueError(f"a linear-network symmetry is an invertible ({h}, {h}) matrix")
    if shift is not None and (activation != "identity" or "b" not in net):
        raise ValueError("shift (a translation of the hidden layer) needs identity and biases")
    inverse = np.linalg.inv(g)
    moved = dict(net, V=g @ net["V"], U=net["U"] @ inverse)
    if "b" in net:
        t = np.zeros(h) if shift is None else np.asarray(shift, dtype=np.float64)
        moved["b"] = g @ net["b"] + t
        moved["c"] = net["c"] - net["U"] @ inverse @ t
    return moved
