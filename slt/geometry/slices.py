"""Fisher landscapes along directions: slices through a point theta* of parameter space.

`fisher_slice(model, params, {"s": (u, s_grid), "t": (v, t_grid)})` computes, at every point

    theta(s, t) = theta* + s u + t v,        theta* = params,

the Fisher spectrum (log pseudo-det, trace, largest eigenvalue, smallest eigenvalue counted
by the rank, rank) and the loss (L_n on a `Problem`'s data, or the KL from theta*; see
`slt.geometry.scan`), in compiled chunks with a progress bar, like `fisher_scan`. Directions
are vectors (d,) in the chosen coordinates (ordered as the coordinate names, e.g.
`fisher_information(...).names`), or {site: array} in natural coordinates. Useful ones:

* `random_directions`: Gaussian directions, normalised as a whole ("unit"), per site, or
  per filter (each row of a weight matrix scaled to the norm of that row of theta*, biases
  and scalars zeroed; Li et al. 2018, "Visualizing the loss landscape of neural nets");
* Fisher eigenvectors: `fisher_information(...).eigenvectors[:, -1]` (the stiffest
  direction), `.null_space()[:, 0]` (a flat one);
* `direction_between(model, w1, w2)`: u = theta(w2) - theta(w1), so that s in [0, 1]
  passes through both points (a path between two minima).

Two methods (`method="auto"` picks by d):

* "dense" (d <= `MATRIX_FREE_DIM`): the d x d Fisher and its eigenvalues at every point, the
  program `fisher_scan` runs (all kinds, all models).
* "matrix_free" (d > `MATRIX_FREE_DIM`; Gaussian-noise and exponential-family models, exact
  kind; `MatrixFree(num_steps=k)` sets k): k Lanczos steps on the Fisher-vector product
  I v = J^T (w * (J v)) (a JVP and a VJP of the whitened outputs, `slt.geometry.matrix_free`)
  at every point, with the same key at every point (common random numbers: smooth maps).
  When the whitened outputs are fewer than the parameters (m = examples x rows < d, a big
  network on few inputs) the steps run on the Fisher's Gram twin G = W^1/2 J J^T W^1/2
  (m x m, the same nonzero eigenvalues; `slt.geometry.matrix_free.FisherOperator`) instead,
  at min(k, m) steps: with k >= m its whole spectrum, hence rank, log pdet and trace
  (= tr T), exactly, and vectors of length m instead of d. From the Ritz values
  r_1 <= ... <= r_k: max_eigenvalue = r_k (the top converges first), rank = #{r_i >
  rank_tol r_k} (a lower bound on the rank, by Cauchy interlacing; exact where
  `rank_is_exact`: the Krylov space was exhausted, or k = the operator's size), log_pdet =
  sum of log r_i over those (the log pseudo-det of I when the rank is exact; otherwise of I
  compressed to the Krylov space), smallest_nonzero = the smallest of those; trace = sum_i
  w_i |J_i|_F^2 exactly (from per-example Jacobians, or tr T when the steps span the
  operator). Memory per point O(k size), time O(k) products plus O(size k^2)
  reorthogonalisation, size = min(m, d).

The threshold: at d = 2000 a dense point costs a 2000 x 2000 eigendecomposition (8e9 flops,
about 1 s on one CPU core) and 32 MiB per matrix, while k = 30 Lanczos steps cost 30
products and 2.4e7 flops of reorthogonalisation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt import flat_random
from slt.geometry.fisher import prepare
from slt.geometry.kernels import fisher_trace_function
from slt.geometry.matrix_free import fisher_operator, lanczos, tridiagonal
from slt.geometry.observation import WHITENED_FAMILIES, observation_model
from slt.geometry.request import FisherRequest
from slt.geometry.scan import (
    DEFAULT_CHUNK_SIZE,
    FisherScan,
    Plane,
    PointSummary,
    check_grid,
    dense_point,
    scan_plane,
)
from slt.geometry.spectrum import spectrum_summary
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.validation import (
    InputError,
    require_instance,
    require_int,
    require_key,
    require_one_of,
    set_field,
)

__all__ = [
    "DEFAULT_NUM_STEPS",
    "MATRIX_FREE_DIM",
    "NORMALIZATIONS",
    "Direction",
    "MatrixFree",
    "direction_between",
    "fisher_slice",
    "lanczos_point_summary",
    "random_directions",
]

MATRIX_FREE_DIM = 2000  # method="auto" goes matrix-free above this d (module docstring)
# Lanczos steps per point: the largest eigenvalues of the networks in the tests converge to
# 1e-8 within 20 steps; 30 leave a margin. The rank is exact only with more steps than the
# number of distinct nonzero eigenvalues.
DEFAULT_NUM_STEPS = 30
NORMALIZATIONS = ("unit", "site", "filter")
_CHUNK_FLOATS = 2**28  # matrix-free: Lanczos bases (2 GiB) of one chunk, vmapped on a GPU


@dataclass(frozen=True)
class MatrixFree:
    """The matrix-free method of `fisher_slice`: k Lanczos steps on I(theta) at every point.

    At each point k = `num_steps` Lanczos steps on the Fisher-vector product (or on its Gram
    twin when that is smaller) give the largest eigenvalues, a lower bound on the rank that
    is exact once k exceeds the number of distinct nonzero eigenvalues, the log pseudo-det
    and the exact trace (module docstring). `method="matrix_free"` is `MatrixFree()`.

    It is a value rather than a `num_steps=` argument of `fisher_slice` because the step
    count belongs to the matrix-free method alone (a dense slice has no steps), and so that
    `fisher_slice` keeps to eight parameters with its key, request, chunks and progress bar.

    Attributes:
      num_steps: Lanczos steps k per point, an integer >= 1 (clipped to the operator's
        size). The default 30 (`DEFAULT_NUM_STEPS`): the largest eigenvalues of the networks
        in the tests converge to 1e-8 within 20 steps.

    Example:
      >>> MatrixFree(num_steps=50)
      MatrixFree(num_steps=50)
      >>> MatrixFree(num_steps=0)
      Traceback (most recent call last):
      slt.validation.InputError: num_steps must be an integer >= 1, got 0
    """

    num_steps: int = DEFAULT_NUM_STEPS

    def __post_init__(self):
        set_field(self, "num_steps", require_int("num_steps", self.num_steps,
                                                          minimum=1))


class Direction(NamedTuple):
    """A direction u (d,) in a model's coordinates, with how it was made (`kind`, recorded
    in a slice's attributes). A plain array given to `fisher_slice` has kind "given"."""

    vector: np.ndarray
    kind: str


def _coordinates_of(model, params, coordinates: str):
    """(the model's `Coordinates` in `coordinates`, theta of params), validated; no inputs
    needed. Call it inside `jax.enable_x64(True)`."""
    observation, values = observation_model(model, params)
    system = observation.coordinates(coordinates)
    theta = system.theta_at(values)
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"params are at infinity in {coordinates} coordinates: {values}")
    return system, theta


def random_directions(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    key: jax.Array,
    num_directions: int = 2,
    *,
    normalize: str = "unit",
    coordinates: str = "natural",
) -> list[Direction]:
    """Independent Gaussian directions through params, normalised for a slice.

    Each direction u ~ N(0, I_d) is rescaled:

    * "unit": |u| = 1;
    * "site": each site's block u_site to |theta*_site| (layer-wise normalisation);
    * "filter": each row of a site with two or more dimensions (a unit's incoming weights,
      rows along the site's first axis) to the norm of that row of theta*; sites with fewer
      dimensions (biases, scalars) are set to 0, as in Li et al. 2018, so that a step s
      changes every unit's weights by the fraction s of their size.

    Args:
      model, params, coordinates: as in `fisher_information`; theta* = params.
      key: PRNG key.
      num_directions: how many (>= 1).
      normalize: "unit", "site" or "filter".

    Returns:
      A list of `Direction`s, each (d,) float64.

    Raises:
      ValueError: an unknown normalisation, or one that leaves a direction zero (theta* is
        zero there, or "filter" on a model with no site of two or more dimensions).

    Example:
      >>> spec = slt.models.two_layer_network(1, 3, 1)
      >>> point = {"V": jnp.ones((3, 1)), "b": jnp.zeros(3), "U": jnp.ones((1, 3)),
      ...          "c": jnp.zeros(1)}
      >>> u, v = random_directions(spec, point, jax.random.key(0), normalize="filter")
      >>> u.kind       # d = 10: V (3 x 1), b (3,), U (1 x 3), c (1,)
      'random, filter-normalised'
      >>> np.abs(u.vector[:3]).round(12).tolist(), u.vector[3:6].tolist()  # rows of V; b
      ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
      >>> round(float(np.linalg.norm(u.vector[6:9])), 6), u.vector[9]    # U's one row; c
      (1.732051, np.float64(0.0))
    """
    normalize = require_one_of("normalize", normalize, NORMALIZATIONS)
    num_directions = require_int("num_directions", num_directions, minimum=1)
    require_key(key)
    with jax.enable_x64(True):
        system, theta = _coordinates_of(model, params, coordinates)
        draws = np.array(flat_random.normal(key, (num_directions, system.dim)))
    for vector in draws:
        if normalize == "unit":
            vector /= np.linalg.norm(vector)
            continue
        for shape, block, size in zip(system.shapes, system.split(vector), system.split(theta),
                                      strict=True):  # blocks of vector are views: set in place
            if normalize == "filter" and len(shape) < 2:
                block[:] = 0.0
                continue
            rows = shape[0] if normalize == "filter" else 1
            part, size = block.reshape(rows, -1), size.reshape(rows, -1)
            part *= (np.linalg.norm(size, axis=1) / np.linalg.norm(part, axis=1))[:, None]
        if not np.any(vector):
            raise ValueError(
                f"normalize={normalize!r} gives a zero direction at this point: params are 0 "
                "on every site it scales" + (" of two or more dimensions (biases and scalars "
                "are zeroed)" if normalize == "filter" else "") + "; use normalize='unit'"
            )
    label = "random" if normalize == "unit" else f"random, {normalize}-normalised"
    return [Direction(vector, label) for vector in draws]


def direction_between(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    other: Mapping[str, Any],
    *,
    coordinates: str = "natural",
) -> Direction:
    """u = theta(other) - theta(params): along it, s = 0 is params and s = 1 is `other`.

    Example:
      >>> spec = slt.models.fixed_component_mixture()
      >>> u = direction_between(spec, {"pi": 0.5, "mu": 0.0, "sigma": 1.0},
      ...                       {"pi": 0.5, "mu": 2.0, "sigma": 1.5})
      >>> u.vector.tolist(), u.kind
      ([0.0, 2.0, 0.5], 'segment')
    """
    with jax.enable_x64(True):
        (start_system, start), (end_system, end) = (
            _coordinates_of(model, point, coordinates) for point in (params, other)
        )
    if start_system.shapes != end_system.shapes:
        raise ValueError("params and other must have the same sites and shapes")
    return Direction(end - start, "segment")


def _direction_vector(name: str, direction: Any, coordinates) -> tuple[np.ndarray, str]:
    """(u (d,), kind) of one direction, or InputError naming it and the problem."""
    kind = "given"
    if isinstance(direction, Direction):
        direction, kind = direction
    elif isinstance(direction, Mapping):
        if coordinates.system != "natural":
            raise InputError(
                f"direction {name!r}: give it as a flat (d,) vector in unconstrained coordinates "
                "(a {site: array} direction is read in natural coordinates)"
            )
        missing = set(coordinates.site_names) - set(direction)
        if missing:
            raise InputError(f"direction {name!r} has no entries for the sites {sorted(missing)}")
        direction = coordinates.theta_at(direction)
    vector = np.asarray(direction, dtype=np.float64)
    if vector.shape != (coordinates.dim,):
        raise InputError(
            f"direction {name!r} has shape {vector.shape}; the model has d = {coordinates.dim} "
            f"coordinates, so it must be ({coordinates.dim},), ordered as "
            f"{list(coordinates.names[:3])}{' ...' if coordinates.dim > 3 else ''}"
        )
    if not np.all(np.isfinite(vector)):
        bad = np.flatnonzero(~np.isfinite(vector))
        raise InputError(
            f"direction {name!r} has {bad.size} non-finite entries, the first at "
            f"{coordinates.names[bad[0]]!r} ({vector[bad[0]]})"
        )
    if not np.any(vector):
        raise InputError(f"direction {name!r} is zero: a slice needs a nonzero direction")
    return vector, kind


def _parse_directions(directions, coordinates):
    """(names, directions (k, d), kinds, grids) of fisher_slice's `directions`, validated."""
    if not isinstance(directions, Mapping) or not 1 <= len(directions) <= 2:
        raise InputError(
            "directions must be a dict of one or two {name: (direction, grid)} entries, got "
            f"{len(directions) if isinstance(directions, Mapping) else type(directions).__name__}"
        )
    names, vectors, kinds, grids = [], [], [], []
    for name, entry in directions.items():
        if not isinstance(name, str) or not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise InputError(
                f"directions[{name!r}] must be a pair (direction, grid) under a str name"
            )
        vector, kind = _direction_vector(name, entry[0], coordinates)
        names.append(name)
        vectors.append(vector)
        kinds.append(kind)
        grids.append(check_grid(name, entry[1]))
    return names, np.stack(vectors), tuple(kinds), tuple(grids)


def lanczos_point_summary(observation, coordinates, num_steps: int, rank_tol: float):
    """The matrix-free summary of one point, as a pure, vmappable function.

    Returns:
      summary(theta, key, inputs, weights) -> {rank, rank_is_exact, log_pdet,
      smallest_nonzero, max_eigenvalue, trace}, from `num_steps` Lanczos steps on
      I(theta) v = J^T (w * (J v)), or on its Gram twin when that is smaller, started from
      `key`, and the exact trace (module docstring).
    """
    dim = coordinates.dim
    operator = fisher_operator(observation, coordinates)
    trace = fisher_trace_function(observation, coordinates)

    def summary(theta, key, inputs, weights):
        fisher = operator(theta, inputs, weights)
        # the smaller of I (d x d) and its Gram twin G (m x m): the same nonzero spectrum
        size, matvec = ((fisher.num_outputs, fisher.gram) if fisher.num_outputs < dim
                        else (dim, fisher.fisher))
        steps = min(num_steps, size)  # static: shapes are known when this is traced
        state = lanczos(matvec, key, size, steps)
        ritz = spectrum_summary(jnp.linalg.eigvalsh(tridiagonal(state)), rank_tol)
        return {
            "rank": ritz["rank"],
            "rank_is_exact": state.exhausted | (steps == size),
            "log_pdet": ritz["log_pdet"],
            "smallest_nonzero": ritz["smallest_nonzero"],
            "max_eigenvalue": ritz["max_eigenvalue"],
            # with steps spanning the operator T = Q^T A Q, Q orthogonal: tr T = tr A = tr I
            "trace": (jnp.sum(state.alphas) if steps == size
                      else trace(theta, inputs, weights)),
        }

    return summary


def _method(method: str | MatrixFree, setup, key) -> MatrixFree | None:
    """The method `method` resolves to, checked against the setup: None (dense) or the
    matrix-free settings."""
    dim = setup.coordinates.dim
    if not isinstance(method, MatrixFree):
        require_instance("method", method, str,
                         "'auto', 'dense', 'matrix_free' or a MatrixFree(num_steps=...)")
        require_one_of("method", method, ("auto", "dense", "matrix_free"))
    why = ""
    if method == "auto":
        method = "matrix_free" if dim > MATRIX_FREE_DIM else "dense"
        why = f" (chosen by method='auto' for d = {dim} > {MATRIX_FREE_DIM}; or pass " \
              "method='dense')"
    if method == "dense":
        return None
    if setup.kind != "exact" or setup.observation.family not in WHITENED_FAMILIES:
        raise InputError(
            f"{setup.observation.spec.name}: method='matrix_free'{why} needs kind='exact' and "
            "Gaussian-noise or exponential-family observations, got "
            f"kind={setup.kind!r} and {setup.observation.distribution_name} observations"
        )
    if key is None:
        raise InputError(
            f"method='matrix_free'{why} needs a PRNG key for the Lanczos start vectors: "
            "key=jax.random.key(0)"
        )
    require_key(key)
    return method if isinstance(method, MatrixFree) else MatrixFree()


def fisher_slice(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    directions: Mapping[str, tuple[Any, Any]],
    *,
    key: jax.Array | None = None,
    request: FisherRequest = FisherRequest(),
    method: str | MatrixFree = "auto",
    chunk_size: int | None = None,
    progress: bool = True,
) -> FisherScan:
    """Fisher spectrum and loss on a 1-D or 2-D slice theta* + s u + t v through params.

    See the module docstring for the directions, the methods and what each reports, and
    `slt.geometry.scan` for the loss.

    Args:
      model, params: the model (a `Problem` or a `ModelSpec`) and theta* (as in
        `fisher_information`).
      directions: {name: (direction, grid)} with one or two entries; a direction is a
        (d,) vector in the request's `coordinates`, a `Direction` (`random_directions`,
        `direction_between`) or {site: array} (natural coordinates); the grid holds the
        steps s along it (s = 0 is params). Names label the result's axes.
      key: the PRNG key of kind="monte_carlo" (the same at every point), or of the Lanczos
        start vectors of the matrix-free method (the same at every point).
      request: what to compute at every point (`FisherRequest`, as in `fisher_information`).
      method: "auto" (matrix-free for d > `MATRIX_FREE_DIM`), "dense", "matrix_free"
        (`MatrixFree()`), or `MatrixFree(num_steps=k)` for k Lanczos steps per point.
      chunk_size: points per compiled call (default 1024; matrix-free, fewer when their
        Lanczos bases would pass 2 GiB, since a chunk is vmapped on an accelerator).
      progress: show a progress bar (tqdm) advancing between chunks.

    Returns:
      A `FisherScan` with `directions` (k, d) and `direction_kinds`; its dataset's
      attributes hold the directions' kinds and norms. `plot()` draws the loss beside
      log pdet I.

    Raises:
      ValueError: what `fisher_information` rejects; not one or two directions, a
        direction that is not (d,), has non-finite entries or is zero, a grid that is not a
        non-empty 1-D array of finite numbers or that leaves the support; matrix-free
        without key, or for a model or kind it does not cover; an unknown method;
        chunk_size not an integer >= 1 (InputError, a ValueError).

    Example:
      >>> spec = slt.models.two_layer_network(1, 2, 1, activation="tanh")      # d = 7
      >>> point = {"V": jnp.array([[1.0], [-1.0]]), "b": jnp.array([0.5, 0.5]),
      ...          "U": jnp.array([[1.0, 2.0]]), "c": jnp.array([0.0])}
      >>> request = FisherRequest(x=jnp.linspace(-2.0, 2.0, 9)[:, None])
      >>> u = np.zeros(7); u[4] = 1.0                              # along U[0,0]
      >>> line = fisher_slice(spec, point, {"s": (u, [-1.0, 0.0])}, request=request,
      ...                     progress=False)
      >>> line["rank"].values.tolist()       # at s = -1 the first unit's output weight is 0
      [5, 7]
      >>> line["loss"].values.round(4).tolist()   # KL from params: 0 at s = 0
      [0.2849, 0.0]
      >>> lanczos = fisher_slice(spec, point, {"s": (u, [-1.0, 0.0])}, key=key,
      ...                        request=request, method=MatrixFree(num_steps=7),
      ...                        progress=False)
      >>> lanczos["rank"].values.tolist(), lanczos["rank_is_exact"].values.tolist()
      ([5, 7], [True, True])
    """
    if chunk_size is not None:
        chunk_size = require_int("chunk_size", chunk_size, minimum=1)
    with jax.enable_x64(True):
        setup = prepare(model, params, key=key if request.kind == "monte_carlo" else None,
                        request=request)
        matrix_free = _method(method, setup, key)
        names, vectors, kinds, grids = _parse_directions(directions, setup.coordinates)
        plane = Plane(setup.theta, setup.theta, vectors, grids)
        dim, rank_tol = setup.coordinates.dim, setup.rank_tol
        if matrix_free is None:
            point = PointSummary(lambda: dense_point(setup), (rank_tol,))
        else:
            steps = min(matrix_free.num_steps, dim)
            summary = lanczos_point_summary(setup.observation, setup.coordinates, steps,
                                            rank_tol)

            def build():
                return lambda theta, arrays, key: summary(theta, key, arrays.inputs,
                                                          arrays.weights)

            point = PointSummary(build, (steps, rank_tol), "matrix_free", key)
            if chunk_size is None:
                chunk_size = max(1, min(DEFAULT_CHUNK_SIZE, _CHUNK_FLOATS // ((steps + 1) * dim)))
        return scan_plane(
            setup, plane, names, np.zeros(len(names)), point,
            chunk_size=chunk_size or DEFAULT_CHUNK_SIZE, progress=progress,
            direction_kinds=kinds,
        )
