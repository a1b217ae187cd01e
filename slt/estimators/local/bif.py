"""Bayesian influence functions (Kreer, Wu, Adam, Furman, Hoogland 2025, arXiv 2509.26544).

For a training example z_i and a query example z_q (a test image, or another training
example), with per-example losses l(w) = -log p(y | x, w) (constants included) and
`slt.llc`'s local posterior pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2):

    BIF(z_i, z_q) = -Cov_pi(l_i(w), l_q(w)).

Normalisation (per-example losses, no factor n beta). Give z_i the extra weight h in the
mean loss, L_n + h l_i (the weight of z_i goes from 1/n to 1/n + h); the posterior becomes
pi_h ∝ pi exp(-n beta h l_i), and differentiating E_h[l_q] = ∫ l_q pi_h / ∫ pi_h at h = 0
gives, for any model (singular or not),

    d E_h[l_q] / dh = -n beta Cov_pi(l_i, l_q) = n beta BIF(z_i, z_q).

So n beta BIF is the change of the query's expected loss per unit of upweighting of z_i:
negative when z_i *supports* the query (more weight on z_i, lower query loss), positive when
it *opposes* it.

The classical influence function (Koh & Liang 2017) is the same derivative for the minimiser
of L_n + h l_i instead of the posterior mean: IF(z_i, z_q) = -grad l_q^T H^{-1} grad l_i,
H = Hess L_n(w*) (of the *mean* loss), gradients at w*. Where the model is regular the local
posterior is close to N(w*, Sigma), Sigma = (n beta H + gamma I)^{-1}; with
l(w) ≈ l(w*) + g^T (w - w*) + (1/2) (w - w*)^T H_l (w - w*), the Gaussian moments give

    Cov(l_i, l_q) = g_i^T Sigma g_q + (1/2) tr(H_i Sigma H_q Sigma)   (+ higher cumulants),

whose second term is O(1 / (n beta)^2) against the first's O(1 / (n beta)); hence

    n beta BIF(z_i, z_q) ≈ -g_q^T (H + gamma / (n beta) I)^{-1} g_i  ->  IF(z_i, z_q)

as n beta grows and gamma / (n beta) becomes small against H's eigenvalues
(`BIFResult.influence_function` returns n beta BIF on that scale; tests/estimators/
test_influence.py checks it on logistic regression against IF with the exact Hessian). Where H
is singular IF is undefined and the BIF is not: the covariance only needs the posterior.

The covariances come from one run of `llc`'s chains that evaluates the losses of the training
examples and the queries every `plan.observe_every`-th draw after the warmup and keeps, per chain
and on device, their streaming means and cross co-moment (`slt.samplers.moments`): memory n_train x
n_query per chain and chunk of steps, whatever the number of draws. Standard errors are by
batch means over those blocks of draws, R-hat between chains
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
from slt.validation import InputError, require_int

__all__ = ["BIFResult", "bif"]


@dataclass(frozen=True)
class BIFResult(ObservedResult, Persistable):
    """Bayesian influence of every training example on every query (module doc).

    Attributes:
      train_indices, query_indices: the examples' indices in the training data; None for
        examples given as data (then they are named by position).
      train_loss_at_center, query_loss_at_center: l(w*) of each.
      influence: BIF(z_i, z_q) = -Cov(l_i(w), l_q(w)), shape (n_train, n_query): negative
        where z_i supports the query, positive where it opposes it.
      std_error: its standard error (batch means), entrywise.
      correlation: Corr(l_i(w), l_q(w)) (scale-free; -correlation is the normalised BIF).
      rhat_train, rhat_query: R-hat of every example's loss.
      num_samples, every, moments, run, warnings: the run's (`ObservedResult`); in moments,
        x: the training losses, y: the query losses.
    """

    train_indices: np.ndarray | None
    query_indices: np.ndarray | None
    train_loss_at_center: np.ndarray = field(repr=False)
    query_loss_at_center: np.ndarray = field(repr=False)
    influence: np.ndarray = field(repr=False)
    std_error: np.ndarray = field(repr=False)
    correlation: np.ndarray = field(repr=False)
    rhat_train: np.ndarray = field(repr=False)
    rhat_query: np.ndarray = field(repr=False)

    @property
    def train_labels(self) -> np.ndarray:
        """Training examples' names: their indices, or positions in the given data."""
        return example_labels(self.train_indices, self.influence.shape[0])

    @property
    def query_labels(self) -> np.ndarray:
        """Queries' names: their training indices, or positions in the given data."""
        return example_labels(self.query_indices, self.influence.shape[1])

    def influence_function(self) -> np.ndarray:
        """n beta BIF: the change of each query's expected loss per unit of extra weight on
        each training example in the mean loss, the scale of the classical influence function
        -grad l_q^T H^{-1} grad l_i (module doc)."""
        return self.run.nbeta * self.influence

    def supporting(self, query: int = 0, k: int = 5) -> pd.DataFrame:
        """The k training examples that support query number `query` most (most negative
        BIF: more weight on them lowers its expected loss), most supporting first."""
        return self._ranked(query, k, ascending=True)

    def opposing(self, query: int = 0, k: int = 5) -> pd.DataFrame:
        """The k training examples that oppose query number `query` most (most positive
        BIF: more weight on them raises its expected loss), most opposing first."""
        return self._ranked(query, k, ascending=False)

    def _ranked(self, query: int, k: int, *, ascending: bool) -> pd.DataFrame:
        query = require_int("query", query, minimum=0)
        if query >= self.influence.shape[1]:
            raise InputError(f"query {query} out of range: there are "
                             f"{self.influence.shape[1]} queries")
        table = pd.DataFrame(
            {"influence": self.influence[:, query], "se": self.std_error[:, query],
             "correlation": self.correlation[:, query]},
            index=pd.Index(self.train_labels, name="train"),
        )
        return table.sort_values("influence", ascending=ascending).head(
            require_int("k", k, minimum=1))

    def summary(self) -> pd.DataFrame:
        """One row per query (index: its name): l_q(w*), its most supporting and most
        opposing training example with their BIF and standard error, the largest R-hat of
        its loss."""
        rows = []
        for query in range(self.influence.shape[1]):
            support, oppose = (int(np.argmin(self.influence[:, query])),
                               int(np.argmax(self.influence[:, query])))
            rows.append({
                "loss_at_center": self.query_loss_at_center[query],
                "most_supporting": self.train_labels[support],
                "supporting_bif": self.influence[support, query],
                "supporting_se": self.std_error[support, query],
                "most_opposing": self.train_labels[oppose],
                "opposing_bif": self.influence[oppose, query],
                "opposing_se": self.std_error[oppose, query],
                "rhat": self.rhat_query[query],
            })
        return pd.DataFrame(rows, index=pd.Index(self.query_labels, name="query"))

    def to_xarray(self) -> xr.Dataset:
        """The matrices over (train, query), per-example values over train or query."""
        pair = ("train", "query")
        return xr.Dataset(
            {"influence": (pair, self.influence), "std_error": (pair, self.std_error),
             "correlation": (pair, self.correlation),
             "train_loss_at_center": ("train", self.train_loss_at_center),
             "query_loss_at_center": ("query", self.query_loss_at_center),
             "rhat_train": ("train", self.rhat_train), "rhat_query": ("query", self.rhat_query)},
            coords={"train": self.train_labels, "query": self.query_labels},
            attrs=self._run_attrs(),
        )

    def plot(self, **kwargs):
        """The BIF as a heat map (training examples ordered by `order`, queries as columns)
        beside the most supporting and most opposing training examples of one query with
        +-2 standard errors; returns the figure."""
        from slt.plots.influence import plot_bif

        return plot_bif(self, **kwargs)

    def __repr__(self) -> str:
        flags = warnings_note(self.warnings)
        significant = np.abs(self.influence) > 2 * self.std_error
        return (f"BIFResult(train={self.influence.shape[0]}, query={self.influence.shape[1]}, "
                f"chains={self.num_chains}, draws={self.num_samples}, "
                f"{int(significant.sum())} pairs beyond 2 se{flags})")


def bif(
    problem: Problem,
    params: Params,
    key: jax.Array,
    query,
    *,
    train=None,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler | str = "auto",
    plan: RunPlan = RunPlan(),
) -> BIFResult:
    """Bayesian influence functions BIF(z_i, z_q) = -Cov(l_i(w), l_q(w)) of training examples
    on queries, under the local posterior around w* (module doc: the normalisation, and
    n beta BIF -> the classical influence function where the model is regular).

    Args:
      problem, params, key: as for `slt.llc` (params = w*).
      query: the queries: a dict of arrays in the data's format (a test set), or a 1-D array
        of indices into the training data.
      train: the training examples whose influence is measured: None (all n: memory
        n x n_query per chain, and a forward pass over the data at every observation) or a
        1-D array of indices; a dict of arrays is accepted too (their influence is that of
        adding them to the data with the weight h).
      posterior, plan: as for `slt.llc`; the losses are observed every `plan.observe_every`
        steps after the warmup.
      sampler: "auto" (the default): the exact `slt.samplers.MALA()` where n <= 4,096, else
        `SGLD()` with its calibrated step (`slt.estimators.local.observed.attribution_sampler`:
        SGLD's O(eps) bias shows in second moments); or a sampler value as for `slt.llc`
        (SGLD(extrapolate=True) excepted).

    Returns:
      A `BIFResult`.

    Raises:
      InputError (a ValueError): as for `llc`; query or train empty, out of range or not in
        the data's format; a loss not finite at params; extrapolate=True.
      FloatingPointError: every chain diverged.

    Example:
      >>> result = slt.bif(problem, params, key, np.array([0, 1]), train=np.arange(5),
      ...                  sampler=slt.samplers.SGLD(step_size=1e-2, mala_every=0),
      ...                  plan=slt.RunPlan(num_samples=400, num_warmup=100, progress=False))
      >>> result.influence.shape, result.supporting(query=0, k=2).shape
      ((5, 2), (2, 3))
    """
    observed = observe_examples(problem, params, key, (posterior, sampler, plan),
                                {"train": train, "query": query}, description="bif")
    pooled = moments.combine(observed.chains)
    return BIFResult(
        train_indices=observed.indices[0],
        query_indices=observed.indices[1],
        train_loss_at_center=observed.losses[0],
        query_loss_at_center=observed.losses[1],
        influence=-moments.covariance(pooled),
        std_error=block_std_error(observed.blocks, moments.covariance),
        correlation=moments.correlation(pooled),
        rhat_train=observed.rhats[0],
        rhat_query=observed.rhats[1],
        **observed.result_fields(("training losses", "query losses")),
    )
