"""Trace, numerical rank and log pseudo-determinant of a large Fisher, matrix-free.

Hutchinson (1989): for a probe z with i.i.d. Rademacher (+-1) entries, E[z^T A z] = tr A and

    Var[z^T A z] = 2 sum_{i != j} A_ij^2 = 2 (||A||_F^2 - sum_i A_ii^2),

so the mean over P independent probes estimates tr A with standard error sd / sqrt(P), the sd
measured over the probes.

Stochastic Lanczos quadrature (SLQ; Ubaru, Chen & Saad 2017) estimates tr f(A) the same way:
k Lanczos steps started at z / ||z|| give a tridiagonal T with Ritz values theta_j and
eigenvectors whose first components are tau_j, and z^T f(A) z ~ ||z||^2 sum_j tau_j^2 f(theta_j)
(k-point Gauss quadrature of the spectral measure seen from z; exact for polynomials f of
degree < 2k; ||z||^2 = dim). Over P probes, with lambda_max the largest Ritz value of all:

    log pdet ~ (dim / P) sum_p sum_j tau_pj^2 log(theta_pj) 1[theta_pj > rank_tol lambda_max]
    rank     ~ (dim / P) sum_p sum_j tau_pj^2 1[theta_pj > rank_tol lambda_max]
    trace    ~ (dim / P) sum_p sum_j tau_pj^2 theta_pj      (= Hutchinson on the same probes)

each with the standard error of its P per-probe values; the pseudo-determinant and the rank
use the tolerance of `slt.geometry.spectrum`.

The null space. For a Fisher of rank r < dim the spectral measure has mass (dim - r) / dim at
0; k Lanczos steps resolve that mass into Ritz values below the tolerance only once the
Krylov space is exhausted (k > number of distinct eigenvalues): before that, Ritz values
between 0 and the smallest kept eigenvalue are counted, and the rank and log pdet are
badly biased (benchmarks/RESULTS.md, "Matrix-free Fisher": a tanh 10-150-3 network, d = 2103
and rank 600, weights ~ N(0, 1 / fan-in), 100 steps: rank 2103 and log pdet -28 578 against
the exact 600 and -2782). The Gram twin of the Fisher,
G = W^(1/2) J J^T W^(1/2) over the m = n * rows whitened outputs (`FisherOperator.gram`),
has the same nonzero eigenvalues and no null space of its own when the outputs are
independent, the usual case when m < d (there SLQ gives -2772 +- 15). `fisher_summary` works
on G when m < d and on I otherwise ("auto"); a singular Fisher with m >= d remains the hard
case: its SLQ rank and log pdet are upper bounds unless num_steps exhausts the Krylov space.

References:
  M. F. Hutchinson (1989), A stochastic estimator of the trace of the influence matrix for
    Laplacian smoothing splines, Communications in Statistics - Simulation and Computation.
  S. Ubaru, J. Chen, Y. Saad (2017), Fast estimation of tr(f(A)) via stochastic Lanczos
    quadrature, SIAM Journal on Matrix Analysis and Applications 38(4).
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

from slt.geometry.kernels import fisher_trace_function, rows_per_example
from slt.geometry.matrix_free import compiled_operator, lanczos, prepare_matrix_free, ritz_pairs
from slt.geometry.request import FisherRequest
from slt.geometry.spectrum import DEFAULT_RANK_TOL
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.results import Persistable
from slt.validation import InputError, require_int, require_key

__all__ = ["SPACES", "FisherSummary", "SpectralSummary", "fisher_summary", "spectral_summary"]

SPACES = ("auto", "parameters", "outputs")


class SpectralSummary(NamedTuple):
    """SLQ and Hutchinson estimates of one symmetric PSD operator (module docstring).

    log_pdet, rank, trace: the estimates; *_std_error: their standard errors over the probes;
    max_eigenvalue: the largest Ritz value (a lower bound on lambda_max, converged first);
    min_kept_eigenvalue: the smallest Ritz value above rank_tol * max_eigenvalue (an estimate
    of the smallest eigenvalue counted, converged only with enough steps; inf if none);
    ritz_values, ritz_weights: (num_probes, num_steps) theta_pj and tau_pj^2, the quadrature
    nodes and weights of each probe's spectral measure (each row of weights sums to 1).
    """

    log_pdet: jax.Array
    log_pdet_std_error: jax.Array
    rank: jax.Array
    rank_std_error: jax.Array
    trace: jax.Array
    trace_std_error: jax.Array
    max_eigenvalue: jax.Array
    min_kept_eigenvalue: jax.Array
    ritz_values: jax.Array
    ritz_weights: jax.Array


def spectral_summary(
    matvec: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    dim: int,
    *,
    num_probes: int,
    num_steps: int,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> SpectralSummary:
    """log pdet, rank and trace of a PSD operator by stochastic Lanczos quadrature; pure JAX.

    tr f(A) ~ (dim / P) sum_p sum_j tau_pj^2 f(theta_pj) over P Rademacher probes, with f =
    log 1[. > tol], 1[. > tol] and the identity (module docstring). The probes run one after
    another (`lax.map`): memory O(num_steps * dim) plus one `matvec`. There is no Python loop
    over steps or probes, so the function works under `jit` and `vmap`: map it over many
    points by building `matvec` from each point inside the mapped function.

    Args:
      matvec: v (dim,) -> A v, A symmetric positive semi-definite (e.g.
        `fisher_operator(...)(theta, inputs, weights).gram`); traced, so it may close over
        traced arrays.
      key: PRNG key for the probes (and Lanczos restarts).
      dim: the operator's size (static).
      num_probes: P >= 2 (static).
      num_steps: Lanczos steps k per probe, 1 <= k <= dim (static).
      rank_tol: relative tolerance of the rank and pseudo-determinant (a float).

    Returns:
      A `SpectralSummary` of arrays (scalars, and (P, k) Ritz values and weights).

    Example:
      A diagonal operator of rank 40 of 50: with k = dim steps each probe's quadrature is
      exact, and for a diagonal A so is z^T f(A) z = sum_i f(a_i) (z_i^2 = 1):

      >>> a = jnp.concatenate([jnp.linspace(1.0, 2.0, 40), jnp.zeros(10)])
      >>> summary = spectral_summary(lambda v: a * v, jax.random.key(0), 50, num_probes=8,
      ...                            num_steps=50)
      >>> round(float(summary.rank), 6), bool(jnp.isclose(summary.log_pdet,
      ...                                                 jnp.log(a[:40]).sum()))
      (40.0, True)
      >>> bool(jnp.isclose(summary.trace, a.sum()))
      True
      >>> thetas = jnp.array([1.0, 2.0])        # vmap over points: A(t) = t * diag(a)
      >>> batch = jax.vmap(lambda t, k: spectral_summary(lambda v: t * a * v, k, 50,
      ...                  num_probes=4, num_steps=50))(thetas, jax.random.split(key, 2))
      >>> batch.trace.round(6)
      Array([ 60., 120.], dtype=float64)
    """
    keys = jax.random.split(key, num_probes)

    def probe(probe_key):
        start_key, restart_key = jax.random.split(probe_key)
        start = jax.random.rademacher(start_key, (dim,), dtype=float)
        values, vectors = ritz_pairs(
            lanczos(matvec, restart_key, dim, num_steps, start=start))
        return values, vectors[0] ** 2

    values, weights = jax.lax.map(probe, keys)
    largest = values.max()
    kept = (values > rank_tol * largest) & (largest > 0)
    log_values = jnp.where(kept, jnp.log(jnp.where(kept, values, 1.0)), 0.0)
    per_probe = dim * jnp.stack(
        [(weights * log_values).sum(1), (weights * kept).sum(1), (weights * values).sum(1)])
    mean = per_probe.mean(1)
    std_error = per_probe.std(1, ddof=1) / np.sqrt(num_probes)
    return SpectralSummary(
        log_pdet=mean[0], log_pdet_std_error=std_error[0],
        rank=mean[1], rank_std_error=std_error[1],
        trace=mean[2], trace_std_error=std_error[2],
        max_eigenvalue=largest,
        min_kept_eigenvalue=jnp.min(jnp.where(kept, values, jnp.inf)),
        ritz_values=values, ritz_weights=weights,
    )


@dataclass(frozen=True)
class FisherSummary(Persistable):
    """Trace, numerical rank and log pseudo-determinant of a Fisher matrix, matrix-free.

    Attributes:
      log_pdet, log_pdet_std_error: SLQ estimate of the log pseudo-determinant and its
        standard error over the probes.
      rank, rank_std_error: SLQ estimate of the numerical rank (a real number) and its error.
      trace: the exact tr I (sum of the squared whitened Jacobian entries).
      trace_estimate, trace_std_error: Hutchinson's estimate from the same probes, its error.
      max_eigenvalue, min_kept_eigenvalue: the largest Ritz value and the smallest above
        rank_tol * largest (see `SpectralSummary`).
      ritz_values, ritz_weights: (num_probes, num_steps) SLQ nodes and weights (`plot`).
      space: "parameters" (Lanczos on I, d x d) or "outputs" (on its Gram twin, m x m).
      dim: d; num_outputs: m, the whitened outputs (examples x rows per example).
      num_probes, num_steps, rank_tol, coordinates, model_name: the settings.
    """

    log_pdet: float
    log_pdet_std_error: float
    rank: float
    rank_std_error: float
    trace: float
    trace_estimate: float
    trace_std_error: float
    max_eigenvalue: float
    min_kept_eigenvalue: float
    ritz_values: np.ndarray = field(repr=False)
    ritz_weights: np.ndarray = field(repr=False)
    space: str
    dim: int
    num_outputs: int
    num_probes: int
    num_steps: int
    rank_tol: float
    coordinates: str
    model_name: str

    _SCALARS = ("log_pdet", "log_pdet_std_error", "rank", "rank_std_error", "trace",
                "trace_estimate", "trace_std_error", "max_eigenvalue", "min_kept_eigenvalue")

    def summary(self) -> pd.DataFrame:
        """One-row table of the estimates and settings."""
        row = {"d": self.dim, "m": self.num_outputs, "space": self.space,
               **{name: getattr(self, name) for name in self._SCALARS},
               "num_probes": self.num_probes, "num_steps": self.num_steps,
               "rank_tol": self.rank_tol}
        return pd.DataFrame([row])

    def to_xarray(self) -> xr.Dataset:
        """ritz_value and ritz_weight over dims (probe, ritz); the estimates as 0-d variables
        (units: log of the Fisher's units, a count, the Fisher's units); attrs the settings."""
        variables = {name: ((), getattr(self, name)) for name in self._SCALARS}
        return xr.Dataset(
            {"ritz_value": (("probe", "ritz"), self.ritz_values),
             "ritz_weight": (("probe", "ritz"), self.ritz_weights), **variables},
            attrs={"space": self.space, "dim": self.dim, "num_outputs": self.num_outputs,
                   "num_probes": self.num_probes, "num_steps": self.num_steps,
                   "rank_tol": self.rank_tol, "coordinates": self.coordinates,
                   "model": self.model_name},
        )

    def plot(self, ax=None):
        """The SLQ estimate of the spectral density, with the rank threshold
        (`slt.plots.fisher.plot_spectral_density`)."""
        from slt.plots.fisher import plot_spectral_density

        return plot_spectral_density(self, ax=ax)

    def __repr__(self) -> str:
        return (
            f"FisherSummary({self.model_name}, d={self.dim}, SLQ on the {self.space} space "
            f"({self.num_probes} probes x {self.num_steps} steps): "
            f"log pdet={self.log_pdet:.6g} +- {self.log_pdet_std_error:.2g}, "
            f"rank={self.rank:.6g} +- {self.rank_std_error:.2g}, trace={self.trace:.6g} "
            f"(Hutchinson {self.trace_estimate:.6g} +- {self.trace_std_error:.2g}), "
            f"largest={self.max_eigenvalue:.6g})"
        )


def fisher_summary(
    model: ModelSpec | Problem,
    params: Mapping[str, Any],
    *,
    key: jax.Array,
    request: FisherRequest = FisherRequest(),
    num_probes: int = 30,
    num_steps: int = 80,
    space: str = "auto",
) -> FisherSummary:
    """Trace, rank and log pseudo-determinant of the Fisher at a point, without a d x d matrix.

    log pdet I = sum_{lambda_i > rank_tol lambda_max} log lambda_i and the rank by stochastic
    Lanczos quadrature, tr I exactly (sum of the squared whitened Jacobian entries) and by
    Hutchinson's estimator on the same probes (module docstring). Time: num_probes *
    num_steps Fisher-vector products plus O(num_probes * num_steps^2 * size) for the
    reorthogonalisation; memory O(num_steps * size + n * width), size = d or m (`space`).
    A second call at a new point of the same model and input shapes compiles nothing.

    Args:
      model, params: as in `fisher_information` (Gaussian-noise and exponential-family
        observations; a Problem's inputs are the default x).
      key: PRNG key for the probes.
      request: the inputs x, their weights, the coordinates and the rank tolerance
        (`FisherRequest`); its kind must be "exact".
      num_probes: P >= 2; the standard errors fall as 1 / sqrt(P).
      num_steps: Lanczos steps k per probe (clipped to the operator's size); the quadrature
        is exact once k exceeds the number of distinct eigenvalues.
      space: "outputs" runs Lanczos on the Gram twin G (m x m, m = examples x whitened rows),
        "parameters" on I (d x d); "auto" (default) takes the smaller (module docstring:
        SLQ cannot see through a large null space, which G avoids when m < d).

    Returns:
      A `FisherSummary`.

    Example:
      >>> spec = slt.models.two_layer_network(2, 3, 1)        # d = 13, tanh
      >>> values = {"V": jnp.array([[1.0, 0.0], [0.5, -1.0], [0.0, 2.0]]),
      ...           "b": jnp.array([0.1, 0.2, -0.3]), "U": jnp.array([[1.0, -1.0, 0.5]]),
      ...           "c": jnp.array([0.0])}
      >>> request = FisherRequest(x=jax.random.normal(jax.random.key(1), (40, 2)))
      >>> summary = fisher_summary(spec, values, key=jax.random.key(2), request=request,
      ...                          num_steps=13)
      >>> dense = slt.fisher_information(spec, values, request=request)
      >>> round(summary.rank, 6), dense.rank, bool(np.isclose(summary.trace,
      ...                                                      np.trace(dense.matrix)))
      (13.0, 13, True)
      >>> bool(abs(summary.log_pdet - dense.log_pdet) < 4 * summary.log_pdet_std_error)
      True

    References:
      Hutchinson (1989); Ubaru, Chen & Saad (2017) (module docstring).
    """
    rank_tol = request.rank_tol
    num_probes = require_int("num_probes", num_probes, minimum=2)
    num_steps = require_int("num_steps", num_steps, minimum=1)
    if space not in SPACES:
        raise InputError(f"space must be one of {SPACES}, got {space!r}")
    if key is None:
        raise InputError("fisher_summary needs a PRNG key: key=jax.random.key(0)")
    require_key(key)
    with jax.enable_x64(True):
        setup = prepare_matrix_free(model, params, request)
        theta, inputs, weights = jnp.asarray(setup.theta), setup.arrays.inputs, setup.arrays.weights
        dim = setup.coordinates.dim
        num_outputs = int(weights.shape[0]) * rows_per_example(setup.observation)
        if space == "auto":
            space = "outputs" if num_outputs < dim else "parameters"

        def program(operator, _, probe_key):  # sizes from the traced shapes, never captured
            on_outputs = space == "outputs"
            size = operator.num_outputs if on_outputs else operator.dim
            return spectral_summary(operator.gram if on_outputs else operator.fisher,
                                    probe_key, size, num_probes=num_probes,
                                    num_steps=min(num_steps, size), rank_tol=rank_tol)

        run = compiled_operator(setup, "fisher_summary", program, space, num_probes, num_steps,
                                rank_tol)
        estimate = jax.device_get(run(theta, inputs, weights, key))
        trace = setup.compiled(
            "fisher_trace", lambda: fisher_trace_function(setup.observation, setup.coordinates))
        exact_trace = float(trace(theta, inputs, weights))
    return FisherSummary(
        log_pdet=float(estimate.log_pdet),
        log_pdet_std_error=float(estimate.log_pdet_std_error),
        rank=float(estimate.rank),
        rank_std_error=float(estimate.rank_std_error),
        trace=exact_trace,
        trace_estimate=float(estimate.trace),
        trace_std_error=float(estimate.trace_std_error),
        max_eigenvalue=float(estimate.max_eigenvalue),
        min_kept_eigenvalue=float(estimate.min_kept_eigenvalue),
        ritz_values=np.asarray(estimate.ritz_values),
        ritz_weights=np.asarray(estimate.ritz_weights),
        space=space,
        dim=dim,
        num_outputs=num_outputs,
        num_probes=num_probes,
        num_steps=min(num_steps, num_outputs if space == "outputs" else dim),
        rank_tol=rank_tol,
        coordinates=setup.coordinates.system,
        model_name=setup.observation.spec.name,
    )

