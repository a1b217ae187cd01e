"""The learning coefficient lambda from E_beta[n L_n] at several inverse temperatures.

Since d/dbeta F(beta) = E_beta[n L_n] for F(beta) = -log ∫ exp(-beta n L_n(w)) prior(w) dw, and
(Watanabe 2009, 2013) F(beta) = beta n L_n(w0) + lambda log(n beta) - (m - 1) log log(n beta)
+ O_p(1),

    E_beta[n L_n] ≈ n L_n(w0) + lambda / beta - (m - 1) / (beta log(n beta)).

Two estimators of lambda from draws at beta_j = c_j / log n:

* Watanabe's two-temperature estimator (WBIC paper, §5), from the smallest and largest beta:
  lambda_2T = (E_{beta_1}[n L_n] - E_{beta_2}[n L_n]) / (1/beta_1 - 1/beta_2). It ignores the
  multiplicity term, so it is biased low by about (m - 1) / log(n beta) when m > 1 (for the
  product model at n = 1000, truth ab = 0: 0.33 instead of 1/2 even with exact expectations).
* A weighted least-squares regression of E_beta[n L_n] on (1, 1/beta, -1/(beta log(n beta)))
  (the default, `fit_multiplicity=True`), whose coefficients are n L_n(w0), lambda and m - 1;
  or on (1, 1/beta) only. Weights are 1 / se_j^2; the coefficient covariance is
  (X^T W X)^{-1}, inflated by the reduced chi-square when that exceeds 1.

Beside BIC's n L_n(ŵ) + (d/2) log n the result reports the singular-aware n L_n(ŵ) + lambda_hat
log n.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd

from slt.estimators.wbic import WBICResult, summarise_draws, tempered_draws
from slt.fit import FitResult
from slt.problem import Problem
from slt.results import Persistable
from slt.validation import require_int, require_key, require_positive, require_problem

__all__ = ["RLCTResult", "rlct", "DEFAULT_MULTIPLIERS"]

# beta_j = c_j / log n. Spanning a factor 16 around Watanabe's beta = 1 / log n separates the
# 1/beta and 1/(beta log(n beta)) terms: with exact expectations the three-term fit recovers
# lambda = 1/2 on the product model at n = 1000 within 0.07, the two-term fit gives 0.33.
DEFAULT_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class RLCTResult(Persistable):
    """lambda_hat from temperatures, with standard errors, and the singular-aware free energy.

    Attributes:
      rlct: lambda_hat from the regression over beta; std_error its standard error.
      multiplicity, multiplicity_se: m_hat = 1 + the fitted coefficient of
        -1/(beta log(n beta)), NaN without `fit_multiplicity`.
      two_temperature, two_temperature_se: Watanabe's two-temperature estimate.
      betas, expected_nll, expected_nll_se: E_beta[n L_n] and its standard error per beta.
      n: examples; num_params: d.
      nll_hat: n L_n(ŵ) at the fit (NaN without a fit).
      singular_bic: n L_n(ŵ) + lambda_hat log n (NaN without a fit); singular_bic_se.
      bic: n L_n(ŵ) + (d/2) log n (NaN without a fit).
      coefficients: the regression's (n L_n(w0), lambda[, m - 1]).
      wbic_results: the `WBICResult` at each beta (one per temperature).
    """

    rlct: float
    std_error: float
    multiplicity: float
    multiplicity_se: float
    two_temperature: float
    two_temperature_se: float
    betas: np.ndarray = field(repr=False)
    expected_nll: np.ndarray = field(repr=False)
    expected_nll_se: np.ndarray = field(repr=False)
    n: int
    num_params: int
    nll_hat: float
    singular_bic: float
    singular_bic_se: float
    bic: float
    coefficients: np.ndarray = field(repr=False)
    wbic_results: tuple[WBICResult, ...] = field(repr=False)

    def fitted(self, betas) -> np.ndarray:
        """The regression's E_beta[n L_n] at `betas`."""
        betas = np.asarray(betas, np.float64)
        return _design(betas, self.n, self.coefficients.size == 3) @ self.coefficients

    def wbic(self) -> WBICResult | None:
        """The run at beta = 1 / log n, if that was one of the temperatures."""
        target = 1.0 / np.log(self.n)
        for result in self.wbic_results:
            if np.isclose(result.beta, target, rtol=1e-12):
                return result
        return None

    def summary(self) -> pd.DataFrame:
        """One row per temperature: beta, E_beta[n L_n] ± se, R-hat, ESS, divergences."""
        rows = [{
            "beta": r.beta, "beta_log_n": r.beta * np.log(self.n), "expected_nll": r.wbic,
            "se": r.std_error, "rhat": r.rhat, "ess": r.ess, "divergences": r.num_divergences,
        } for r in self.wbic_results]
        return pd.DataFrame(rows)

    def plot(self, **kwargs):
        """E_beta[n L_n] against 1/beta with error bars and the fitted curve."""
        from slt.plots.evidence import plot_rlct

        return plot_rlct(self, **kwargs)

    def __repr__(self) -> str:
        m = "" if np.isnan(self.multiplicity) else (
            f", m={self.multiplicity:.2f} ± {self.multiplicity_se:.2g}")
        extra = "" if np.isnan(self.singular_bic) else (
            f"; n L_n(ŵ) + λ log n = {self.singular_bic:.6g} (BIC {self.bic:.6g})")
        return (
            f"RLCTResult(λ={self.rlct:.4g} ± {self.std_error:.2g}{m}; two-temperature "
            f"{self.two_temperature:.4g} ± {self.two_temperature_se:.2g}; "
            f"{len(self.wbic_results)} temperatures{extra})"
        )


def rlct(
    problem: Problem,
    key: jax.Array,
    *,
    fit: FitResult | None = None,
    multipliers=DEFAULT_MULTIPLIERS,
    betas=None,
    fit_multiplicity: bool = True,
    sampler: str = "nuts",
    num_chains: int = 4,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    progress: bool = True,
    **sampler_options,
) -> RLCTResult:
    """lambda_hat from E_beta[n L_n] at several inverse temperatures, with standard errors.

    All temperatures run side by side: `num_chains` chains per beta in one sampler call.

    Args:
      problem: model and data with a proper prior, n >= 3.
      key: PRNG key.
      fit: a fit (MLE or MAP) for n L_n(ŵ), the singular-aware estimate and BIC; optional.
      multipliers: c_j with beta_j = c_j / log n (ignored when `betas` is given).
      betas: explicit inverse temperatures, each with n beta > e (log(n beta) > 1).
      fit_multiplicity: include the -(m - 1)/(beta log(n beta)) term (needs >= 3 betas).
      sampler, num_chains, num_warmup, num_samples, progress, **sampler_options: as in
        `slt.wbic`.

    Returns:
      An `RLCTResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problem, key or num_chains invalid, a beta
        (or multiplier) not finite and > 0, and what `slt.wbic`'s sampler rejects.
      ValueError: n < 3, fewer than 2 distinct betas (3 with `fit_multiplicity`), n beta <= e
        (n too small for the temperatures: give larger betas).

    Example:
      >>> result = slt.rlct(problem, jax.random.key(0), fit=slt.fit_map(problem, key))
      >>> result.rlct, result.std_error, result.singular_bic

    References:
      Watanabe, JMLR 14:867–897, 2013 (the two-temperature estimator).
    """
    require_problem(problem)
    require_key(key)
    require_int("num_chains", num_chains, minimum=1)
    n = problem.n
    if n < 3:
        raise ValueError(f"rlct needs n >= 3, got n = {n}")
    given = np.asarray(multipliers if betas is None else betas, np.float64).reshape(-1)
    for value in given:
        require_positive("every multiplier" if betas is None else "every beta", value)
    betas = np.unique(given / np.log(n) if betas is None else given)
    needed = 3 if fit_multiplicity else 2
    if betas.size < needed:
        raise ValueError(f"give at least {needed} distinct betas, got {betas.tolist()}")
    if not np.all(np.log(n * betas) > 1.0):
        raise ValueError(
            f"every beta must have n beta > e (log(n beta) > 1), got {betas} with n = {n}: "
            f"give larger betas (or more data)"
        )
    draws = tempered_draws(
        problem, key, np.repeat(betas, int(num_chains)), sampler=sampler,
        num_warmup=num_warmup, num_samples=num_samples, progress=progress, **sampler_options,
    )
    results = tuple(
        summarise_draws(problem, draws.select(draws.betas == beta), sampler=sampler)
        for beta in betas
    )
    means = np.array([r.wbic for r in results])
    errors = np.array([r.std_error for r in results])
    coefficients, covariance = _regression(betas, means, errors, n, fit_multiplicity)
    span = 1.0 / betas[0] - 1.0 / betas[-1]
    two_temperature = (means[0] - means[-1]) / span
    two_temperature_se = float(np.hypot(errors[0], errors[-1]) / span)
    lam, lam_se = float(coefficients[1]), float(np.sqrt(covariance[1, 1]))
    if fit_multiplicity:
        multiplicity = 1.0 + float(coefficients[2])
        multiplicity_se = float(np.sqrt(covariance[2, 2]))
    else:
        multiplicity = multiplicity_se = float("nan")
    nll_hat = float("nan") if fit is None else -float(fit.loglik)
    log_n = float(np.log(n))
    if lam < 0 or lam > problem.dim / 2 + 4 * lam_se:
        warnings.warn(
            f"lambda_hat = {lam:.3g} lies outside [0, d/2 = {problem.dim / 2}]: the temperatures "
            f"or the draws are inadequate", stacklevel=2,
        )
    return RLCTResult(
        rlct=lam, std_error=lam_se, multiplicity=multiplicity, multiplicity_se=multiplicity_se,
        two_temperature=float(two_temperature), two_temperature_se=two_temperature_se,
        betas=betas, expected_nll=means, expected_nll_se=errors, n=n, num_params=problem.dim,
        nll_hat=nll_hat, singular_bic=nll_hat + lam * log_n, singular_bic_se=lam_se * log_n,
        bic=nll_hat + 0.5 * problem.dim * log_n, coefficients=coefficients, wbic_results=results,
    )


def _design(betas, n, fit_multiplicity):
    """Columns 1, 1/beta and, with the multiplicity term, -1/(beta log(n beta))."""
    columns = [np.ones_like(betas), 1.0 / betas]
    if fit_multiplicity:
        columns.append(-1.0 / (betas * np.log(n * betas)))
    return np.stack(columns, axis=1)


def _regression(betas, means, errors, n, fit_multiplicity):
    """Weighted least squares of E_beta[n L_n] on the design; coefficients and covariance."""
    design = _design(np.asarray(betas, np.float64), n, fit_multiplicity)
    weights = 1.0 / np.maximum(np.asarray(errors, np.float64), 1e-12) ** 2
    normal = design.T @ (weights[:, None] * design)
    covariance = np.linalg.inv(normal)
    coefficients = covariance @ (design.T @ (weights * means))
    dof = len(betas) - design.shape[1]
    if dof > 0:
        chi2 = float(np.sum(weights * (means - design @ coefficients) ** 2))
        covariance = covariance * max(1.0, chi2 / dof)
    return coefficients, covariance
