"""Matrix-free Fisher geometry for large networks: Fisher-vector products and Lanczos.

For a Gaussian-noise model the exact Fisher is I = J^T diag(w) J with J the Jacobian of
the whitened outputs z(theta) = [m(theta, x_i) / s_i, sqrt(2) s(theta, x_i) / s_i]_i
(`slt.geometry.kernels.whitened_outputs`). A Fisher-vector product is then one JVP and
one VJP (`jax.linearize`, `jax.linear_transpose`), the Gauss-Newton (GGN) form, with no
d x d matrix:

    I v = J^T (w * (J v)).

`lanczos` runs k steps of the Lanczos process on any symmetric `matvec` with full
reorthogonalisation (twice, classical Gram-Schmidt), keeping the k x d basis: memory O(d k).
When the Krylov space is exhausted (an invariant subspace: the next residual is below
1e-13 of the largest Ritz value) it restarts from a random vector orthogonal to the basis,
so repeated eigenvalues are found one copy per restart, and a restart vector that the
operator maps to (numerically) zero shows that the operator vanishes on the rest of the
space: the rank count is then exact. `fisher_spectrum` applies it to the Fisher.

By Cauchy interlacing the i-th largest Ritz value is at most the i-th largest eigenvalue, so
the number of Ritz values above the tolerance is always a lower bound on the numerical rank.

Data are arguments: `fisher_operator` gives a pure function of (theta, inputs, weights) that
linearises inside the compiled program, and the public functions compile it once per model
and coordinate system (`FisherSetup.compiled`); a new point or new inputs of the same shapes
compile nothing. `slt.geometry.stochastic_trace` builds trace, rank and log pseudo-determinant
estimates on the same operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.geometry.coordinates import Coordinates
from slt.geometry.fisher import FisherSetup, prepare
from slt.geometry.kernels import whitened_outputs
from slt.geometry.observation import WHITENED_FAMILIES, ObservationModel
from slt.geometry.request import FisherRequest
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.results import Persistable
from slt.validation import InputError, require_int, require_key

__all__ = [
    "FisherOperator",
    "LanczosSpectrum",
    "LanczosState",
    "compiled_operator",
    "fisher_operator",
    "fisher_spectrum",
    "fisher_vector_product",
    "lanczos",
    "prepare_matrix_free",
    "ritz_pairs",
    "tridiagonal",
]

# A residual below this fraction of the largest Ritz value is an invariant subspace. Rounding
# leaves residuals of ~1e-15 of it after the Krylov space is exhausted, while an eigenvalue
# counted by the rank (> 1e-10 of the largest) leaves a residual above ~1e-10 / sqrt(d).
_BREAKDOWN_TOL = 1e-13


class FisherOperator(NamedTuple):
    """The Fisher at one point as linear maps, closures over one linearisation of the
    whitened outputs z (memory O(n * width), never d x d).

    fisher: v (d,) -> I v = J^T W J v;
    gram: u (m,) -> G u = W^(1/2) J J^T W^(1/2) u, with m = n * rows the number of whitened
      outputs and W the input weights (repeated over each example's rows): G has the same
      nonzero eigenvalues as I (J^T W J and W^(1/2) J J^T W^(1/2) are A^T A and A A^T for
      A = W^(1/2) J), hence the same trace, rank and log pseudo-determinant, and is the
      smaller operator when m < d;
    dim: d; num_outputs: m.
    """

    fisher: Callable[[jax.Array], jax.Array]
    gram: Callable[[jax.Array], jax.Array]
    dim: int
    num_outputs: int


def fisher_operator(
    observation: ObservationModel, coordinates: Coordinates
) -> Callable[[jax.Array, jax.Array | None, jax.Array], FisherOperator]:
    """`operator(theta, inputs, weights) -> FisherOperator`, pure in its array arguments.

    Linearises `whitened_outputs` at theta (`jax.linearize`; its transpose is the VJP), so
    that one product costs one JVP and one VJP of the network. Call it inside a jitted
    function that takes theta, the inputs and their weights as arguments, so that the data
    are arguments of the compiled program, never constants of it; it works under `vmap`.
    """
    if observation.family not in WHITENED_FAMILIES:
        raise ValueError(
            f"{observation.spec.name}: matrix-free Fisher products are for Gaussian-noise "
            "and exponential-family observations; use fisher_information for mixtures (their "
            "d is small)"
        )

    def operator(theta, inputs, weights):
        outputs = whitened_outputs(observation, coordinates, theta, inputs)
        values, jvp = jax.linearize(outputs, theta)
        vjp = jax.linear_transpose(jvp, theta)
        root = jnp.sqrt(weights)[:, None]  # (n, 1): W^(1/2) over each example's rows

        def fisher(v):
            return vjp(weights[:, None] * jvp(v))[0]

        def gram(u):
            return (root * jvp(vjp(root * u.reshape(values.shape))[0])).ravel()

        return FisherOperator(fisher, gram, theta.shape[0], values.size)

    return operator


def compiled_operator(setup: FisherSetup, name: str, program: Callable, *settings: Any):
    """`setup.compiled` for a `program(operator, theta, key) -> outputs` over the Fisher at
    theta: the compiled function takes (theta, inputs, weights, key), the data as arguments,
    and is built once per model, coordinates, `name` and `settings`."""
    operator = fisher_operator(setup.observation, setup.coordinates)

    def build():
        def compiled(theta, inputs, weights, key):
            return program(operator(theta, inputs, weights), theta, key)

        return compiled

    return setup.compiled(name, build, *settings)


def fisher_vector_product(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    *,
    request: FisherRequest = FisherRequest(),
) -> Callable[[Any], np.ndarray]:
    """v -> I(theta) v for a Gaussian-noise or exponential-family model, by one JVP and one
    VJP (GGN form).

    Args:
      model, params: as in `fisher_information`.
      request: the inputs x, their weights and the coordinates (`FisherRequest`); its kind
        must be "exact".

    Returns:
      A function of a vector v (d,) returning I v (d,) as float64 numpy. Each call runs one
      compiled program (built once per model and coordinates) that takes theta, the inputs
      and v as arguments; memory O(n * width + d), never a d x d matrix.

    Example:
      >>> spec = slt.models.two_layer_network(1, 2, 1, activation="relu")      # d = 7
      >>> values = {"V": jnp.array([[1.0], [-1.0]]), "b": jnp.array([0.5, 0.5]),
      ...           "U": jnp.array([[1.0, 2.0]]), "c": jnp.array([0.0])}
      >>> request = FisherRequest(x=jnp.linspace(-2.0, 2.0, 9)[:, None])
      >>> fvp = fisher_vector_product(spec, values, request=request)
      >>> fvp(np.ones(spec.dim)).round(4)
      array([ 3.0556, -2.2222,  2.7778,  3.1111,  4.4444,  1.8889,  3.7778])
      >>> fisher = slt.fisher_information(spec, values, request=request)  # d x d, for once
      >>> bool(np.allclose(fvp(np.ones(spec.dim)), fisher.matrix @ np.ones(spec.dim)))
      True
    """
    with jax.enable_x64(True):
        setup = prepare_matrix_free(model, params, request)
        product = compiled_operator(setup, "fisher_vector_product",
                                    lambda operator, theta, v: operator.fisher(v))
        theta, arrays = jnp.asarray(setup.theta), setup.arrays

    def apply(v):
        with jax.enable_x64(True):
            vector = jnp.asarray(v, dtype=np.float64)
            if vector.shape != theta.shape:
                raise InputError(f"v must have shape ({theta.shape[0]},) (d), got {vector.shape}")
            return np.asarray(product(theta, arrays.inputs, arrays.weights, vector))

    return apply


def prepare_matrix_free(model, params, request: FisherRequest) -> FisherSetup:
    """`prepare` the exact kind for a model the matrix-free functions cover, else InputError
    (another kind) or ValueError (another model)."""
    if request.kind != "exact":
        raise InputError(
            f"the matrix-free functions compute the exact Fisher: request.kind must be 'exact', "
            f"got {request.kind!r} (use fisher_information for the other kinds)"
        )
    setup = prepare(model, params, request=request)
    fisher_operator(setup.observation, setup.coordinates)  # refuses what it cannot do
    return setup


class LanczosState(NamedTuple):
    """Lanczos output: T = tridiag(betas, alphas, betas) = Q A Q^T on the basis rows of Q.

    basis: (k + 1, d) orthonormal rows (the last is the next Lanczos vector); alphas: (k,);
    betas: (k,) with betas[j] coupling vectors j and j + 1 (0 at a restart);
    exhausted: whether a restart vector was mapped to ~0 (the rank count is exact);
    scale: the running largest |alpha| and beta (an estimate of the operator norm).
    """

    basis: jax.Array
    alphas: jax.Array
    betas: jax.Array
    exhausted: jax.Array
    scale: jax.Array


def lanczos(
    matvec: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    dim: int,
    num_steps: int,
    *,
    start: jax.Array | None = None,
):
    """k = num_steps Lanczos steps on a symmetric operator, fully reorthogonalised; jit-able.

    Args:
      matvec: v (dim,) -> A v, symmetric A.
      key: PRNG key for the restart vectors (and the start vector when `start` is None).
      dim: d.
      num_steps: k <= d.
      start: the start vector (dim,), normalised here (default: a standard normal draw).

    Returns:
      A `LanczosState`; the Ritz values are the eigenvalues of the tridiagonal matrix.
    """
    keys = jax.random.split(key, num_steps + 1)

    def orthogonalised(vector, basis):
        for _ in range(2):  # Gram-Schmidt twice is enough for orthogonality to rounding (Kahan)
            vector = vector - basis.T @ (basis @ vector)
        return vector

    def step(j, state: LanczosState):
        q = state.basis[j]
        product = matvec(q)
        alpha = q @ product
        residual = orthogonalised(product, state.basis)
        beta = jnp.linalg.norm(residual)
        scale = jnp.maximum(state.scale, jnp.maximum(jnp.abs(alpha), beta))
        breakdown = beta <= _BREAKDOWN_TOL * scale
        block_start = (j == 0) | (state.betas[j - 1] == 0.0)
        vanished = block_start & (jnp.linalg.norm(product) <= _BREAKDOWN_TOL * scale)

        def restart():
            fresh = orthogonalised(jax.random.normal(keys[j + 1], (dim,)), state.basis)
            return fresh / jnp.linalg.norm(fresh)

        following = jax.lax.cond(breakdown, restart, lambda: residual / beta)
        return LanczosState(
            basis=state.basis.at[j + 1].set(following),
            alphas=state.alphas.at[j].set(alpha),
            betas=state.betas.at[j].set(jnp.where(breakdown, 0.0, beta)),
            exhausted=state.exhausted | vanished,
            scale=scale,
        )

    start = jax.random.normal(keys[0], (dim,)) if start is None else start
    initial = LanczosState(
        basis=jnp.zeros((num_steps + 1, dim)).at[0].set(start / jnp.linalg.norm(start)),
        alphas=jnp.zeros(num_steps),
        betas=jnp.zeros(num_steps),
        exhausted=jnp.asarray(False),
        scale=jnp.asarray(0.0),
    )
    return jax.lax.fori_loop(0, num_steps, step, initial)


def tridiagonal(state: LanczosState) -> jax.Array:
    """The Lanczos tridiagonal matrix T = tridiag(betas, alphas, betas) (jit- and vmap-able);
    its eigenvalues are the Ritz values."""
    off_diagonal = state.betas[:-1]
    return jnp.diag(state.alphas) + jnp.diag(off_diagonal, 1) + jnp.diag(off_diagonal, -1)


def ritz_pairs(state: LanczosState) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues (ascending) and eigenvectors (columns) of the Lanczos tridiagonal matrix T
    (jit- and vmap-able)."""
    return jnp.linalg.eigh(tridiagonal(state))


@dataclass(frozen=True)
class LanczosSpectrum(Persistable):
    """Extreme eigenvalues and numerical rank of a Fisher matrix from k Lanczos steps.

    Attributes:
      ritz_values: ascending Ritz values (k,): the top ones converge first.
      ritz_errors: residual bounds |beta_k y_k| per Ritz value: each lies within its bound of
        an eigenvalue.
      rank: #{Ritz values > rank_tol * largest}; a lower bound on the numerical rank, and
        the rank itself when `rank_is_exact`.
      rank_is_exact: whether the operator was shown to vanish outside the Krylov basis.
      rank_tol, dim, num_steps, coordinates, model_name: the settings.
    """

    ritz_values: np.ndarray = field(repr=False)
    ritz_errors: np.ndarray = field(repr=False)
    rank: int
    rank_is_exact: bool
    rank_tol: float
    dim: int
    num_steps: int
    coordinates: str
    model_name: str

    @property
    def eigenvalues(self) -> np.ndarray:
        """The Ritz values (ascending), for plotting alongside dense spectra."""
        return self.ritz_values

    @property
    def max_eigenvalue(self) -> float:
        return float(self.ritz_values[-1])

    @property
    def smallest_nonzero(self) -> float:
        """The smallest Ritz value counted by the rank (nan when the rank is 0)."""
        counted = self.ritz_values[self.ritz_values > self.rank_tol * self.max_eigenvalue]
        return float(counted[0]) if counted.size else float("nan")

    def top(self, count: int) -> np.ndarray:
        """The `count` largest Ritz values, descending."""
        return self.ritz_values[::-1][:count]

    def summary(self) -> pd.DataFrame:
        """One-row table of the estimate."""
        return pd.DataFrame(
            [
                {
                    "d": self.dim,
                    "steps": self.num_steps,
                    "rank": self.rank,
                    "rank_is_exact": self.rank_is_exact,
                    "max_eigenvalue": self.max_eigenvalue,
                    "smallest_nonzero": self.smallest_nonzero,
                    "max_error": float(self.ritz_errors.max()),
                }
            ]
        )

    def to_xarray(self) -> xr.Dataset:
        """The spectrum as an xarray Dataset: ritz_value and ritz_error (its residual bound)
        over dim ``ritz`` (ascending Ritz values, units of the Fisher information); attrs
        rank, rank_is_exact (0 or 1: NetCDF attributes hold no booleans), rank_tol, dim,
        num_steps, coordinates and model (as `FisherResult.to_xarray`)."""
        return xr.Dataset(
            {"ritz_value": (("ritz",), self.ritz_values),
             "ritz_error": (("ritz",), self.ritz_errors)},
            attrs={"rank": self.rank, "rank_is_exact": int(self.rank_is_exact),
                   "rank_tol": self.rank_tol, "dim": self.dim, "num_steps": self.num_steps,
                   "coordinates": self.coordinates, "model": self.model_name},
        )

    def plot(self, ax=None):
        """The Ritz values on a log scale, with the rank threshold (`slt.plots.fisher`)."""
        from slt.plots.fisher import plot_spectrum

        return plot_spectrum(self, ax=ax)

    def __repr__(self) -> str:
        bound = "" if self.rank_is_exact else " (lower bound)"
        return (
            f"LanczosSpectrum({self.model_name}, d={self.dim}, {self.num_steps} steps: "
            f"rank={self.rank}{bound}, largest={self.max_eigenvalue:.6g}, "
            f"smallest nonzero={self.smallest_nonzero:.6g})"
        )


def fisher_spectrum(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    *,
    key: jax.Array,
    request: FisherRequest = FisherRequest(),
    num_steps: int = 100,
) -> LanczosSpectrum:
    """Top and bottom of the Fisher spectrum and its numerical rank, matrix-free (Lanczos).

    Memory is O(d * num_steps) (the Lanczos basis) plus one linearisation of the network;
    time is num_steps Fisher-vector products plus O(d num_steps^2) for reorthogonalisation.
    The largest eigenvalues converge first; the rank is exact once num_steps exceeds the
    number of distinct nonzero eigenvalues (see the module docstring), e.g. rank + 1 steps.

    Args:
      model, params: as in `fisher_information` (Gaussian-noise and exponential-family
        observations; a Problem's inputs are the default x).
      key: PRNG key for the Lanczos start vector.
      request: the inputs x, their weights, the coordinates and the rank tolerance
        (`FisherRequest`); its kind must be "exact".
      num_steps: Lanczos steps k (clipped to d).

    Returns:
      A `LanczosSpectrum`.

    Example:
      >>> spec = slt.models.two_layer_network(1, 2, 1, activation="relu")      # d = 7
      >>> values = {"V": jnp.array([[1.0], [-1.0]]), "b": jnp.array([0.5, 0.5]),
      ...           "U": jnp.array([[1.0, 2.0]]), "c": jnp.array([0.0])}
      >>> request = FisherRequest(x=jnp.linspace(-2.0, 2.0, 9)[:, None])
      >>> spectrum = fisher_spectrum(spec, values, key=jax.random.key(0), request=request,
      ...                            num_steps=7)
      >>> spectrum.rank, spectrum.top(3).round(4)   # two null directions: the ReLU rescalings
      (5, array([7.1506, 3.1823, 0.5669]))
    """
    num_steps = require_int("num_steps", num_steps, minimum=1)
    if key is None:
        raise InputError("fisher_spectrum needs a PRNG key: key=jax.random.key(0)")
    require_key(key)
    rank_tol = request.rank_tol
    with jax.enable_x64(True):
        setup = prepare_matrix_free(model, params, request)
        dim = setup.coordinates.dim
        steps = int(min(num_steps, dim))
        run = compiled_operator(
            setup, "fisher_spectrum",
            lambda operator, theta, k: lanczos(operator.fisher, k, operator.dim, steps), steps,
        )
        state = run(jnp.asarray(setup.theta), setup.arrays.inputs, setup.arrays.weights, key)
        ritz_values, ritz_vectors = (np.asarray(a) for a in ritz_pairs(state))
        errors = np.abs(float(state.betas[-1]) * ritz_vectors[-1])
        exhausted = bool(state.exhausted) or steps == dim
    largest = ritz_values[-1]
    rank = int(np.sum(ritz_values > rank_tol * largest)) if largest > 0 else 0
    return LanczosSpectrum(
        ritz_values=ritz_values,
        ritz_errors=errors,
        rank=rank,
        rank_is_exact=exhausted,
        rank_tol=rank_tol,
        dim=dim,
        num_steps=steps,
        coordinates=setup.coordinates.system,
        model_name=setup.observation.spec.name,
    )
