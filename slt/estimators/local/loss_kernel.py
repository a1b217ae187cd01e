"""Per-example loss statistics of the local posterior: the loss gain and the loss kernel.

For examples z_1..z_m (training examples or any others in the data's format) with per-example
losses l_i(w) = -log p(y_i | x_i, w) (constants included), under `slt.llc`'s local posterior

    pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2),

    loss gain   g_i = E_pi[l_i(w)] - l_i(w*),
    loss kernel K_ij = Cov_pi(l_i(w), l_j(w)),   and its correlation K_ij / sqrt(K_ii K_jj).

The loss gain is how much the loss of one example rises when the weights move as the posterior
lets them: large for difficult, atypical or mislabelled examples, whose fit w* holds only
narrowly (summed over the training set and times n beta it is lambda_hat: n beta mean_i g_i =
lambda_hat for the training examples). The kernel says which examples the network treats
alike: their losses rise and fall together across the posterior. Near a regular minimum, with
Sigma the posterior covariance of w, K_ij ≈ grad l_i^T Sigma grad l_j and g_i ≈
(1/2) tr(Hess l_i Sigma) + grad l_i^T (E w - w*) (to second order).

Both come from one run of `llc`'s chains that evaluates the examples' losses every
`plan.observe_every`-th draw after the warmup and keeps, per chain and on device, the streaming
means and co-moments (`slt.samplers.moments`): memory m^2 per chain and chunk of steps, whatever
the number of draws.
Standard errors are by batch means over every chain's blocks of draws, R-hat between chains
(`slt.estimators.local.observed`). """

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.observed import (
    ObservedResult,
    block_std_error,
    example_labels,
    observe_examples,
)
from slt.estimators.local.posterior import LocalPosterior
from slt.problem import Params, Problem
from slt.results import Persistable, warnings_note
from slt.samplers import moments
from slt.samplers.config import RunPlan, Sampler

__all__ = ["LossKernelResult", "loss_kernel"]


@dataclass(frozen=True)
class LossKernelResult(ObservedResult, Persistable):
    """The loss gain and loss kernel of a set of examples (module doc).

    Attributes:
      indices: the examples' indices in the training data; None when they were given as data.
      loss_at_center: l_i(w*), shape (m,).
      loss_gain: E[l_i(w)] - l_i(w*) over all draws of the chains that did not diverge.
      loss_gain_std_error: its standard error (batch means).
      covariance: the loss kernel K_ij = Cov(l_i(w), l_j(w)), shape (m, m) (the draws of all
        chains pooled, each chain's deviations from its own mean plus the spread of the chain
        means: Chan et al.'s merge).
      covariance_std_error: its standard error (batch means), entrywise.
      correlation: K_ij / sqrt(K_ii K_jj).
      rhat: R-hat of every example's loss (Gelman-Rubin from the chains' means and variances).
      num_samples, every, moments, run, warnings: the run's (`ObservedResult`); moments (x = y
        = the losses) is what everything above is computed from.
    """

    indices: np.ndarray | None
    loss_at_center: np.ndarray
    loss_gain: np.ndarray
    loss_gain_std_error: np.ndarray
    covariance: np.ndarray = field(repr=False)
    covariance_std_error: np.ndarray = field(repr=False)
    correlation: np.ndarray = field(repr=False)
    rhat: np.ndarray = field(repr=False)

    @property
    def labels(self) -> np.ndarray:
        """The examples' names: training indices, or positions in the given data."""
        return example_labels(self.indices, len(self.loss_gain))

    def summary(self) -> pd.DataFrame:
        """One row per example (index: `labels`): l_i(w*), loss gain, its se, R-hat."""
        return pd.DataFrame(
            {"loss_at_center": self.loss_at_center, "loss_gain": self.loss_gain,
             "se": self.loss_gain_std_error, "rhat": self.rhat},
            index=pd.Index(self.labels, name="example"),
        )

    def hardest(self, k: int = 10) -> pd.DataFrame:
        """The k examples of largest loss gain (`summary` rows, largest first)."""
        return self.summary().nlargest(k, "loss_gain")

    def to_xarray(self) -> xr.Dataset:
        """Per-example values over dim ``example``, the matrices over (example, other)."""
        pair = ("example", "other")
        return xr.Dataset(
            {"loss_at_center": ("example", self.loss_at_center),
             "loss_gain": ("example", self.loss_gain),
             "loss_gain_std_error": ("example", self.loss_gain_std_error),
             "rhat": ("example", self.rhat),
             "covariance": (pair, self.covariance),
             "covariance_std_error": (pair, self.covariance_std_error),
             "correlation": (pair, self.correlation)},
            coords={"example": self.labels, "other": self.labels},
            attrs=self._run_attrs(),
        )

    def plot(self, **kwargs):
        """The kernel's correlation as a heat map, examples ordered by `order`, beside their
        loss gains (+-2 standard errors); returns the figure."""
        from slt.plots.influence import plot_loss_kernel

        return plot_loss_kernel(self, **kwargs)

    def __repr__(self) -> str:
        flags = warnings_note(self.warnings)
        hardest = int(np.argmax(self.loss_gain))
        return (f"LossKernelResult(examples={len(self.loss_gain)}, chains={self.num_chains}, "
                f"draws={self.num_samples}, largest loss gain {self.loss_gain[hardest]:.3g} "
                f"± {self.loss_gain_std_error[hardest]:.2g} at example "
                f"{int(self.labels[hardest])}{flags})")


def loss_kernel(
    problem: Problem,
    params: Params,
    key: jax.Array,
    examples=None,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler | str = "auto",
    plan: RunPlan = RunPlan(),
) -> LossKernelResult:
    """The loss gain E[l_i(w)] - l_i(w*) and the loss kernel Cov(l_i(w), l_j(w)) of examples
    under the local posterior around w* (module doc).

    Args:
      problem, params, key: as for `slt.llc` (params = w*, a trained network or an MLE).
      examples: None (every training example: memory n^2 per chain), a 1-D array of indices
        into the training data, or a dict of arrays in the data's format (other examples).
      posterior, plan: as for `slt.llc`: the same chains, calibration and diagnostics; the
        losses are observed every `plan.observe_every` steps after the warmup (each
        observation is one forward pass over the examples).
      sampler: "auto" (the default): the exact `slt.samplers.MALA()` where n <= 4,096, else
        `SGLD()` with its calibrated step (`slt.estimators.local.observed.attribution_sampler`:
        SGLD's O(eps) bias shows in second moments); or a sampler value as for `slt.llc`
        (SGLD(extrapolate=True) excepted).

    Returns:
      A `LossKernelResult`.

    Raises:
      InputError (a ValueError): as for `llc`; examples empty, out of range or not in the
        data's format; a loss not finite at params; extrapolate=True.
      FloatingPointError: every chain diverged.

    Example:
      >>> kernel = slt.loss_kernel(
      ...     problem, params, key, np.arange(4),
      ...     sampler=slt.samplers.SGLD(step_size=1e-2, mala_every=0),
      ...     plan=slt.RunPlan(num_samples=400, num_warmup=100, progress=False))
      >>> kernel.covariance.shape, bool(np.all(np.diag(kernel.covariance) > 0))
      ((4, 4), True)
    """
    observed = observe_examples(problem, params, key, (posterior, sampler, plan),
                                {"examples": examples}, description="loss kernel")
    blocks, at_center = observed.blocks, observed.losses[0]
    pooled = moments.combine(observed.chains)
    return LossKernelResult(
        indices=observed.indices[0],
        loss_at_center=at_center,
        loss_gain=pooled.mean_x - at_center,
        loss_gain_std_error=block_std_error(blocks, lambda summary: summary.mean_x),
        covariance=_symmetric(moments.covariance(pooled)),
        covariance_std_error=block_std_error(
            blocks, lambda summary: _symmetric(moments.covariance(summary))),
        correlation=_symmetric(moments.correlation(pooled)),
        rhat=observed.rhats[0],
        **observed.result_fields(("example losses",)),
    )


def _symmetric(matrices: np.ndarray) -> np.ndarray:
    """(M + M^T) / 2 over the last two axes: Welford's co-moment of a vector with itself is
    symmetric up to rounding (d_x (x - mean')^T, rounded in the chains' dtype); the kernel is
    symmetric exactly."""
    return (matrices + np.swapaxes(matrices, -1, -2)) / 2
