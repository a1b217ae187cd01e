"""Fisher information I(theta) of a model at a point: the matrix, its spectrum, rank and log-det.

    I(theta) = E_{x} E_{y ~ p(y | x, theta)} [ s s^T ],   s = grad_theta log p(y | x, theta),

the Hessian of theta' -> E_x KL(p(. | x, theta) || p(. | x, theta')) at theta' = theta. It is
computed in float64 always: `fisher_information` switches JAX to 64-bit inside itself
(`jax.enable_x64`), whatever the caller's setting, because its near-zero eigenvalues are
the point (float32 reports 1e-13 for a true 1e-19).

What is computed is a `FisherRequest` (`slt.geometry.request`): the kind, the inputs x and
their weights, the data of the empirical kind, the Monte Carlo draws, the coordinates and the
rank tolerance. Three kinds (`KINDS`), see `slt.geometry.kernels` for the formulas:

* "exact": the closed form (1/sigma^2) E_x[J^T J] (plus the scale term when the noise is
  learned) for Gaussian-noise models, over the given inputs x; E_x[J^T F(eta) J] for
  Bernoulli, Binomial, Poisson and Categorical observations (`slt.geometry.families`);
  quadrature over y for a scalar mixture of normals (the slides' mixture,
  `gaussian_mixture(K, 1)`).
* "monte_carlo": the same expectation with y drawn from the model, with standard errors.
* "empirical": gradients at observed data. Not the Fisher information (labelled as such).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from slt.compile_cache import compiled_for
from slt.geometry.coordinates import Coordinates
from slt.geometry.kernels import FisherArrays, fisher_function, mixture_extent, quadrature_grid
from slt.geometry.observation import ObservationModel, observation_model, resolve_model
from slt.geometry.request import KINDS, FisherRequest
from slt.geometry.spectrum import spectrum_summary
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.results import Persistable
from slt.validation import InputError, require_int, require_key

__all__ = [
    "KINDS",
    "FisherRequest",
    "FisherResult",
    "FisherSetup",
    "fisher_information",
    "gauss_hermite_inputs",
    "prepare",
]

_KIND_LABELS = {
    "exact": "exact Fisher information",
    "monte_carlo": "Monte Carlo Fisher information",
    "empirical": "EMPIRICAL Fisher: gradients at the data, not the Fisher information",
}


@dataclass(frozen=True)
class FisherResult(Persistable):
    """The Fisher information matrix at one point, with its spectrum.

    Attributes:
      matrix: I(theta), (d, d), symmetric, float64.
      eigenvalues: ascending, (d,) (`eigenvectors`, computed on first use, are the columns).
      rank: #{eigenvalues > rank_tol * largest}; rank_tol: that relative tolerance.
      log_det: sum of log eigenvalues, -inf when rank < d.
      log_pdet: log pseudo-determinant, the sum over the eigenvalues counted by `rank`.
      condition_number: largest / smallest eigenvalue, inf when rank < d.
      kind: "exact", "monte_carlo" or "empirical".
      coordinates: "natural" or "unconstrained"; names: one label per coordinate.
      point: the constrained site values the matrix was computed at.
      model_name: the model's name.
      std_error: entry-wise Monte Carlo standard error (None unless kind="monte_carlo").
      num_draws: Monte Carlo replicates (None otherwise).
      num_inputs: how many inputs x the expectation averaged over (None for density models).

    `standard_error` and `num_samples`, the names before the one vocabulary of
    docs/glossary.md, still read `std_error` and `num_draws`, with a DeprecationWarning; files
    saved with them load under the new names (`slt.results.RENAMED_FIELDS`).
    """

    matrix: np.ndarray = field(repr=False)
    eigenvalues: np.ndarray = field(repr=False)
    rank: int
    rank_tol: float
    log_det: float
    log_pdet: float
    condition_number: float
    kind: str
    coordinates: str
    names: tuple[str, ...] = field(repr=False)
    point: dict[str, np.ndarray] = field(repr=False)
    model_name: str
    std_error: np.ndarray | None = field(default=None, repr=False)
    num_draws: int | None = None
    num_inputs: int | None = None

    @property
    def standard_error(self) -> np.ndarray | None:
        """Deprecated name of `std_error`."""
        warnings.warn("FisherResult.standard_error is deprecated: use std_error",
                      DeprecationWarning, stacklevel=2)
        return self.std_error

    @property
    def num_samples(self) -> int | None:
        """Deprecated name of `num_draws` (in slt `num_samples` counts a sampler's draws)."""
        warnings.warn("FisherResult.num_samples is deprecated: use num_draws",
                      DeprecationWarning, stacklevel=2)
        return self.num_draws

    @property
    def dim(self) -> int:
        """The number of coordinates d."""
        return int(self.matrix.shape[0])

    @property
    def nullity(self) -> int:
        """d - rank: the dimension of the numerical null space."""
        return self.dim - self.rank

    @property
    def is_singular(self) -> bool:
        """Whether rank < d at the stated tolerance."""
        return self.rank < self.dim

    @cached_property
    def eigenvectors(self) -> np.ndarray:
        """Orthonormal eigenvectors (d, d), columns in the order of `eigenvalues`."""
        return np.linalg.eigh(self.matrix)[1]

    def null_space(self) -> np.ndarray:
        """An orthonormal basis (d, nullity) of the eigenvectors not counted by `rank`."""
        return self.eigenvectors[:, : self.nullity]

    def summary(self) -> pd.DataFrame:
        """One-row table: kind, d, rank, nullity, log det, log pdet, extreme eigenvalues."""
        return pd.DataFrame(
            [
                {
                    "kind": self.kind,
                    "coordinates": self.coordinates,
                    "d": self.dim,
                    "rank": self.rank,
                    "nullity": self.nullity,
                    "log_det": self.log_det,
                    "log_pdet": self.log_pdet,
                    "min_eigenvalue": float(self.eigenvalues[0]),
                    "max_eigenvalue": float(self.eigenvalues[-1]),
                    "condition_number": self.condition_number,
                    "rank_tol": self.rank_tol,
                }
            ]
        )

    def to_xarray(self):
        """An xarray Dataset: the matrix (row, column), eigenvalues and, if any, std_error."""
        import xarray as xr

        names = list(self.names)
        variables = {
            "fisher": (("row", "column"), self.matrix),
            "eigenvalues": (("eigen",), self.eigenvalues),
        }
        if self.std_error is not None:
            variables["std_error"] = (("row", "column"), self.std_error)
        attrs = {"kind": self.kind, "coordinates": self.coordinates, "model": self.model_name,
                 "rank": self.rank, "rank_tol": self.rank_tol}
        return xr.Dataset(variables, coords={"row": names, "column": names}, attrs=attrs)

    def plot(self, ax=None):
        """The eigenvalue spectrum on a log scale, with the rank threshold (`slt.plots.fisher`)."""
        from slt.plots.fisher import plot_spectrum

        return plot_spectrum(self, ax=ax)

    def __repr__(self) -> str:
        point = ", ".join(f"{k}={_short(v)}" for k, v in self.point.items())
        extra = f", {self.num_draws} replicates" if self.num_draws else ""
        return (
            f"FisherResult({_KIND_LABELS[self.kind]}{extra}; {self.model_name} at {point}; "
            f"{self.coordinates} coordinates, d={self.dim}, rank={self.rank} "
            f"(eigenvalues > {self.rank_tol:g} x largest), log det={self.log_det:.6g}, "
            f"log pdet={self.log_pdet:.6g}, condition={self.condition_number:.3g})"
        )


def _short(value: np.ndarray) -> str:
    value = np.asarray(value)
    if value.size == 1:
        return f"{value.item():.4g}"
    return f"<{'x'.join(map(str, value.shape))} array>"


@dataclass(frozen=True)
class FisherSetup:
    """A `FisherRequest` checked against its model and point, shared by the point, scan and
    KL functions.

    Attributes: model (as given: the owner of the compiled programs, `compiled`), observation
    (its observation model), coordinates (the request's system, built for the model), values
    (the point), theta (its coordinates, (d,)), arrays (`FisherArrays` without quadrature
    nodes), request (the `FisherRequest`; `kind`, `num_draws` and `rank_tol` read it).
    """

    model: ModelSpec | Problem
    observation: ObservationModel
    coordinates: Coordinates
    values: dict[str, np.ndarray]
    theta: np.ndarray
    arrays: FisherArrays
    request: FisherRequest

    @property
    def kind(self) -> str:
        return self.request.kind

    @property
    def num_draws(self) -> int | None:
        return self.request.num_draws

    @property
    def rank_tol(self) -> float:
        return self.request.rank_tol

    def compiled(self, name: str, build: Callable[[], Callable], *settings: Any) -> Callable:
        """`jax.jit(build())`, built once per observation model, coordinate system, kind,
        num_draws and further `settings`, and kept with the model (`slt.compile_cache`,
        under `name`): dropping the model releases it. `build` returns a pure function of
        arrays that closes over the observation model and coordinates, never over `model`
        itself or its data; jit compiles it once per argument shapes.
        """
        signature = (name, self.observation, self.coordinates.system, self.kind,
                     self.num_draws, *settings)
        program, _ = compiled_for(self.model, signature, lambda: jax.jit(build()))
        return program

    def with_nodes(self, thetas: np.ndarray, *, exact: bool = False) -> FisherArrays:
        """The arrays, with quadrature nodes covering every row of `thetas` where the exact
        mixture Fisher needs them (or, with `exact`, the exact KL of a mixture whatever the
        kind)."""
        if not (exact or self.kind == "exact") or self.observation.family != "normal_mixture":
            return self.arrays
        extent = self.compiled(
            "mixture_extent", lambda: jax.vmap(mixture_extent(self.observation, self.coordinates))
        )
        nodes, weights = quadrature_grid(extent(jnp.asarray(thetas)))
        return self.arrays._replace(nodes=jnp.asarray(nodes), node_weights=jnp.asarray(weights))


def gauss_hermite_inputs(num_nodes: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (num_nodes, 1) and weights (summing to 1) for E over x ~ N(0, 1): as `x` and
    `x_weights` of a `FisherRequest`, they make the Fisher of a one-input model the
    population one.

    The rule is exact for polynomials in x of degree 2 num_nodes - 1 (79 by default) and
    accurate for smooth integrands, such as the Fisher of a tanh network.
    """
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_nodes)
    return nodes[:, None], weights / weights.sum()


def _input_weights(x_weights: Any, n: int) -> np.ndarray:
    """The request's x_weights (checked by `FisherRequest`) normalised, once their number is
    known to match the n inputs (a Problem's inputs are only known here)."""
    if x_weights is None:
        return np.full(n, 1.0 / n)
    weights = np.asarray(x_weights, dtype=np.float64)
    if weights.shape != (n,):
        raise InputError(f"x_weights must be {n} numbers, one per input x, got shape "
                         f"{weights.shape}")
    return weights / weights.sum()


def _check_kind(request: FisherRequest, observation: ObservationModel, key) -> None:
    """What the request's kind needs from this model and from the key."""
    kind = request.kind
    if kind == "monte_carlo":
        if key is None:
            raise InputError("kind='monte_carlo' needs a PRNG key: key=jax.random.key(0)")
        require_key(key)
        return
    if key is not None:
        raise InputError(f"key is for kind='monte_carlo', not {kind!r}")
    if kind == "exact" and observation.family == "other":
        raise ValueError(
            f"{observation.spec.name}: no exact Fisher for {observation.distribution_name} "
            "observations (exact covers Normal, Bernoulli, Binomial, Poisson, Categorical, "
            "MultivariateNormal with a fixed covariance and scalar mixtures of normals); use "
            "kind='monte_carlo'"
        )
    if kind == "exact" and observation.family == "normal_mixture":
        if observation.has_inputs or observation.output_shape != ():
            raise ValueError(
                f"{observation.spec.name}: the exact mixture Fisher is a quadrature over a scalar"
                " observation y; for vector observations use kind='monte_carlo'"
            )


def prepare(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    *,
    key: jax.Array | None = None,
    request: FisherRequest = FisherRequest(),
) -> FisherSetup:
    """Check a `FisherRequest` against the model and the point: a `FisherSetup`.

    The request's own fields are checked when it is built; here what depends on the model
    (its inputs, its observations, an exact formula) and the key (kind="monte_carlo" needs
    one, the other kinds take none). Call it inside `jax.enable_x64(True)`.
    """
    kind, x, data = request.kind, request.x, request.data
    model = resolve_model(model, params, x=x, data=data if kind == "empirical" else None)
    observation, values = observation_model(model, params)
    _check_kind(request, observation, key)
    if isinstance(model, Problem):  # its data are the default inputs, or the empirical data
        if kind == "empirical" and data is None:
            data = model.data
        elif kind != "empirical" and x is None and observation.input_name is not None:
            x = model.data[observation.input_name]
    if kind == "empirical":
        if data is None:
            raise InputError("kind='empirical' needs data={'x': ..., 'y': ...} (or {'y': ...}) "
                             "in the FisherRequest")
        inputs = observation.check_inputs(data.get(observation.input_name))
        outputs = observation.check_outputs(
            data.get(observation.output_name), None if inputs is None else inputs.shape[0]
        )
    else:
        inputs, outputs = observation.check_inputs(x), None
    if request.x_weights is not None and inputs is None:
        raise InputError("x_weights weight the inputs x; this model has none")
    weights = _input_weights(request.x_weights, 1 if inputs is None else inputs.shape[0])
    coords = observation.coordinates(request.coordinates)
    theta = coords.theta_at(values)
    if not np.all(np.isfinite(theta)):
        raise ValueError(
            f"{observation.spec.name}: the point is on the boundary of the support, at infinity in "
            f"{request.coordinates} coordinates: {dict(zip(coords.names, theta, strict=True))}; "
            "use coordinates='natural'"
        )
    arrays = FisherArrays(
        inputs=None if inputs is None else jnp.asarray(inputs),
        weights=jnp.asarray(weights),
        outputs=None if outputs is None else jnp.asarray(outputs),
        key=key,
    )
    return FisherSetup(model, observation, coords, values, theta, arrays, request)


def fisher_information(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    *,
    key: jax.Array | None = None,
    request: FisherRequest = FisherRequest(),
    chunk_size: int | None = None,
) -> FisherResult:
    """The Fisher information matrix of `model` at `params`, with its spectrum.

    I(theta) = E_x E_{y ~ p(y|x,theta)}[grad log p grad log p^T]; `request` says which
    estimator, over which inputs, in which coordinates (`FisherRequest`; see the module
    docstring and `slt.geometry.kernels` for how each kind computes it). Always float64.

    Args:
      model: a `Problem` built from a NumPyro model (its data's inputs x are the default
        `request.x`, and its data the default `request.data` of kind="empirical"), a
        `Problem.from_predict` of a network trained elsewhere, a NumPyro model function
        `model(x, y=None)` with its inputs in `request.x`
        (`slt.geometry.observation.resolve_model`), or a `ModelSpec` from `slt.models`.
      params: {site: constrained value} for every site, e.g. {"pi": 0.5, "mu": 1.0,
        "sigma": 1.0} (for a Problem: `fit.values`, or `problem.constrain(params)`), not the
        Problem's unconstrained parameters; boundary points such as pi = 0 are allowed in
        natural coordinates. For a `from_predict` Problem: the network's parameter pytree.
      key: the PRNG key of kind="monte_carlo" (each of its `num_draws` replicates draws one
        y for every input); the other kinds take none.
      request: what to compute (`FisherRequest`): kind, x, x_weights, data, num_draws,
        coordinates, rank_tol; default: the exact Fisher over a Problem's own inputs, in
        natural coordinates.
      chunk_size: inputs per chunk of the exact and empirical sums (default: 32 MiB of
        Jacobian per chunk).

    Returns:
      A `FisherResult`.

    Raises:
      ValueError: unknown or missing sites, non-finite or out-of-support params, x missing
        (regression) or given (density model), no exact formula for the model, a missing or
        given key, a key that is not a PRNG key, empirical data missing, chunk_size not an
        integer >= 1 (InputError, a ValueError); what `FisherRequest` refuses is refused
        when the request is built.
      FloatingPointError: the matrix is not finite at the point (inputs so large that the
        model's outputs overflow).

    Example:
      >>> spec = slt.models.fixed_component_mixture()    # pi N(mu, sigma^2) + (1 - pi) N(0, 1)
      >>> fisher = fisher_information(spec, {"pi": 0.5, "mu": 0.0, "sigma": 1.0})
      >>> fisher.rank          # of d = 3: pi is unidentifiable when both components are N(0, 1)
      2
      >>> unconstrained = FisherRequest(coordinates="unconstrained")   # (logit pi, mu, log sigma)
      >>> fisher_information(spec, {"pi": 0.5, "mu": 0.0, "sigma": 1.0},
      ...                    request=unconstrained).names
      ('pi', 'mu', 'sigma')
    """
    if chunk_size is not None:
        chunk_size = require_int("chunk_size", chunk_size, minimum=1)
    with jax.enable_x64(True):
        setup = prepare(model, params, key=key, request=request)
        arrays = setup.with_nodes(setup.theta[None])
        fisher = setup.compiled(
            "fisher",
            lambda: fisher_function(setup.kind, setup.observation, setup.coordinates,
                                    num_draws=setup.num_draws, chunk_size=chunk_size),
            chunk_size,
        )
        matrix, std_error = (np.asarray(a) for a in fisher(jnp.asarray(setup.theta), arrays))
    return result_from_matrix(setup, matrix, std_error)


def result_from_matrix(setup: FisherSetup, matrix, std_error) -> FisherResult:
    """Wrap a computed matrix of `setup` in a `FisherResult` (eigendecomposition on the host)."""
    matrix = 0.5 * (matrix + matrix.T)
    if not np.all(np.isfinite(matrix)):
        raise FloatingPointError(
            f"{setup.observation.spec.name}: the Fisher matrix is not finite at {setup.values}"
        )
    eigenvalues = np.linalg.eigvalsh(matrix)
    rank_tol = setup.rank_tol
    summary = {k: np.asarray(v).item() for k, v in spectrum_summary(eigenvalues, rank_tol).items()}
    inputs = setup.arrays.inputs if setup.kind != "empirical" else setup.arrays.outputs
    return FisherResult(
        matrix=matrix,
        eigenvalues=eigenvalues,
        rank=int(summary["rank"]),
        rank_tol=rank_tol,
        log_det=float(summary["log_det"]),
        log_pdet=float(summary["log_pdet"]),
        condition_number=float(summary["condition_number"]),
        kind=setup.kind,
        coordinates=setup.coordinates.system,
        names=setup.coordinates.names,
        point=setup.values,
        model_name=setup.observation.spec.name,
        std_error=std_error if setup.kind == "monte_carlo" else None,
        num_draws=setup.num_draws,
        num_inputs=None if not setup.observation.has_inputs else int(inputs.shape[0]),
    )
