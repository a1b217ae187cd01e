"""The singular BIC (sBIC) of Drton & Plummer (2017): choosing among nested singular models.

Models M_1 ⊂ M_2 ⊂ … ⊂ M_J (listed smallest first) are fitted to the same n examples;
ℓ_j = log P(Y | π̂_j) is the maximised log-likelihood of M_j (nats, constants included, so
ℓ_j = -n L_n(ŵ_j)), and λ_ij, m_ij are the learning coefficient and its multiplicity of M_j
when the truth is a generic point of M_i (i ≤ j). Were the truth such a point, Watanabe's
expansion of the evidence would give log P(Y | M_j) ≈ log L'_ij with

    L'_ij = P(Y | π̂_j) n^(-λ_ij) (log n)^(m_ij - 1).

(The sBIC R package indexes the other way round, model first.) Which i holds is unknown, and
choosing it by the data would be circular; sBIC averages over it with the submodels' own
approximate posterior, defining L'(M_1), …, L'(M_J) by

    L'(M_j) = Σ_{i≤j} L'_ij L'(M_i) p(M_i) / Σ_{i≤j} L'(M_i) p(M_i),        j = 1 … J,

(p(M_i) the prior over models, uniform by default) and sBIC(M_j) = log L'(M_j). The factor
(log n)^(m_jj - 1) is kept on the diagonal too; the sBIC R package drops it there, which
changes nothing for its Gaussian-mixture and reduced-rank tables (m_jj = 1 in both).

**Solution.** For j = 1 the equation reads L'(M_1) = L'_11. For j > 1, with L'(M_i), i < j,
already known, write x = L'(M_j) and multiply by the denominator:

    x² - b_j x - c_j = 0,    b_j = L'_jj - Σ_{i<j} L'(M_i) p(M_i) / p(M_j),
                             c_j = Σ_{i<j} L'_ij L'(M_i) p(M_i) / p(M_j) > 0.

The product of its roots is -c_j < 0, so exactly one root is positive:

    L'(M_j) = ½ (b_j + sqrt(b_j² + 4 c_j)),

the unique positive solution (Drton & Plummer prove uniqueness and give this form for a
linear order of models). Everything is computed in log space, so that n up to 1e6 and
log-likelihoods of -1e6 neither overflow nor underflow: log c_j and log |b_j| by log-sum-exp,
and, with u = log(4 c_j / b_j²) and g(u) = log((1 + sqrt(1 + e^u)) / 2)
= softplus(softplus(u) / 2) - log 2 (softplus(t) = log(1 + e^t)),

    log L'(M_j) = log b_j + g(u)                        if b_j > 0,
    log L'(M_j) = log c_j - log |b_j| - g(u)            if b_j < 0  (= 2c / (|b| + sqrt(b² + 4c))),
    log L'(M_j) = ½ log c_j                             if b_j = 0,

with no cancellation in either branch.

**Scales.** Like slt's other criteria, the result reports the free energy
F_j = -sBIC(M_j) ≈ -log P(Y | M_j) (nats; lower is better), and, where the dimensions d_j are
given, BIC on the same scale, -ℓ_j + (d_j/2) log n. Posterior model probabilities are
∝ L'(M_j) p(M_j). If every λ_ij equals λ_jj and m_ij = 1, then L'_ij = L'_jj and the
equations give L'(M_j) = L'_jj exactly: sBIC is then ℓ_j - λ_jj log n, i.e. BIC when
λ_jj = d_j / 2. With singular submodels (λ_ij ≤ λ_jj, m_ij ≥ 1, log n ≥ 1) L'(M_j) is a
weighted mean of L'_ij ≥ L'_jj, so sBIC never penalises more than ℓ_j - λ_jj log n.

Example:
  >>> from slt.estimators.evidence.sbic import sbic_gaussian_mixtures
  >>> result = sbic_gaussian_mixtures([-657.7, -617.5, -616.1, -615.2], n=300)
  >>> result.selected, round(float(result.posterior[1]), 3)
  ('K=2', 0.818)

References:
  Drton & Plummer, "A Bayesian information criterion for singular models", JRSS-B
  79:323–380, 2017 (with discussion).
  Watanabe, *Algebraic Geometry and Statistical Learning Theory*, Cambridge University Press,
  2009.
  Weihs & Plummer, the sBIC R package, github.com/Lucaweihs/sBIC (GPL; consulted for the
  fixed point and the learning-coefficient tables, no code taken).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logsumexp

from slt import truth
from slt.results import Persistable
from slt.validation import InputError, require_int, require_positive

__all__ = [
    "SBICResult",
    "plug_in_learning_coefficients",
    "sbic",
    "sbic_gaussian_mixtures",
    "sbic_reduced_rank",
]

# Nested models' maximised log-likelihoods cannot decrease. A fit reported this much lower
# (relative to max(1, |ℓ|)) than its submodel's is flagged: 1e-6 sits above an optimiser's
# convergence noise (fit_map stops at gradient norms of 1e-8 per example) and far below any
# decrease that changes a choice.
LOGLIK_DECREASE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class SBICResult(Persistable):
    """sBIC of a nested family, on the free-energy scale, with BIC beside it.

    Attributes:
      names: the models, smallest first.
      log_likelihoods: ℓ_j = log P(Y | π̂_j) = -n L_n(ŵ_j), nats.
      n: the number of examples.
      learning_coefficients: (J, J) array, entry [i, j] = λ_ij (truth generic in M_i, model
        M_j); NaN below the diagonal, where it has no meaning.
      multiplicities: (J, J) array of m_ij, NaN below the diagonal.
      prior: p(M_j), normalised to sum 1.
      sbic: log L'(M_j) (Drton & Plummer's scale, ≈ log P(Y | M_j)).
      free_energy: -sbic, ≈ F = -log Z (lower is better).
      posterior: posterior model probabilities ∝ L'(M_j) p(M_j).
      dims: d_j, the number of parameters (`dim`) of each model, or None when not given.
      bic: BIC on the free-energy scale, -ℓ_j + (d_j/2) log n, or None without d_j.
      warnings: diagnostics (log-likelihoods that decrease along the nesting).
    """

    names: tuple[str, ...]
    log_likelihoods: np.ndarray
    n: int
    learning_coefficients: np.ndarray
    multiplicities: np.ndarray
    prior: np.ndarray
    sbic: np.ndarray
    free_energy: np.ndarray
    posterior: np.ndarray
    dims: np.ndarray | None = None
    bic: np.ndarray | None = None
    warnings: tuple[str, ...] = ()

    @property
    def selected(self) -> str:
        """The model of lowest sBIC free energy (highest posterior probability)."""
        return self.names[int(np.argmin(self.free_energy))]

    @property
    def bic_selected(self) -> str | None:
        """The model of lowest BIC free energy, or None without d_j."""
        return None if self.bic is None else self.names[int(np.argmin(self.bic))]

    def summary(self) -> pd.DataFrame:
        """One row per model: ℓ_j, λ_jj, m_jj, free energy -sBIC, sBIC, [d_j, BIC],
        posterior probability; indexed by model name."""
        columns = {
            "log_likelihood": self.log_likelihoods,
            "lambda": np.diag(self.learning_coefficients),
            "multiplicity": np.diag(self.multiplicities),
            "free_energy": self.free_energy,
            "sbic": self.sbic,
        }
        if self.bic is not None:
            columns.update(d=self.dims, bic_free_energy=self.bic)
        columns["posterior"] = self.posterior
        return pd.DataFrame(columns, index=pd.Index(self.names, name="model"))

    def to_xarray(self) -> xr.Dataset:
        """The family as an xarray Dataset.

        Returns:
          Over dim ``model`` (coordinate: `names`, smallest first): log_likelihood, prior,
          sbic, free_energy, posterior and, when d_j were given, dims (d_j) and bic (nats);
          over dims (true_model, model): learning_coefficients and multiplicities (entry
          [i, j] for truth generic in M_i, model M_j; NaN below the diagonal); attrs n and
          selected.
        """
        pair = ("true_model", "model")
        variables = {
            "log_likelihood": ("model", self.log_likelihoods), "prior": ("model", self.prior),
            "sbic": ("model", self.sbic), "free_energy": ("model", self.free_energy),
            "posterior": ("model", self.posterior),
            "learning_coefficients": (pair, self.learning_coefficients),
            "multiplicities": (pair, self.multiplicities),
        }
        if self.bic is not None:
            variables |= {"dims": ("model", self.dims), "bic": ("model", self.bic)}
        return xr.Dataset(
            variables, coords={"model": list(self.names), "true_model": list(self.names)},
            attrs={"n": self.n, "selected": self.selected},
        )

    def plot(self, **kwargs):
        """Free energies (sBIC and BIC) relative to the first model, and the posterior."""
        from slt.plots.sbic import plot_sbic

        return plot_sbic(self, **kwargs)

    def __repr__(self) -> str:
        best = int(np.argmin(self.free_energy))
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            table = self.summary().to_string(float_format=lambda v: f"{v:.6g}")
        flags = f"\n{len(self.warnings)} diagnostic warning(s): see .warnings" * bool(
            self.warnings)
        return (
            f"SBICResult(selects {self.names[best]!r}, posterior {self.posterior[best]:.3g}; "
            f"n={self.n}, {len(self.names)} nested models; free_energy = -sBIC in nats)\n"
            f"{table}{flags}"
        )


def sbic(  # 51 of its 86 lines are docstring: the math, example, references
    log_likelihoods: Sequence[float],
    n: int,
    learning_coefficients: np.ndarray | Callable,
    multiplicities: np.ndarray | None = None,
    *,
    prior: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    dims: Sequence[int] | None = None,
) -> SBICResult:
    """Drton & Plummer's singular BIC of nested models M_1 ⊂ … ⊂ M_J (module docstring).

    L'(M_j) solves L'(M_j) = Σ_{i≤j} L'_ij L'(M_i) p(M_i) / Σ_{i≤j} L'(M_i) p(M_i) with
    L'_ij = P(Y | π̂_j) n^(-λ_ij) (log n)^(m_ij - 1); model by model,
    L'(M_j) = ½ (b_j + sqrt(b_j² + 4 c_j)), computed in log space. sBIC(M_j) = log L'(M_j);
    the result reports F_j = -sBIC(M_j) like slt's other free energies.

    Args:
      log_likelihoods: ℓ_j = log P(Y | π̂_j), the maximised log-likelihood of each model
        (e.g. ``[fit.loglik for fit in fits]`` from `slt.fit_map`), smallest model first.
      n: the number of examples, >= 2 (log log n enters through the multiplicities).
      learning_coefficients: λ_ij, the learning coefficient of model j when the truth is a
        generic point of model i, for i <= j: a (J, J) array read on and above the diagonal
        (entries below it are ignored), or a function ``(i, j) -> λ_ij`` or
        ``(i, j) -> (λ_ij, m_ij)`` of 0-based indices i <= j (an `slt.truth.RLCT` is such a
        pair). Exact values for some families are in `slt.truth`; for estimated values see
        `plug_in_learning_coefficients`.
      multiplicities: m_ij, a (J, J) array of integers >= 1 read on and above the diagonal;
        default all 1. Not allowed when the function already returns multiplicities.
      prior: p(M_j) > 0, any scale (normalised); default uniform.
      names: one distinct name per model; default "M1", …, "MJ".
      dims: d_j, for the BIC column -ℓ_j + (d_j/2) log n; default None (no BIC).

    Returns:
      An `SBICResult`.

    Raises:
      InputError (a ValueError): lengths or shapes that do not match, non-finite
        log-likelihoods, n not an integer >= 2, a λ_ij that is negative or not finite, an
        m_ij that is not an integer >= 1, a diagonal λ_jj that decreases with j (the models
        are not listed as a nested family, smallest first), a prior that is not positive,
        duplicate names.

    Warns:
      UserWarning: a log-likelihood lower than its submodel's (nested models' maxima cannot
        decrease: a fit missed its optimum, or the models are not nested); also recorded
        in ``result.warnings``.

    Example:
      >>> from slt import truth
      >>> from slt.estimators.evidence.sbic import sbic
      >>> result = sbic([-720.0, -702.9, -702.4], 500,
      ...               lambda i, j: truth.rrr_rlct(4, 4, j + 1, i + 1))
      >>> result.selected
      'M2'
      >>> bool(result.free_energy[2] < -result.log_likelihoods[2] + 15 / 2 * np.log(500))
      True

    References:
      Drton & Plummer, JRSS-B 79:323–380, 2017.
    """
    log_likelihoods = _finite_vector("log_likelihoods", log_likelihoods)
    size = log_likelihoods.size
    n = require_int("n", n, minimum=2)
    names = _names(names, size)
    lam, mult = _tables(learning_coefficients, multiplicities, size)
    _check_nesting(lam, names)
    log_prior = np.log(_prior(prior, size))
    d = None if dims is None else _dimensions(dims, size)

    log_n = np.log(n)
    upper = np.triu(np.ones((size, size), bool))
    log_terms = np.where(upper, log_likelihoods[None, :] - lam * log_n
                         + (mult - 1.0) * np.log(log_n), np.nan)
    log_marginal = _log_marginals(log_terms, log_prior)
    messages = _loglik_decreases(log_likelihoods, names)
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return SBICResult(
        names=names, log_likelihoods=log_likelihoods, n=n, learning_coefficients=lam,
        multiplicities=mult, prior=np.exp(log_prior), sbic=log_marginal,
        free_energy=-log_marginal,
        posterior=np.exp(log_marginal + log_prior - logsumexp(log_marginal + log_prior)),
        dims=d, bic=None if d is None else -log_likelihoods + 0.5 * d * log_n,
        warnings=tuple(messages),
    )


def sbic_gaussian_mixtures(
    log_likelihoods: Sequence[float],
    n: int,
    *,
    dim: int = 1,
    weight_concentration: float = 1.0,
    prior: Sequence[float] | None = None,
) -> SBICResult:
    """sBIC for Gaussian mixtures with K = 1 … J components (`slt.models.gaussian_mixture`).

    Model K: Σ_k a_k N(y; μ_k, diag(σ_k²)) in D = `dim` dimensions, each component with its
    own means and scales (r = 2D parameters per component; ``shared_scale=False``), weights
    a ~ Dirichlet(φ), φ = `weight_concentration`; d_K = (K - 1) + 2 K D. The learning
    coefficients are the upper bounds of `slt.truth.gaussian_mixture_rlct_bound`,

        λ_ij = ½ min{ (2D + 1) i - 1 + φ (j - i),  2D j + i - 1 },   m_ij = 1,

    the bound Drton & Plummer (2017, §6.2) use for univariate mixtures with unequal
    variances (their "sBIC-bar"; the sBIC R package's ``GaussianMixtures``). For D = 1 that
    is exactly slt's model; for D > 1 (diagonal covariances, which D&P do not treat) the same
    two deformations give the bound with r = 2D. The exact λ_ij of separate-variance
    mixtures are unknown: a bound penalises the larger models at least as much as the exact
    values would (it is never below them), so it errs towards fewer components than sBIC
    with the exact values would; its λ_ij never exceed BIC's d_j/2, and on simulated data it
    picks more components than BIC does (benchmarks/sbic_selection.py).
    φ should be the concentration of the prior the fits used: 1 for slt's default (D&P's
    choice for the galaxies data; the R package defaults to φ = (r + 1)/2).

    With separate scales the likelihood is unbounded (a component collapsing on one point),
    so the MLE does not exist: use the log-likelihood at the MAP (``fit_map(..., prior=True)``,
    whose log-normal prior on the scales keeps them away from 0) or at a non-degenerate local
    maximum, as mclust's EM does for the R package.

    Args:
      log_likelihoods: ℓ_K at the fit of the K-component mixture, K = 1, 2, … in order.
      n: the number of examples, >= 2.
      dim: D >= 1.
      weight_concentration: φ > 0.
      prior: p(M_K) > 0; default uniform.

    Returns:
      An `SBICResult` with names "K=1", …, and d_K (BIC) filled in.

    Raises:
      InputError (a ValueError): as `sbic`, and dim or φ out of range.

    Example:
      >>> from slt.estimators.evidence.sbic import sbic_gaussian_mixtures
      >>> result = sbic_gaussian_mixtures([-657.7, -617.5, -616.1, -615.2], n=300)
      >>> result.selected, result.bic_selected
      ('K=2', 'K=2')
      >>> float(result.learning_coefficients[0, 3])   # truth K = 1, model K = 4: ½ (2 + 3)
      2.5

    References:
      Drton & Plummer, JRSS-B 79:323–380, 2017, §6.2; Yamazaki & Watanabe, Neural Networks
      16:1029–1038, 2003.
    """
    size = _finite_vector("log_likelihoods", log_likelihoods).size
    dim = require_int("dim", dim, minimum=1)
    phi = require_positive("weight_concentration", weight_concentration)

    def bound(i, j):
        return truth.gaussian_mixture_rlct_bound(i + 1, j + 1, dim, weight_concentration=phi)

    components = np.arange(1, size + 1)
    return sbic(
        log_likelihoods, n, bound, prior=prior, names=[f"K={k}" for k in components],
        dims=(components - 1) + 2 * components * dim,
    )


def sbic_reduced_rank(
    log_likelihoods: Sequence[float],
    n: int,
    M: int,
    N: int,
    *,
    min_rank: int = 1,
    prior: Sequence[float] | None = None,
) -> SBICResult:
    """sBIC for reduced-rank regression y = B A x + ε of ranks H = min_rank, min_rank + 1, ….

    A ∈ R^{H×M}, B ∈ R^{N×H} (M inputs, N outputs). λ_ij and m_ij are exact (Aoyagi &
    Watanabe 2005, `slt.truth.rrr_rlct`) with true rank r = H_i and fitted rank H = H_j;
    the rank-0 model (y = ε, no parameters) has λ = 0. The BIC column uses the dimension of
    the rank-H matrices, d_H = H (M + N - H) = 2 λ_HH, as the sBIC R package does;
    a network parametrised by A and B has H (M + N) parameters, H² of them unidentifiable.

    Args:
      log_likelihoods: ℓ_H at the fit of each rank, in increasing rank.
      n: the number of examples, >= 2.
      M, N: input and output dimensions, >= 1.
      min_rank: the smallest rank in the list, >= 0; the largest, min_rank + J - 1, must not
        exceed min(M, N) (larger ranks give the same model).
      prior: p(M_H) > 0; default uniform.

    Returns:
      An `SBICResult` with names "rank=H" and d_H filled in.

    Raises:
      InputError (a ValueError): as `sbic`, and M, N, min_rank out of range or ranks above
        min(M, N).

    Example:
      >>> from slt.estimators.evidence.sbic import sbic_reduced_rank
      >>> result = sbic_reduced_rank([-720.0, -702.9, -702.4], 500, M=4, N=4)
      >>> result.selected, float(result.learning_coefficients[1, 2])   # r = 2, H = 3
      ('rank=2', 7.0)

    References:
      Aoyagi & Watanabe, Neural Networks 18:924–933, 2005; Drton & Plummer, JRSS-B
      79:323–380, 2017.
    """
    size = _finite_vector("log_likelihoods", log_likelihoods).size
    M = require_int("M", M, minimum=1)
    N = require_int("N", N, minimum=1)
    min_rank = require_int("min_rank", min_rank, minimum=0)
    ranks = np.arange(min_rank, min_rank + size)
    if ranks[-1] > min(M, N):
        raise InputError(
            f"ranks {min_rank} … {ranks[-1]} ({size} log_likelihoods from min_rank="
            f"{min_rank}) exceed min(M, N) = {min(M, N)}; a larger rank is the same model"
        )

    def exact(i, j):
        return (0.0, 1) if ranks[j] == 0 else truth.rrr_rlct(M, N, int(ranks[j]), int(ranks[i]))

    return sbic(
        log_likelihoods, n, exact, prior=prior, names=[f"rank={h}" for h in ranks],
        dims=ranks * (M + N - ranks),
    )


def plug_in_learning_coefficients(lambda_hats: Sequence[float]) -> np.ndarray:
    """λ_ij = λ̂_j for every i <= j: sBIC with learning coefficients estimated at the data.

    `slt.rlct` and `slt.llc` estimate, for each model M_j, the learning coefficient at the
    distribution that generated *these* data, not at a generic point of some submodel M_i.
    The defensible way to use such estimates in sBIC is as the learning coefficient of M_j
    whatever the submodel: the truth-dependence that Drton & Plummer average over (their
    answer to the circularity of choosing λ by the unknown truth) is then resolved by the
    estimate instead. The fixed point is then trivial: L'_ij = L'_jj for every i, so
    L'(M_j) = L'_jj and

        sBIC(M_j) = ℓ_j - λ̂_j log n,     free energy n L_n(ŵ_j) + λ̂_j log n,

    the singular-aware criterion that `slt.rlct` reports as ``singular_bic`` (Watanabe 2013
    estimates λ the same way), with m = 1 because λ̂ at finite n absorbs the
    (m - 1) log log n term. Not defensible: λ̂_j on the diagonal with theoretical λ_ij off it.
    At the data λ̂_j estimates λ_{i0 j} for the true i0, not the generic λ_jj, so the
    mixture would count the singularity twice. To estimate the whole table instead, estimate
    λ_ij as the learning coefficient of M_j on a large sample simulated from M_i at its fit
    π̂_i (a generic point of M_i, almost surely), e.g. with `slt.llc`, and pass the (J, J)
    table to `sbic` directly.

    Args:
      lambda_hats: λ̂_j >= 0 for each model, smallest model first (not decreasing: the
        models are nested).

    Returns:
      A (J, J) array with column j equal to λ̂_j on and above the diagonal, NaN below; pass
      it to `sbic` as `learning_coefficients`.

    Raises:
      InputError (a ValueError): not a non-empty 1-D sequence of finite numbers >= 0.

    Example:
      >>> from slt.estimators.evidence.sbic import plug_in_learning_coefficients, sbic
      >>> lambda_hats = np.array([1.0, 1.6, 1.9])
      >>> table = plug_in_learning_coefficients(lambda_hats)
      >>> result = sbic([-400.0, -390.0, -389.5], 200, table)
      >>> bool(np.allclose(result.sbic, result.log_likelihoods - lambda_hats * np.log(200)))
      True

    References:
      Drton & Plummer, JRSS-B 79:323–380, 2017 (the circularity); Watanabe, "A widely
      applicable Bayesian information criterion", JMLR 14:867–897, 2013.
    """
    lambda_hats = _finite_vector("lambda_hats", lambda_hats)
    if np.any(lambda_hats < 0):
        raise InputError(f"lambda_hats must be >= 0 (learning coefficients), got {lambda_hats}")
    size = lambda_hats.size
    return np.where(np.triu(np.ones((size, size), bool)), lambda_hats[None, :], np.nan)


# ------------------------------------------------------------------------------ the fixed point


def _log_marginals(log_terms: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    """log L'(M_j), j = 1 … J, from log L'_ij (upper triangle of `log_terms`) and log p."""
    log_marginal = np.empty(log_prior.size)
    log_marginal[0] = log_terms[0, 0]
    for j in range(1, log_prior.size):
        weights = log_marginal[:j] + log_prior[:j] - log_prior[j]  # log L'(M_i) p_i / p_j
        log_marginal[j] = _log_positive_root(
            log_terms[j, j], logsumexp(weights), logsumexp(log_terms[:j, j] + weights)
        )
    return log_marginal


def _log_positive_root(log_diagonal: float, log_sum: float, log_c: float) -> float:
    """log of the positive root of x² - b x - c, b = e^log_diagonal - e^log_sum, c = e^log_c."""
    if log_diagonal == log_sum:
        return 0.5 * log_c
    high, low = max(log_diagonal, log_sum), min(log_diagonal, log_sum)
    log_abs_b = high + np.log(-np.expm1(low - high))
    u = np.log(4.0) + log_c - 2.0 * log_abs_b
    g = np.logaddexp(0.0, 0.5 * np.logaddexp(0.0, u)) - np.log(2.0)  # log((1 + √(1+e^u))/2)
    if log_diagonal > log_sum:
        return float(log_abs_b + g)
    return float(log_c - log_abs_b - g)


# ------------------------------------------------------------------------------ input checks


def _finite_vector(name: str, values) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a sequence of finite numbers, got {values!r}") from None
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"{name} must be a non-empty 1-D sequence, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InputError(f"{name} must be finite, got {array} (position(s) "
                         f"{np.flatnonzero(~np.isfinite(array)).tolist()} are not)")
    return array


def _names(names, size: int) -> tuple[str, ...]:
    if names is None:
        return tuple(f"M{j}" for j in range(1, size + 1))
    names = tuple(names) if not isinstance(names, str) else (names,)
    if len(names) != size or not all(isinstance(name, str) for name in names):
        raise InputError(f"names must be {size} strings, one per log-likelihood, got {names!r}")
    if len(set(names)) != size:
        raise InputError(f"names must be distinct, got {names!r}")
    return names


def _prior(prior, size: int) -> np.ndarray:
    if prior is None:
        return np.full(size, 1.0 / size)
    prior = _finite_vector("prior", prior)
    if prior.size != size or np.any(prior <= 0):
        raise InputError(f"prior must be {size} numbers > 0 (one per model), got {prior}")
    return prior / prior.sum()


def _dimensions(dims, size: int) -> np.ndarray:
    d = _finite_vector("dims", dims)
    if d.size != size or np.any(d < 0) or np.any(d != np.round(d)):
        raise InputError(f"dims must be {size} integers >= 0 (one per model), got {d}")
    return d.astype(np.int64)


def _tables(learning_coefficients, multiplicities, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(λ, m) as (J, J) float arrays, checked on and above the diagonal, NaN below."""
    if callable(learning_coefficients):
        lam, from_function = _call_table(learning_coefficients, size)
        if from_function is not None:
            if multiplicities is not None:
                raise InputError("multiplicities were given, but learning_coefficients already "
                                 "returns (λ, m) pairs; give them one way only")
            multiplicities = from_function
    else:
        lam = _square("learning_coefficients", learning_coefficients, size)
    mult = np.ones((size, size)) if multiplicities is None else _square(
        "multiplicities", multiplicities, size)
    upper = np.triu(np.ones((size, size), bool))
    _check_upper("learning_coefficients", lam, upper, lam >= 0, "finite numbers >= 0")
    _check_upper("multiplicities", mult, upper, (mult >= 1) & (mult == np.round(mult)),
                 "integers >= 1")
    return np.where(upper, lam, np.nan), np.where(upper, mult, np.nan)


def _call_table(function: Callable, size: int) -> tuple[np.ndarray, np.ndarray | None]:
    """λ_ij (and m_ij, if the function returns pairs) for 0 <= i <= j < J."""
    lam, mult = np.full((size, size), np.nan), np.full((size, size), np.nan)
    pairs = set()
    for j in range(size):
        for i in range(j + 1):
            value = function(i, j)
            pairs.add(isinstance(value, tuple))
            try:
                lam[i, j], mult[i, j] = value if isinstance(value, tuple) else (value, 1)
            except (TypeError, ValueError):
                raise InputError(
                    f"learning_coefficients({i}, {j}) must return a number λ or a pair (λ, m), "
                    f"got {value!r}"
                ) from None
    if len(pairs) > 1:
        raise InputError("learning_coefficients must return numbers for every (i, j) or pairs "
                         "(λ, m) for every (i, j), not a mixture")
    return lam, (mult if pairs == {True} else None)


def _square(name: str, values, size: int) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a ({size}, {size}) array of numbers") from None
    if array.shape != (size, size):
        raise InputError(f"{name} must have shape ({size}, {size}) (one row and column per "
                         f"model), got {array.shape}")
    return array


def _check_upper(name: str, table: np.ndarray, upper: np.ndarray, valid: np.ndarray,
                 allowed: str) -> None:
    bad = upper & ~(np.isfinite(table) & valid)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"{name}[{i}, {j}] = {float(table[i, j])!r}: entries on and above the "
                         f"diagonal must be {allowed}")


def _check_nesting(lam: np.ndarray, names: tuple[str, ...]) -> None:
    diagonal = np.diag(lam)
    drops = np.flatnonzero(np.diff(diagonal) < 0)
    if drops.size:
        j = int(drops[0])
        raise InputError(
            f"learning_coefficients: λ_jj decreases from {diagonal[j]:.6g} ({names[j]!r}) to "
            f"{diagonal[j + 1]:.6g} ({names[j + 1]!r}); sBIC needs nested models listed "
            "smallest first, whose generic learning coefficients do not decrease"
        )


def _loglik_decreases(log_likelihoods: np.ndarray, names: tuple[str, ...]) -> list[str]:
    drops = log_likelihoods[:-1] - log_likelihoods[1:]
    tolerance = LOGLIK_DECREASE_TOLERANCE * np.maximum(1.0, np.abs(log_likelihoods[:-1]))
    return [
        f"log_likelihoods decrease from {names[j]!r} to {names[j + 1]!r} by {drops[j]:.4g} "
        "nats: the maximised log-likelihood of a larger nested model cannot be lower; a fit "
        "missed its optimum (more restarts) or the models are not nested"
        for j in np.flatnonzero(drops > tolerance)
    ]
