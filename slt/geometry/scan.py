"""Fisher information over a 1-D or 2-D grid of parameter values: where the model is singular.

`fisher_scan(model, params, axes={"mu": grid})` varies one or two coordinates over their
grids, holds the others at `params`, and computes the Fisher matrix and its spectrum at every
grid point inside compiled code, in chunks of `chunk_size` points (one compiled call per
chunk; a progress bar advances between chunks). Within a chunk the points are vmapped on
an accelerator and looped over in compiled code (`lax.map`) on CPU, which is faster there.
Only the chunk's matrices are ever in memory, so memory is O(chunk_size * d^2) plus the
O(grid) results, whatever the grid size.

Every scan is a plane through parameter space,

    theta(s, t) = origin + s u + t v,    s, t on their grids,

which `slt.geometry.slices.fisher_slice` fills with directions u, v through theta* = params
(origin = theta*); a coordinate scan has unit vectors u, v and origin = params with the
scanned coordinates set to 0, so that they take the grid values exactly. The directions
and the grids are arguments of the compiled program: a scan at a new point, along other
coordinates or other directions of the same grid shape compiles nothing.

The result holds, per grid point, the rank, log det, log pseudo-det, extreme eigenvalues,
smallest eigenvalue counted by the rank, condition number (`slt.geometry.spectrum`), the
trace of I, and a loss:

* "nll", when there are observed data (a `Problem`'s data, or `data` of kind="empirical"):
  L_n(theta) = -(1/n) sum_i log p(y_i | x_i, theta), the mean negative log-likelihood with
  its constants (over all the data, unweighted);
* "kl", otherwise: K(theta) = sum_j w_j KL(p(. | x_j, theta*) || p(. | x_j, theta)), the
  divergence from params over the inputs x and their weights (`slt.geometry.kl`), whose
  Hessian at theta* is I(theta*); absent for models with no exact KL (Monte Carlo only).

Plot log det and rank, not det: det I depends on the coordinates (it scales by det(J)^2
under a reparametrisation), its zero set and the rank do not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr
from tqdm.auto import tqdm

from slt.geometry.coordinates import in_support
from slt.geometry.fisher import FisherSetup, prepare
from slt.geometry.kernels import fisher_function
from slt.geometry.kl import exact_kl_available, kl_function
from slt.geometry.request import FisherRequest
from slt.geometry.spectrum import spectrum_summary
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.results import Persistable
from slt.validation import InputError, require_float_array, require_int

__all__ = [
    "FisherScan",
    "Plane",
    "PointSummary",
    "check_grid",
    "coordinate_plane",
    "fisher_scan",
    "scan_plane",
]

DEFAULT_CHUNK_SIZE = 1024  # grid points per compiled call (one progress-bar step)

LOSS_LABELS = {
    "nll": "L_n(theta), mean negative log-likelihood of the data",
    "kl": "KL(p_theta* || p_theta) from params, over the inputs x",
}


@dataclass(frozen=True)
class FisherScan(Persistable):
    """The Fisher spectrum and the loss over a grid of one or two coordinates or directions.

    Attributes:
      dataset: xarray Dataset with one dimension per axis (named by the coordinate, e.g.
        "pi", "V[1,0]", or by the direction, e.g. "s") and the variables rank, log_det,
        log_pdet, min_eigenvalue, smallest_nonzero (the smallest eigenvalue counted by the
        rank, nan at rank 0), max_eigenvalue, condition_number, trace and loss (see the
        module docstring). A matrix-free slice has rank (a lower bound), rank_is_exact,
        log_pdet, smallest_nonzero, max_eigenvalue, trace and loss
        (`slt.geometry.slices`).
      axes: the scanned coordinate or direction names, in order.
      dim: d, the number of coordinates (full rank = d).
      kind, coordinates, rank_tol, model_name: as in `FisherResult`.
      base: the point the scan is centred on (constrained values of params).
      run_time: seconds of the chunked computation (compilation included, not measured
        apart).
      loss_kind: "nll" or "kl" (module docstring), or None where the model has no exact
        loss (then the dataset has no "loss").
      method: "dense" (eigenvalues of the d x d matrix) or "matrix_free" (Lanczos).
      directions: the slice's direction vectors (k, d) in `coordinates` (None for a
        coordinate scan); direction_kinds: how each was made ("random", "segment", ...).
    """

    dataset: xr.Dataset = field(repr=False)
    axes: tuple[str, ...]
    dim: int
    kind: str
    coordinates: str
    rank_tol: float
    model_name: str
    base: dict[str, np.ndarray] = field(repr=False)
    run_time: float = field(repr=False)
    loss_kind: str | None = None
    method: str = "dense"
    directions: np.ndarray | None = field(default=None, repr=False)
    direction_kinds: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> xr.DataArray:
        """A variable of the dataset, e.g. scan["log_det"]."""
        return self.dataset[name]

    def to_xarray(self) -> xr.Dataset:
        """The scan as an xarray Dataset."""
        return self.dataset

    def singular(self) -> xr.DataArray:
        """Boolean map of the grid points where rank < d (the singular set, numerically);
        for a matrix-free slice, only where the rank is exact (elsewhere it is a lower
        bound, and the point is not counted)."""
        singular = self.dataset["rank"] < self.dim
        if "rank_is_exact" in self.dataset:
            singular = singular & self.dataset["rank_is_exact"]
        return singular

    def summary(self) -> pd.DataFrame:
        """How many grid points have each rank, with the log det range over them."""
        frame = self.dataset[["rank", "log_pdet"]].to_dataframe().reset_index()
        table = frame.groupby("rank")["log_pdet"].agg(["count", "min", "max"])
        return table.rename(columns={"min": "min_log_pdet", "max": "max_log_pdet"})

    def plot(self, axes=None):
        """1-D: log det and rank curves; 2-D: log det and rank maps, singular set outlined.
        A slice along directions: the loss beside log pdet, rank changes marked."""
        from slt.plots.fisher import plot_scan

        return plot_scan(self, axes=axes)

    def __repr__(self) -> str:
        shape = " x ".join(f"{n} ({self.dataset.sizes[n]})" for n in self.axes)
        ranks = np.unique(self.dataset["rank"].values)
        along = f" along {', '.join(self.direction_kinds)} directions" if self.directions is not \
            None else ""
        return (
            f"FisherScan({self.kind}, {self.method}; {self.model_name}; {shape}{along}; "
            f"d={self.dim}; ranks seen {ranks.tolist()}; {int(self.singular().sum())} singular "
            f"points; rank_tol={self.rank_tol:g}; loss={self.loss_kind})"
        )


class Plane(NamedTuple):
    """A scan's points theta = origin + sum_k grids[k][i_k] directions[k] (module docstring).

    base: theta* (d,), the loss's reference point; origin: (d,); directions: (k, d) with
    k = 1 or 2; grids: k 1-D arrays. numpy on the host, JAX arrays inside the program.
    """

    base: Any
    origin: Any
    directions: Any
    grids: tuple

    def points(self, steps):
        """theta at the grid values `steps` (m, k): origin + steps @ directions, (m, d)."""
        return self.origin + steps @ self.directions


def coordinate_plane(theta: np.ndarray, indices: Sequence[int], grids) -> Plane:
    """The plane of a coordinate scan through theta: unit directions along the coordinates
    `indices`, origin theta with those coordinates set to 0 (module docstring)."""
    origin = theta.copy()
    origin[list(indices)] = 0.0
    return Plane(theta, origin, np.eye(theta.shape[0])[list(indices)], tuple(grids))


def check_grid(name: Any, grid: Any) -> np.ndarray:
    """`grid` as a non-empty 1-D float64 array of finite numbers, or InputError naming `name`."""
    grid = require_float_array(f"the grid of {name!r}", grid)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)):
        raise InputError(f"the grid of {name!r} must be a non-empty 1-D array of finite numbers")
    return grid


def _grids(axes: Mapping[Any, Any], coordinates) -> tuple[list[int], list[str], list[np.ndarray]]:
    if not isinstance(axes, Mapping) or not 1 <= len(axes) <= 2:
        raise ValueError("axes must be a dict of one or two {coordinate: grid} entries")
    indices, names, grids = [], [], []
    for key, grid in axes.items():
        index = coordinates.index(key)
        indices.append(index)
        names.append(coordinates.names[index])
        grids.append(check_grid(key, grid))
    if len(set(indices)) != len(indices):
        raise ValueError(f"the axes {list(axes)} name the same coordinate twice")
    return indices, names, grids


def _corners(grids) -> np.ndarray:
    """The grid values (2^k, k) at the corners of the scanned rectangle."""
    return np.array(list(product(*[(g.min(), g.max()) for g in grids])))


def _check_in_support(setup: FisherSetup, plane: Plane, names: Sequence[str]) -> None:
    """Natural supports are convex boxes or simplices, and a plane's grid covers a
    parallelogram: checking its corners suffices."""
    if setup.coordinates.system != "natural":
        return
    corners = _corners(plane.grids)
    for corner, theta in zip(corners, plane.points(corners), strict=True):
        values = setup.coordinates.values_at(theta)
        for name, support in zip(setup.coordinates.site_names, setup.coordinates.supports,
                                 strict=True):
            if not in_support(values[name], support):
                raise ValueError(
                    f"the grid leaves the support of {name!r} ({support}) at "
                    f"{dict(zip(names, corner.tolist(), strict=True))}"
                )


def _extent_points(plane: Plane, centers: np.ndarray) -> np.ndarray:
    """theta*, the grid corners and the axis lines through `centers` (grid values): where a
    mixture's spread is extreme when component means and scales are monotone along each
    direction."""
    steps = [_corners(plane.grids)]
    for k, grid in enumerate(plane.grids):
        line = np.repeat(centers[None], grid.size, axis=0)
        line[:, k] = grid
        steps.append(line)
    return np.concatenate([plane.base[None], plane.points(np.concatenate(steps))])


def _loss(setup: FisherSetup, points: np.ndarray):
    """(loss kind, loss(theta, base, arrays) or None, its arrays): see the module docstring."""
    observation, coordinates = setup.observation, setup.coordinates
    if setup.kind == "empirical" or isinstance(setup.model, Problem):
        observed = setup if setup.kind == "empirical" else prepare(
            setup.model, setup.values,
            request=FisherRequest(kind="empirical", coordinates=coordinates.system),
        )

        def nll(theta, base, arrays):
            values = coordinates.to_values(theta)
            return -jnp.mean(observation.log_density(values, arrays.inputs, arrays.outputs))

        return "nll", nll, observed.arrays
    if not exact_kl_available(observation):
        return None, None, None
    kl = kl_function(observation, coordinates)
    arrays = setup.with_nodes(points, exact=True)
    return "kl", lambda theta, base, arrays: kl(base, theta, arrays), arrays


def dense_point(setup: FisherSetup):
    """summary(theta, arrays, key) -> the spectrum summary and trace of the d x d Fisher."""
    fisher = fisher_function(setup.kind, setup.observation, setup.coordinates,
                             num_draws=setup.num_draws)
    rank_tol = setup.rank_tol

    def summary(theta, arrays, key):
        matrix = fisher(theta, arrays)[0]
        matrix = 0.5 * (matrix + matrix.T)
        return {**spectrum_summary(jnp.linalg.eigvalsh(matrix), rank_tol),
                "trace": jnp.trace(matrix)}

    return summary


def _summary_function(point, loss, shape):
    """summarize(flat_index, plane, arrays, loss_arrays, key) -> `point`'s summary (and the
    loss) at each grid point numbered in `flat_index` (row-major over `shape`)."""

    def summarize(flat_index, plane, arrays, loss_arrays, key):
        positions = jnp.unravel_index(flat_index, shape)
        steps = jnp.stack([grid[i] for grid, i in zip(plane.grids, positions, strict=True)], 1)

        def at(theta):
            summary = point(theta, arrays, key)
            if loss is not None:
                summary["loss"] = loss(theta, plane.base, loss_arrays)
            return summary

        return jax.lax.map(at, plane.points(steps),
                           batch_size=_points_per_step(flat_index.shape[0]))

    return summarize


def _points_per_step(chunk: int) -> int | None:
    """Grid points computed together inside a chunk: all of them (vmap) on an accelerator;
    one at a time (a compiled loop, `lax.map`) on CPU, where the vmapped working set falls
    out of cache: measured 2.5x (mixture, 256 quadrature nodes) to 3x (tanh network, d = 114)
    faster per point than vmapping 1024 or 256 points."""
    return None if jax.default_backend() == "cpu" else chunk


def _in_chunks(summarize, total: int, chunk: int, progress: bool) -> dict[str, np.ndarray]:
    """{summary field: (total,) values}: `summarize(flat_index)` over the grid points
    0 .. total - 1, `chunk` at a time (the last chunk padded by repeating the last point, so
    that every call has one shape), a progress bar advancing between chunks."""
    results = {}
    with tqdm(total=total, unit="point", disable=not progress, desc="fisher_scan") as bar:
        for start in range(0, total, chunk):
            flat = np.minimum(np.arange(start, start + chunk), total - 1)
            stop = min(start + chunk, total)
            for name, value in summarize(jnp.asarray(flat)).items():
                value = np.asarray(value)
                results.setdefault(name, np.empty(total, value.dtype))[start:stop] = \
                    value[: stop - start]
            bar.update(stop - start)
    return results


class PointSummary(NamedTuple):
    """How `scan_plane` summarises one point of a plane.

    build: () -> summary(theta, arrays, key) -> dict of per-point values (`dense_point`, or
      the matrix-free summary of `slt.geometry.slices`); settings: what it depends on besides
      the setup (they key its compiled program); method: its name ("dense" or "matrix_free");
      key: the PRNG key it is given at every point (None: it needs none).
    """

    build: Callable[[], Callable]
    settings: tuple
    method: str = "dense"
    key: jax.Array | None = None


def scan_plane(  # the one runner of `fisher_scan` and `fisher_slice`
    setup: FisherSetup,
    plane: Plane,
    names: Sequence[str],
    centers: np.ndarray,
    point: PointSummary,
    *,
    chunk_size: int,
    progress: bool,
    direction_kinds: tuple[str, ...] | None = None,
) -> FisherScan:
    """Compute `point`'s per-point summary (and the loss) over a plane, in compiled chunks.

    Call it inside `jax.enable_x64(True)`. `centers` are grid values (k,) of the axis lines
    that bound a mixture's extent (params' own values for a coordinate scan). The rank
    tolerance is the setup's request's. `direction_kinds` marks a slice: its directions and
    their kinds and norms are recorded.
    """
    _check_in_support(setup, plane, names)
    points = _extent_points(plane, centers)
    arrays = setup.with_nodes(points)
    loss_kind, loss, loss_arrays = _loss(setup, points)
    shape = tuple(g.size for g in plane.grids)
    total = int(np.prod(shape))
    method, rank_tol = point.method, setup.rank_tol
    # one program per scan structure: a new point, new directions or grid values reuse it
    summarize = setup.compiled(
        "fisher_scan", lambda: _summary_function(point.build(), loss, shape),
        method, *point.settings, loss_kind, shape,
    )
    on_device = Plane(*(jax.tree.map(jnp.asarray, part) for part in plane))
    start_time = time.perf_counter()
    results = _in_chunks(
        lambda flat: summarize(flat, on_device, arrays, loss_arrays, point.key),
        total, min(int(chunk_size), total), progress,
    )
    run_time = time.perf_counter() - start_time
    attrs = {
        "model": setup.observation.spec.name,
        "kind": setup.kind,
        "coordinates": setup.coordinates.system,
        "dim": setup.coordinates.dim,
        "rank_tol": rank_tol,
        "method": method,
        "loss": LOSS_LABELS.get(loss_kind, "none"),
        "base": repr({k: v.tolist() for k, v in setup.values.items()}),
    }
    if direction_kinds is not None:
        attrs["direction_kinds"] = list(direction_kinds)
        attrs["direction_norms"] = np.linalg.norm(plane.directions, axis=1).tolist()
    dataset = xr.Dataset(
        {name: (tuple(names), values.reshape(shape)) for name, values in results.items()},
        coords={name: grid for name, grid in zip(names, plane.grids, strict=True)},
        attrs=attrs,
    )
    return FisherScan(
        dataset=dataset,
        axes=tuple(names),
        dim=setup.coordinates.dim,
        kind=setup.kind,
        coordinates=setup.coordinates.system,
        rank_tol=rank_tol,
        model_name=setup.observation.spec.name,
        base=setup.values,
        run_time=run_time,
        loss_kind=loss_kind,
        method=method,
        directions=None if direction_kinds is None else np.asarray(plane.directions),
        direction_kinds=() if direction_kinds is None else tuple(direction_kinds),
    )


def fisher_scan(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    axes: Mapping[Any, Any],
    *,
    key: jax.Array | None = None,
    request: FisherRequest = FisherRequest(),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: bool = True,
) -> FisherScan:
    """Fisher rank, log det, extreme eigenvalues, trace and loss over a grid of coordinates.

    For slices along directions in parameter space (random, Fisher eigenvectors, the
    segment between two points) use `slt.geometry.fisher_slice`: its grid values are steps
    along vectors from params, not coordinate values, so it is a function of its own.

    Args:
      model, params: the model (a `Problem` or a `ModelSpec`) and the base point (as in
        `fisher_information`); the coordinates not scanned stay at their values in `params`.
      axes: {coordinate: 1-D grid} with one or two entries. A coordinate is a scalar site's
        name ("mu"), a coordinate label ("V[1,0]") or (site, index) (("V", (1, 0))).
        Grid values are in the request's `coordinates` and must stay in the support.
      key: the PRNG key of kind="monte_carlo". A Monte Carlo scan uses the same key at every
        point (common random numbers), which makes its maps smooth.
      request: what to compute at every point (`FisherRequest`, as in `fisher_information`).
      chunk_size: grid points per compiled call; memory grows with it (and, on an
        accelerator, where a chunk is vmapped, speed too).
      progress: show a progress bar (tqdm) advancing between chunks.

    Returns:
      A `FisherScan`; `scan.dataset` is the xarray Dataset (with the loss of the module
      docstring), `scan.plot()` draws it.

    Raises:
      ValueError: what `fisher_information` rejects; axes not one or two coordinates, a grid
        that is not a non-empty 1-D array of finite numbers or leaves the support;
        chunk_size not an integer >= 1 (InputError).

    Example:
      >>> spec = slt.models.fixed_component_mixture()
      >>> scan = fisher_scan(spec, {"pi": 0.5, "mu": 1.0, "sigma": 1.0},
      ...                    {"pi": np.linspace(0, 1, 5), "mu": np.linspace(-2, 2, 5)},
      ...                    progress=False)
      >>> scan["rank"].values    # rows pi = 0, ..., 1; columns mu = -2, ..., 2
      array([[1, 1, 0, 1, 1],
             [3, 3, 2, 3, 3],
             [3, 3, 2, 3, 3],
             [3, 3, 2, 3, 3],
             [3, 3, 2, 3, 3]])

    The rank is 2 along mu = 0 (pi unidentifiable), 1 at pi = 0 (mu and sigma
    unidentifiable) and 0 where both meet.
    """
    chunk_size = require_int("chunk_size", chunk_size, minimum=1)
    with jax.enable_x64(True):
        setup = prepare(model, params, key=key, request=request)
        indices, names, grids = _grids(axes, setup.coordinates)
        plane = coordinate_plane(setup.theta, indices, grids)
        point = PointSummary(lambda: dense_point(setup), (setup.rank_tol,))
        return scan_plane(setup, plane, names, setup.theta[indices], point,
                          chunk_size=chunk_size, progress=progress)
