"""Laplace: the log evidence from a Gaussian at the MAP, in unconstrained coordinates, float64.

With u the unconstrained parameters, log p(u) the prior density of u (log-Jacobian included),
û the MAP of the log joint l(u) = sum_i log p(y_i | x_i, u) + log p(u) and H = -∇²l(û):

    log Z ≈ l(û) + (d/2) log 2π - ½ log det H.

It is exact for linear-Gaussian models and, for regular models, off by O_p(1/n). The Hessian
is taken by automatic differentiation in float64 and log det H is the sum of the logs of its
eigenvalues. Two kinds of singularity are reported, never hidden in an inf or a NaN:

* numerical: eigenvalues of H at or below `rtol` times the largest (null directions, e.g. an
  exact symmetry of a model without prior curvature there, or a saddle). log det then runs over
  the `rank` positive eigenvalues only (the Gaussian restricted to the range of H), the result
  is flagged and a warning issued: the full Laplace value would be +inf.
* statistical: directions in which the prior supplies more than 1/sqrt(n) of the curvature.
  In a regular model the data's curvature grows like n in every direction, so the prior's share
  falls like 1/n; a direction where it does not is one the data leave undetermined at this n,
  a flat valley of the likelihood such as a symmetry orbit or a crossing of true parameter sets
  (a singular model: lambda < d/2). The Laplace value is finite but not an asymptotically
  valid approximation; the result is flagged and a warning issued. The shares are the
  eigenvalues of H^{-1/2} H_prior H^{-1/2}: invariant under linear reparametrisation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr
from jax.flatten_util import ravel_pytree

from slt import compile_cache
from slt.fit import FitResult
from slt.problem import Problem, require_problem
from slt.results import Persistable
from slt.validation import require_instance, require_int

__all__ = ["LaplaceResult", "laplace"]

# Eigenvalues of H at or below RTOL * max|eigenvalue| count as zero. H is a sum of n float64
# terms, so its entries carry relative rounding errors of order sqrt(n) * 1e-16; 1e-10 stays
# far above that for any n up to 1e10 while flagging exact null directions.
RTOL = 1e-10
# A Newton decrement ½ gᵀH⁻¹g above this (nats) means the fit is not at the maximum.
NEWTON_DECREMENT_WARNING = 1e-3


@dataclass(frozen=True)
class LaplaceResult(Persistable):
    """The Laplace log evidence, the spectrum of the Hessian and the singularity diagnostics.

    Attributes:
      log_evidence: l(û) + (rank/2) log 2π - ½ Σ log(eigenvalues above tolerance)
        + log(num_modes).
      free_energy: -log_evidence.
      log_joint: l(û), the log joint at the fit.
      log_det_hessian: Σ log eigenvalues over the rank positive ones.
      eigenvalues: all eigenvalues of H, ascending.
      prior_share: per eigendirection of H, the prior's share of the curvature (ascending).
      rank: number of eigenvalues above the tolerance; dim: d.
      data_rank: directions in which the prior's share is below 1/sqrt(n).
      singular: rank < dim, or data_rank < rank.
      newton_decrement: ½ gᵀ H⁺ g at the fit (nats by which the fit misses the maximum).
      num_modes: equivalent modes counted (log num_modes added).
      warnings: plain-language diagnostics (also issued as Python warnings).
    """

    log_evidence: float
    free_energy: float
    log_joint: float
    log_det_hessian: float
    eigenvalues: np.ndarray = field(repr=False)
    prior_share: np.ndarray = field(repr=False)
    rank: int
    dim: int
    data_rank: int
    singular: bool
    newton_decrement: float
    num_modes: int
    warnings: tuple[str, ...] = ()

    @property
    def smallest_eigenvalues(self) -> np.ndarray:
        """The (up to) three smallest eigenvalues of H."""
        return self.eigenvalues[:3]

    def summary(self) -> pd.DataFrame:
        """One-row table."""
        return pd.DataFrame([{
            "log_evidence": self.log_evidence, "free_energy": self.free_energy,
            "log_det_hessian": self.log_det_hessian, "rank": self.rank, "d": self.dim,
            "data_rank": self.data_rank, "singular": self.singular,
            "min_eigenvalue": float(self.eigenvalues[0]),
            "max_prior_share": float(self.prior_share[-1]),
        }])

    def to_xarray(self) -> xr.Dataset:
        """The approximation as an xarray Dataset.

        Returns:
          ``eigenvalues`` (of H, ascending) and ``prior_share`` (the prior's fraction of the
          curvature, per eigendirection, ascending) over dim ``eigen``; 0-d variables
          log_evidence, free_energy, log_joint, log_det_hessian and newton_decrement (nats);
          attrs rank, dim, data_rank, singular (0 or 1: NetCDF attributes hold no booleans)
          and num_modes.
        """
        return xr.Dataset(
            {"eigenvalues": (("eigen",), self.eigenvalues),
             "prior_share": (("eigen",), self.prior_share),
             "log_evidence": self.log_evidence, "free_energy": self.free_energy,
             "log_joint": self.log_joint, "log_det_hessian": self.log_det_hessian,
             "newton_decrement": self.newton_decrement},
            attrs={"rank": self.rank, "dim": self.dim, "data_rank": self.data_rank,
                   "singular": int(self.singular), "num_modes": self.num_modes},
        )

    def plot(self, **kwargs):
        """The Hessian's eigenvalues and the prior's share of each direction."""
        from slt.plots.evidence import plot_laplace

        return plot_laplace(self, **kwargs)

    def __repr__(self) -> str:
        flag = ", SINGULAR" if self.singular else ""
        smallest = ", ".join(f"{v:.3g}" for v in self.smallest_eigenvalues)
        return (
            f"LaplaceResult(log_evidence={self.log_evidence:.6g}, rank={self.rank}/{self.dim}, "
            f"data_rank={self.data_rank}, smallest eigenvalues=[{smallest}]{flag})"
        )


def laplace(problem: Problem, fit: FitResult, *, num_modes: int = 1) -> LaplaceResult:
    """Laplace approximation of log Z at the MAP, in unconstrained coordinates, float64.

    Args:
      problem: model and data with a proper prior.
      fit: the MAP, `slt.fit_map(problem, key)` (prior=True).
      num_modes: how many equivalent modes the posterior has by symmetry; the Gaussian at one
        mode is counted num_modes times. For a K-component mixture with well-separated,
        distinct components it is K! (label switching); the default 1 counts one mode.

    Returns:
      A `LaplaceResult`; `singular` says when the approximation is not to be trusted.

    Raises:
      InputError (a ValueError): problem or fit of the wrong type, num_modes not an
        integer >= 1.
      ValueError: a maximum-likelihood fit (the expansion needs the prior), no proper prior,
        or a non-finite Hessian.

    Example:
      >>> fit = slt.fit_map(problem, key)
      >>> result = slt.laplace(problem, fit)
      >>> round(result.log_evidence, 4), result.singular
      (-141.5507, False)
      >>> x, y = problem.data["x"], problem.data["y"]     # exact for conjugate linear regression
      >>> round(slt.truth.linear_regression_log_evidence(x, y, 1.0, 1.0), 4)
      -141.5507

    References:
      Tierney & Kadane, "Accurate approximations for posterior moments and marginal
      densities", JASA 81:82–86, 1986; Watanabe (2009) on why it fails for singular models.
    """
    require_problem(problem)
    require_instance("fit", fit, FitResult, "a FitResult from slt.fit_map")
    if fit.objective != "map":
        raise ValueError("laplace expands around the MAP: fit with slt.fit_map(..., prior=True)")
    if not problem.has_prior:
        raise ValueError("the Laplace evidence needs a proper prior (pass log_prior= to from_loss)")
    num_modes = require_int("num_modes", num_modes, minimum=1)
    log_joint, gradient, hessian_lik, hessian_prior = _derivatives(problem, fit.params)
    hessian = hessian_lik + hessian_prior
    if not (np.isfinite(log_joint) and np.all(np.isfinite(hessian))):
        raise ValueError("the log joint or its Hessian is not finite at the fit")
    eigenvalues, vectors = np.linalg.eigh(hessian)
    tolerance = RTOL * max(float(np.max(np.abs(eigenvalues))), np.finfo(np.float64).tiny)
    positive = eigenvalues > tolerance
    rank = int(positive.sum())
    kept = vectors[:, positive] / np.sqrt(eigenvalues[positive])
    prior_share = np.linalg.eigvalsh(kept.T @ hessian_prior @ kept) if rank else np.zeros(0)
    data_rank = int(np.sum(prior_share < 1.0 / np.sqrt(problem.n)))
    projected = kept.T @ gradient
    newton_decrement = 0.5 * float(projected @ projected)
    log_det = float(np.sum(np.log(eigenvalues[positive])))
    log_evidence = (
        log_joint + 0.5 * rank * np.log(2 * np.pi) - 0.5 * log_det + float(np.log(num_modes))
    )
    messages = _diagnose(problem.dim, rank, data_rank, eigenvalues, newton_decrement, problem.n)
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return LaplaceResult(
        log_evidence=float(log_evidence), free_energy=-float(log_evidence), log_joint=log_joint,
        log_det_hessian=log_det, eigenvalues=eigenvalues,
        prior_share=prior_share if rank else np.array([np.nan]), rank=rank, dim=problem.dim,
        data_rank=data_rank, singular=rank < problem.dim or data_rank < rank,
        newton_decrement=newton_decrement, num_modes=int(num_modes), warnings=tuple(messages),
    )


def _derivatives(problem: Problem, params):
    """l(û), ∇l(û), -∇² log-likelihood and -∇² log prior at `params`, all float64 numpy."""
    with jax.enable_x64(True):
        # converted on the host: no program compiled for a conversion
        params64 = jax.tree_util.tree_map(
            lambda leaf: jnp.asarray(np.asarray(leaf, np.float64)), params)
        flat, unravel = ravel_pytree(params64)

        def loglik(x):
            return jnp.sum(problem.loglik(unravel(x), problem.data))

        def log_prior(x):
            return problem.log_prior(unravel(x))

        def evaluate(x):
            value, gradient = jax.value_and_grad(lambda z: loglik(z) + log_prior(z))(x)
            return value, gradient, -jax.hessian(loglik)(x), -jax.hessian(log_prior)(x)

        program = compile_cache.program_for(problem, ("laplace derivatives", flat.dtype),
                                            evaluate, flat, compile="brief", keep=False)
        return tuple(np.asarray(a, dtype=np.float64) for a in program(flat))


def _diagnose(dim, rank, data_rank, eigenvalues, newton_decrement, n) -> list[str]:
    messages = []
    if rank < dim:
        negative = int(np.sum(eigenvalues < -RTOL * np.max(np.abs(eigenvalues))))
        what = f"{negative} negative (the fit is a saddle, not a maximum) and " if negative else ""
        messages.append(
            f"the Hessian is numerically singular: rank {rank} of {dim} ({what}smallest "
            f"eigenvalues {np.array2string(eigenvalues[:3], precision=3)}); log det runs over "
            f"the {rank} positive eigenvalues only, the full Laplace value is infinite"
        )
    if data_rank < rank:
        messages.append(
            f"the data determine only {data_rank} of {rank} directions at the MAP (the prior "
            f"supplies more than 1/sqrt(n) = {1 / np.sqrt(n):.3g} of the curvature in the "
            f"others): the model is singular here and the Laplace approximation is unreliable"
        )
    if newton_decrement > NEWTON_DECREMENT_WARNING:
        messages.append(
            f"the fit is {newton_decrement:.2g} nats short of the maximum (Newton decrement); "
            f"refit with more steps"
        )
    return messages
