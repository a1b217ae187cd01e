"""BIC: the regular-model approximation of the free energy, n L_n(ŵ) + (d/2) log n.

On the free-energy scale of the seeds (F = -log Z):

    BIC_F = n L_n(ŵ) + (d/2) log n,

and the classical (Schwarz) value is twice that, -2 log p(D | ŵ) + d log n, reported as `bic`.
L_n is the per-example negative log-likelihood with its constants and d the number of free
parameters after constraints (`Problem.dim`: a K-simplex counts K - 1). For a regular model
F_n = BIC_F + O_p(1); for a singular one the penalty d/2 overstates the learning coefficient
lambda (see `slt.rlct` for n L_n(ŵ) + lambda_hat log n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from slt.fit import FitResult
from slt.problem import Problem, require_problem
from slt.results import Persistable
from slt.validation import require_instance, require_int

__all__ = ["BICResult", "bic"]


@dataclass(frozen=True)
class BICResult(Persistable):
    """BIC on the free-energy scale and the classical 2x scale.

    Attributes:
      free_energy: n L_n(ŵ) + (d/2) log n (≈ -log Z; lower is better).
      bic: the classical value -2 log p(D | ŵ) + d log n = 2 * free_energy.
      nll: n L_n(ŵ) = -log p(D | ŵ).
      penalty: (d/2) log n.
      dim: d; n: the number of examples; objective: "mle" or "map" (the fit used).
    """

    free_energy: float
    bic: float
    nll: float
    penalty: float
    dim: int
    n: int
    objective: str

    def summary(self) -> pd.DataFrame:
        """One-row table."""
        return pd.DataFrame([{
            "bic_free_energy": self.free_energy, "bic_classical": self.bic, "nll": self.nll,
            "penalty": self.penalty, "d": self.dim, "n": self.n, "fit": self.objective,
        }])

    def to_xarray(self) -> xr.Dataset:
        """The estimate as an xarray Dataset: 0-d variables free_energy, bic, nll and penalty
        (nats; `bic` on the classical 2x scale), attrs dim (d), n and objective."""
        return xr.Dataset(
            {"free_energy": self.free_energy, "bic": self.bic, "nll": self.nll,
             "penalty": self.penalty},
            attrs={"dim": self.dim, "n": self.n, "objective": self.objective},
        )

    def plot(self, **kwargs):
        """The two terms of the BIC as a stacked bar."""
        from slt.plots.evidence import plot_bic

        return plot_bic(self, **kwargs)

    def __repr__(self) -> str:
        return (
            f"BICResult(free_energy={self.free_energy:.6g} = n L_n {self.nll:.6g} + "
            f"(d/2) log n {self.penalty:.4g}; classical bic={self.bic:.6g}; d={self.dim}, "
            f"n={self.n}, fit={self.objective})"
        )


def bic(problem: Problem, fit: FitResult, *, dim: int | None = None) -> BICResult:
    """BIC from a fit: n L_n(ŵ) + (d/2) log n, and the classical 2x value.

    Args:
      problem: model and data.
      fit: `slt.fit_map(problem, key, prior=False)` for the textbook BIC (the MLE), or the MAP
        (`prior=True`) where the MLE does not exist (Gaussian mixtures with free scales); the
        two differ by O(1) nats.
      dim: d; default `problem.dim` (free parameters after constraints).

    Returns:
      A `BICResult`.

    Raises:
      InputError (a ValueError): problem or fit of the wrong type, dim not an
        integer >= 0.
      ValueError: the fit's log-likelihood is not finite.

    Example:
      >>> fit = slt.fit_map(problem, key, prior=False)      # the MLE
      >>> result = slt.bic(problem, fit)
      >>> round(result.free_energy, 3), round(result.bic, 3)   # n L_n + (d/2) log n; twice that
      (140.848, 281.696)

    References:
      Schwarz, "Estimating the dimension of a model", Ann. Statist. 6:461–464, 1978.
    """
    require_problem(problem)
    require_instance("fit", fit, FitResult, "a FitResult from slt.fit_map")
    d = problem.dim if dim is None else require_int("dim", dim, minimum=0)
    nll = -float(fit.loglik)
    if not np.isfinite(nll):
        raise ValueError(f"the fit's log-likelihood is not finite ({fit.loglik})")
    penalty = 0.5 * d * float(np.log(problem.n))
    return BICResult(
        free_energy=nll + penalty, bic=2.0 * (nll + penalty), nll=nll, penalty=penalty,
        dim=d, n=problem.n, objective=fit.objective,
    )
