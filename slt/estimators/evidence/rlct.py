"""The learning coefficient lambda from E_beta[n L_n] at several inverse temperatures.

Since d/dbeta F(beta) = E_beta[n L_n] for F(beta) = -log ∫ exp(-beta n L_n(w)) prior(w) dw, and
(Watanabe 2009, 2013) F(beta) = beta n L_n(w0) + lambda log(n beta) - (m - 1) log log(n beta)
+ O_p(1),

    E_beta[n L_n] ≈ n L_n(w0) + lambda / beta - (m - 1) / (beta log(n beta)).

The expectations come, by default, from one adaptive tempered SMC run whose ladder passes
through every beta_j = c_j / log n (`sampler=Tempering(...)`: chains are its independent
copies, draws its particles), or from NUTS chains per temperature (`sampler=NUTS(...)`).

**The fit.** The terms 1/beta and 1/(beta log(n beta)) are nearly collinear over any practical
window (log(n beta) changes by a factor of about 2 across c = 0.25 … 4), so a free coefficient
for m - 1 is ill-determined: it came out as m = -4.65 ± 1.4 on a regular mixture. The
multiplicity is therefore an integer, m ∈ {1, …, `max_multiplicity`}; for each m and each
window of consecutive temperatures (at least three) the known term is subtracted and
(n L_n(w0), lambda) fitted by weighted least squares (weights 1/se_j²). Its standard error is
the larger of (a) the least-squares one, inflated by the reduced chi-square when that exceeds
1 (a misfit of the design), and (b) the spread of lambda fitted to each chain (copy) alone over
sqrt(chains), which carries the correlation between temperatures that share particles. In
each window the multiplicities whose chi-square lies within 4 of that window's best (about two
standard deviations) form `multiplicity_interval`, and the smallest of them is the window's m:
a larger m must fit significantly better to be chosen. Choosing m by the smallest standard
error instead (which differs between m only through the chi-square inflation) picked m = 3 and
lambda = 1.74 ± 0.03 for a regular d = 2 regression (exact 1, m = 1) on one of 15 keys; this
rule gives 1.00 ± 0.03 and m = 1 there. (It does not cure all: on another key both rules chose
m = 2 for d = 2 and d = 3, lambda 1.33 and 1.89; the errors at different temperatures are
correlated, which the chi-square ignores.) Of the windows, the one whose fit has the smallest
standard error is reported (ties going to the wider window): the estimate's variance chooses
the window.

Watanabe's two-temperature estimator (WBIC paper, §5) is reported beside it:
lambda_2T = (E_{beta_1}[n L_n] - E_{beta_2}[n L_n]) / (1/beta_1 - 1/beta_2) over the smallest
and largest beta; it ignores the multiplicity term, so it is biased low by about
(m - 1) / log(n beta) when m > 1.

**Two temperatures alone** (`rlct_two_temperatures`: `slt.compare`'s fast path, whose NUTS
chains at beta = 1 (for F and LOO) and at 1/log n (for WBIC) run anyway). There lambda_hat is
lambda_2T between beta_0 = 1/log n and 1, with m_hat = 1 and the standard error
hypot(se_0, se_1) / (log n - 1) from each temperature's ESS. Measured against exact answers
(benchmarks/RESULTS.md, "λ̂ from two temperatures"; `benchmarks.rlct_fast_designs`), it is as
accurate as the five-temperature fit on every case and steadier: conjugate regression d = 2,
3, 5 at n = 42 and 1000 (its value with exact E_beta[n L_n] within 0.02 and one se, on average
over keys, where the fit's m_hat jumps between 1 and 2 across keys, spreading it by up to
0.34),
Old Faithful K = 2 (2.71 ± 0.035 against the fit's 2.71 ± 0.05, lambda = 2.5: the same bias)
and the product model (lambda = 1/2, m = 2, n = 1000: 0.35 against 0.42, the fit's m_hat 2, 1,
1 over three keys). The multiplicity it cannot see: where m > 1 it reads about
lambda - (m - 1)/log(n beta) (the product model's 0.35 for 1/2), and its singular BIC has no
-(m - 1) log log n term. The local slope at 1/log n alone (one temperature)
is noisier and biased high on the regular mixture (2.93), and is not used.

Beside BIC's n L_n(ŵ) + (d/2) log n the result reports the singular-aware estimate of F,
n L_n(ŵ) + lambda_hat log n - (m_hat - 1) log log n.

**The local slope, and why lambda_hat comes out high on a regular mixture.** Exactly, for any
model, d/dbeta E_beta[n L_n] = -Var_beta[n L_n], so beta^2 Var_beta[n L_n] is the slope of
E_beta[n L_n] against 1/beta at that temperature (`local_slopes`; the `summary()` column
"local_slope"): where the asymptotic form a + lambda / beta holds it equals lambda at every
temperature. The multiplicity term makes it rise with beta (lambda - (m - 1)(1/L + 1/L^2),
L = log(n beta)); a prior that still pulls at the hot end does too (conjugate regression,
d = 3, n = 42, prior N(0, I/2): 1.28 at n beta = 3 to 1.49 at beta = 1, exactly). What makes
it *fall* is the next term of the regular expansion, E_beta[n L_n] = a + lambda / beta +
c / (n beta^2) + ..., with c > 0 for scale parameters (a normal's (mu, sigma) at n' = n beta
effective observations: c = 11/12 exactly, so the local slope is 1 + (11/6) / (n beta) for
lambda = 1); in a mixture each component sees only n pi_k beta of them. Measured on Old
Faithful K = 2 (regular, lambda = d/2 = 2.5; benchmarks/RESULTS.md, `benchmarks.rlct_regular_bias`):
the local slope falls from 6.5 at c = 0.25 (14% of the draws in poorly fitting regions: a
weight below 0.1 or both means together) through 2.80 at c = 1 to 2.60 at c = 4, so every
two-term fit over the window is high (2.64–2.78); a fit with the c / beta^2 term over
c = 1…4 gives 2.51 ± 0.07. When the local slope falls significantly across the chosen window
(`SLOPE_TREND_SE` standard errors and `SLOPE_TREND_RELATIVE` of lambda_hat), a warning says
so: lambda_hat is then biased high, and the coldest local slope is the closer bound.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from itertools import product

import arviz as az
import jax
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.evidence.wbic import (
    DEFAULT_SAMPLER,
    Sampler,
    TemperedDraws,
    WBICResult,
    require_sampler,
    summarise_draws,
    tempered_draws,
)
from slt.fit import FitResult
from slt.problem import Problem, require_problem
from slt.results import Persistable
from slt.validation import (
    InputError,
    require_float_array,
    require_int,
    require_key,
    require_positive,
)

__all__ = [
    "RLCTResult", "rlct", "rlct_from_draws", "rlct_two_temperatures", "inverse_temperatures",
    "temperatures",
    "DEFAULT_MULTIPLIERS", "MAX_MULTIPLICITY",
]

# beta_j = c_j / log n. Spanning a factor 16 around Watanabe's beta = 1 / log n separates the
# 1/beta and 1/(beta log(n beta)) terms as far as they can be separated at practical n.
DEFAULT_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0)
# The default window must lie in MIN_N_BETA / n <= beta <= 1: beta = 1 is the posterior (the
# tempered path ends there), and the expansion needs log(n beta) > 1 (n beta = 3: log 1.1).
# Below n = 55 the default multipliers leave that range (4 / log 42 = 1.07; 0.25 n / log n < 3
# below n = 45), and the window is mapped into it (`inverse_temperatures`).
MIN_N_BETA = 3.0
# The largest multiplicity m the fit considers by default (`rlct`, `rlct_from_draws`,
# `ComparisonPlan`): m = 1 is the plain two-term fit of a regular model; a larger m must fit
# significantly better to be chosen (module doc: the fit).
MAX_MULTIPLICITY = 3
# A standard error above this fraction of lambda_hat earns a warning.
RELATIVE_SE_WARNING = 0.25
# lambda_hat is reported outside [0, d/2] when it lies beyond either end by more than this many
# standard errors: a regular model (lambda = d/2 exactly) would otherwise be flagged for half
# of all keys.
RANGE_WARNING_SE = 2.0
# Multiplicities whose chi-square is within this of the best one are consistent with the data
# (a difference of 4 is two standard deviations of one extra degree of freedom).
MULTIPLICITY_CHI2 = 4.0
# A fall of the local slope beta^2 Var_beta[n L_n] from the hottest to the coldest temperature
# of the chosen window earns a warning when it exceeds this many standard errors (of the
# difference, from the chains' spread) and this fraction of lambda_hat (module doc).
SLOPE_TREND_SE = 4.0
SLOPE_TREND_RELATIVE = 0.05


@dataclass(frozen=True)
class RLCTResult(Persistable):
    """lambda_hat from temperatures, with standard errors, and the singular-aware free energy.

    Attributes:
      rlct: lambda_hat from the chosen fit; std_error its standard error (module doc).
      multiplicity: m_hat, an integer >= 1; multiplicity_interval: (lowest, highest) m whose
        fit is within `MULTIPLICITY_CHI2` of the best.
      window: (beta_low, beta_high) of the chosen fit.
      two_temperature, two_temperature_std_error: Watanabe's two-temperature estimate.
      betas, expected_nll, expected_nll_std_error: E_beta[n L_n] and its standard error per
        beta.
      n: examples; dim: d; sampler: where the expectations came from.
      nll_hat: n L_n(ŵ) at the fit (NaN without a fit).
      singular_bic: n L_n(ŵ) + lambda_hat log n - (m_hat - 1) log log n (NaN without a fit);
        singular_bic_std_error = std_error log n.
      bic: n L_n(ŵ) + (d/2) log n (NaN without a fit).
      coefficients: the chosen fit's (n L_n(w0), lambda).
      wbic_results: the `WBICResult` at each beta (one per temperature).
      warnings: plain-language diagnostics (also issued as Python warnings).
      method: "fit" (the fit over three or more temperatures, `rlct_from_draws`) or
        "two_temperature" (lambda_hat = lambda_2T between two temperatures, m_hat = 1,
        `rlct_two_temperatures`).
    """

    rlct: float
    std_error: float
    multiplicity: int
    multiplicity_interval: tuple[int, int]
    window: tuple[float, float]
    two_temperature: float
    two_temperature_std_error: float
    betas: np.ndarray = field(repr=False)
    expected_nll: np.ndarray = field(repr=False)
    expected_nll_std_error: np.ndarray = field(repr=False)
    n: int
    dim: int
    sampler: str
    nll_hat: float
    singular_bic: float
    singular_bic_std_error: float
    bic: float
    coefficients: np.ndarray = field(repr=False)
    wbic_results: tuple[WBICResult, ...] = field(repr=False)
    warnings: tuple[str, ...] = ()
    method: str = "fit"

    def fitted(self, betas) -> np.ndarray:
        """The chosen fit's E_beta[n L_n] at `betas`."""
        betas = np.asarray(betas, np.float64)
        return _design(betas) @ self.coefficients + _offset(betas, self.n, self.multiplicity)

    def wbic(self) -> WBICResult | None:
        """The run at beta = 1 / log n, if that was one of the temperatures."""
        target = 1.0 / np.log(self.n)
        for result in self.wbic_results:
            if np.isclose(result.beta, target, rtol=1e-6):
                return result
        return None

    def summary(self) -> pd.DataFrame:
        """One row per temperature: beta, E_beta[n L_n] ± se, the local slope beta^2
        Var_beta[n L_n] ± se (module doc), R-hat, ESS, divergences."""
        slopes, slope_errors = local_slopes(self.wbic_results)
        rows = [{
            "beta": r.beta, "beta_log_n": r.beta * np.log(self.n), "expected_nll": r.wbic,
            "se": r.std_error, "local_slope": slope, "local_slope_se": slope_se,
            "rhat": r.rhat, "ess": r.ess, "divergences": r.num_divergences,
        } for r, slope, slope_se in zip(self.wbic_results, slopes, slope_errors, strict=True)]
        return pd.DataFrame(rows)

    def to_xarray(self) -> xr.Dataset:
        """The temperatures and the fit as an xarray Dataset.

        Returns:
          Over dim ``beta`` (coordinate: the inverse temperatures, ascending): expected_nll
          (E_beta[n L_n], nats), expected_nll_std_error, fitted (the chosen fit's
          E_beta[n L_n]), and each temperature's rhat, ess and num_divergences; attrs rlct,
          std_error, multiplicity, multiplicity_interval, window (beta_low, beta_high),
          two_temperature, two_temperature_std_error, nll_hat, singular_bic,
          singular_bic_std_error, bic (nats), n, dim and sampler.
        """
        return xr.Dataset(
            {
                "expected_nll": (("beta",), self.expected_nll),
                "expected_nll_std_error": (("beta",), self.expected_nll_std_error),
                "fitted": (("beta",), self.fitted(self.betas)),
                "rhat": (("beta",), [r.rhat for r in self.wbic_results]),
                "ess": (("beta",), [r.ess for r in self.wbic_results]),
                "num_divergences": (("beta",), [r.num_divergences for r in self.wbic_results]),
            },
            coords={"beta": self.betas},
            attrs={
                "rlct": self.rlct, "std_error": self.std_error, "multiplicity": self.multiplicity,
                "multiplicity_interval": self.multiplicity_interval, "window": self.window,
                "two_temperature": self.two_temperature,
                "two_temperature_std_error": self.two_temperature_std_error,
                "nll_hat": self.nll_hat, "singular_bic": self.singular_bic,
                "singular_bic_std_error": self.singular_bic_std_error,
                "bic": self.bic, "n": self.n, "dim": self.dim,
                "sampler": self.sampler,
            },
        )

    def to_inference_data(self) -> az.InferenceData:
        """The draws of every temperature as one ArviZ InferenceData.

        Each group of the temperatures' `WBICResult.inference_data` ("sample_stats": n L_n and
        the sampler's diagnostics; "posterior": the constrained site values, where the sampler
        kept positions, as NUTS does and the SMC path's waypoints do not) is stacked along a
        dim ``beta`` (coordinate: the inverse temperatures, ascending), which replaces the
        per-draw "beta" of sample_stats. The dim comes after (chain, draw), so ArviZ's
        diagnostics (``az.summary``, ``az.rhat``, ...) treat it as a dimension of each variable
        and report every temperature separately.

        Example:
          >>> smc = slt.Tempering(num_particles=100)
          >>> result = slt.rlct(problem, key, sampler=smc, progress=False)
          >>> nll = result.to_inference_data().sample_stats["nll"]
          >>> dict(nll.sizes)
          {'chain': 4, 'draw': 100, 'beta': 5}
          >>> nll.mean(("chain", "draw")).values.round(1)   # E_beta[n L_n], falling in beta
          array([154.9, 144.7, 140.7, 138.5, 137.3])
        """
        temperatures = pd.Index(self.betas, name="beta")
        return az.InferenceData(**{
            group: xr.concat(
                [r.inference_data[group].drop_vars("beta", errors="ignore")
                 for r in self.wbic_results],
                dim=temperatures,
            ).transpose("chain", "draw", "beta", ...)
            for group in self.wbic_results[0].inference_data.groups()
        })

    def plot(self, **kwargs):
        """E_beta[n L_n] against 1/beta with error bars and the fitted curve."""
        from slt.plots.evidence import plot_rlct

        return plot_rlct(self, **kwargs)

    def __repr__(self) -> str:
        low, high = self.multiplicity_interval
        interval = "" if low == high else f" (consistent: {low}…{high})"
        extra = "" if np.isnan(self.singular_bic) else (
            f"; singular BIC {self.singular_bic:.6g} (BIC {self.bic:.6g})")
        if self.method == "two_temperature":
            return (f"RLCTResult(λ={self.rlct:.4g} ± {self.std_error:.2g} from two "
                    f"temperatures (β = {self.window[0]:.4g}, {self.window[1]:.4g}) by "
                    f"{self.sampler}, m=1 assumed{extra})")
        return (
            f"RLCTResult(λ={self.rlct:.4g} ± {self.std_error:.2g}, m={self.multiplicity}"
            f"{interval}; two-temperature {self.two_temperature:.4g} ± "
            f"{self.two_temperature_std_error:.2g}; {len(self.wbic_results)} temperatures by "
            f"{self.sampler}{extra})"
        )


def rlct(
    problem: Problem,
    key: jax.Array,
    *,
    fit: FitResult | None = None,
    multipliers=None,
    betas=None,
    max_multiplicity: int = MAX_MULTIPLICITY,
    sampler: Sampler = DEFAULT_SAMPLER,
    progress: bool = True,
) -> RLCTResult:
    """lambda_hat from E_beta[n L_n] at several inverse temperatures, with standard errors.

    All temperatures come from one sampler call: one SMC run through all of them (the
    default), or the sampler's chains at every beta side by side (NUTS, SGLD).

    Args:
      problem: model and data with a proper prior, n >= 3.
      key: PRNG key.
      fit: a fit (MLE or MAP) for n L_n(ŵ), the singular-aware estimate and BIC; optional.
      multipliers: c_j with beta_j = c_j / log n (ignored when `betas` is given); None (with
        `betas` None): `DEFAULT_MULTIPLIERS`, mapped into 3 / n <= beta <= 1 at n < 55
        (`inverse_temperatures`), so that the defaults run at every n >= 4.
      betas: explicit inverse temperatures, each with n beta > e (log(n beta) > 1).
      max_multiplicity: the largest m considered (1: the plain two-term fit).
      sampler: a `Tempering` value (the default, `slt.estimators.evidence.wbic.DEFAULT_SAMPLER`: one
        tempered SMC run, its copies the chains and its particles the draws), `NUTS` or
        `TemperedSGLD` (their chains at every beta), as in `slt.wbic`.
      progress: show a progress bar.

    Returns:
      An `RLCTResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problem, key, sampler or
        max_multiplicity invalid, a beta (or multiplier) not finite and > 0, and what the
        sampler rejects (the tempered path reaches beta <= 1 only: multipliers c_j given
        up to 4 need n >= 55).
      ValueError: n < 3, fewer than 3 distinct betas, n beta <= e (n too small for the
        temperatures: give larger betas).

    Example:
      >>> fit = slt.fit_map(problem, key)
      >>> smc = slt.Tempering(num_particles=100)
      >>> result = slt.rlct(problem, key, fit=fit, sampler=smc, progress=False)
      >>> round(result.rlct, 1), result.multiplicity          # regular: lambda = d/2 = 1, m = 1
      (1.0, 1)
      >>> round(float(result.singular_bic), 1)   # n L_n(w_hat) + lambda log n - (m - 1) log log n
      140.8

    References:
      Watanabe, JMLR 14:867–897, 2013 (the two-temperature estimator).
    """
    require_problem(problem)
    require_key(key)
    require_sampler(sampler)
    betas = inverse_temperatures(problem.n, multipliers, betas)
    draws = tempered_draws(problem, key, betas, sampler, progress=progress)
    result = rlct_from_draws(problem, draws, sampler=sampler.name, fit=fit,
                             max_multiplicity=max_multiplicity)
    for message in result.warnings:
        warnings.warn(message, stacklevel=2)
    return result


def inverse_temperatures(n: int, multipliers=None, betas=None) -> np.ndarray:
    """The distinct inverse temperatures beta_j = c_j / log n (or the given `betas`),
    ascending, checked.

    The default (`multipliers` and `betas` None) is c_j = `DEFAULT_MULTIPLIERS`, a factor 16
    around Watanabe's 1 / log n, where that window lies in MIN_N_BETA / n <= beta <= 1 (n >=
    55). At smaller n it does not (4 / log 42 = 1.07 is past the posterior, which ends the
    tempered path; below n = 45 the hottest has n beta < 3), and the window is mapped into that
    range, log beta_j affinely, keeping the number and the relative spacing of the
    temperatures: at n = 42, beta from 0.071 to 1 instead of 0.067 to 1.07. The range comes from
    n alone; at such n the prior still weighs on the hot end (benchmarks/RESULTS.md, "lambda_hat
    at small n and on a regular mixture").

    Example:
      >>> inverse_temperatures(100, (0.5, 1.0, 2.0)).round(4)
      array([0.1086, 0.2171, 0.4343])
      >>> inverse_temperatures(42).round(3)       # the default window, mapped into (3/n, 1]
      array([0.071, 0.138, 0.267, 0.517, 1.   ])

    Raises:
      InputError: a beta or multiplier not a finite number > 0, or fewer than 3 distinct
        betas.
      ValueError: n < 4 for the default window (n < 3 for given ones), or n beta <= e for some
        beta.
    """
    if n < 3:
        raise ValueError(f"rlct needs n >= 3, got n = {n}")
    if multipliers is None and betas is None:
        return _default_window(n)
    multipliers = DEFAULT_MULTIPLIERS if multipliers is None else multipliers
    name = "multipliers" if betas is None else "betas"
    given = require_float_array(name, multipliers if betas is None else betas).reshape(-1)
    for value in given:
        require_positive(f"every entry of {name}", value)
    betas = np.unique(given / np.log(n) if betas is None else given)
    if betas.size < 3:
        raise InputError(f"{name} must give at least 3 distinct inverse temperatures, got "
                         f"betas {betas.tolist()}")
    if not np.all(np.log(n * betas) > 1.0):
        raise ValueError(
            f"every beta must have n beta > e (log(n beta) > 1), got {betas} with n = {n}: "
            f"give larger betas (or more data)"
        )
    return betas


def _default_window(n: int) -> np.ndarray:
    """`DEFAULT_MULTIPLIERS` / log n, mapped into [MIN_N_BETA / n, 1] (`inverse_temperatures`)."""
    logs = np.log(np.asarray(DEFAULT_MULTIPLIERS, np.float64) / np.log(n))
    low, high = max(logs[0], np.log(MIN_N_BETA / n)), min(logs[-1], 0.0)
    if not low < high:
        raise ValueError(f"the default temperatures need n > {MIN_N_BETA:g} (n beta >= "
                         f"{MIN_N_BETA:g} with beta <= 1), got n = {n}: give betas")
    if (low, high) != (logs[0], logs[-1]):
        logs = low + (logs - logs[0]) * (high - low) / (logs[-1] - logs[0])
    return np.clip(np.exp(logs), MIN_N_BETA / n, 1.0)  # exp(log 1) may round above 1


def temperatures(n: int, multipliers=DEFAULT_MULTIPLIERS, betas=None) -> np.ndarray:
    """Deprecated: the old name of `inverse_temperatures` (what it returns are inverse
    temperatures beta); it will be removed in the next release."""
    warnings.warn("slt.estimators.evidence.rlct.temperatures is deprecated: use "
                  "inverse_temperatures", DeprecationWarning, stacklevel=2)
    return inverse_temperatures(n, multipliers, betas)


def rlct_from_draws(
    problem: Problem, draws: TemperedDraws, *, sampler: str, fit: FitResult | None = None,
    max_multiplicity: int = MAX_MULTIPLICITY,
) -> RLCTResult:
    """An `RLCTResult` from draws at three or more temperatures, the same number of chains at
    each (module doc: the fit). Warnings are returned in the result, not issued."""
    require_int("max_multiplicity", max_multiplicity, minimum=1)
    betas, results = _per_temperature(problem, draws, sampler)
    means = np.array([r.wbic for r in results])
    errors = np.array([r.std_error for r in results])
    per_chain = np.stack([r.per_chain for r in results], axis=1)  # (chain, beta)
    best = _best_fit(betas, means, errors, per_chain, problem.n, int(max_multiplicity))
    lam = best["rlct"]
    falling = slope_warning(betas, results, best["window"], lam)
    return _result(problem, results, fit, sampler, lam=lam, std_error=best["std_error"],
                   multiplicity=best["multiplicity"],
                   multiplicity_interval=best["multiplicity_interval"], window=best["window"],
                   coefficients=best["coefficients"], method="fit",
                   messages=[falling] if falling else [])


def rlct_two_temperatures(
    problem: Problem, draws: TemperedDraws, *, sampler: str, fit: FitResult | None = None,
) -> RLCTResult:
    """lambda_hat from draws at exactly two inverse temperatures beta_0 < beta_1: Watanabe's
    two-temperature estimator, the multiplicity taken as 1 (module doc, "Two temperatures
    alone"; `slt.compare`'s fast path with beta_0 = 1/log n, beta_1 = 1).

    With E_j = E_{beta_j}[n L_n] and the expansion E_beta = n L_n(w0) + lambda / beta + ...,

        lambda_hat = (E_0 - E_1) / (1/beta_0 - 1/beta_1),
        se = hypot(se_0, se_1) / (1/beta_0 - 1/beta_1),

    se_j = sd / sqrt(ESS) of each temperature's n L_n draws (`summarise_draws`; independent
    chains at the two temperatures). Exactly, E_0 - E_1 = ∫ beta^2 Var_beta[n L_n] d(1/beta)
    over 1/beta_1 … 1/beta_0, so lambda_hat is the local slope averaged over the interval,
    steadier than the local slope at either end. `coefficients` are the line through
    both points, so `fitted` and the plot draw it.

    Args:
      problem: the model the draws are of.
      draws: chains at two distinct inverse temperatures (`tempered_draws`).
      sampler: the sampler's name, for the result.
      fit: a fit (MAP or MLE) for the singular BIC n L_n(ŵ) + lambda_hat log n; optional.

    Returns:
      An `RLCTResult` with method "two_temperature", multiplicity 1; warnings are returned in
      it, not issued.

    Raises:
      InputError: the draws are not at exactly two distinct inverse temperatures.

    Example:
      >>> from slt.estimators.evidence.wbic import tempered_draws
      >>> nuts = slt.NUTS(num_warmup=100, num_samples=100)
      >>> draws = tempered_draws(problem, key, [1 / np.log(problem.n), 1.0], nuts,
      ...                        progress=False)
      >>> result = rlct_two_temperatures(problem, draws, sampler="nuts")
      >>> print(f"{result.rlct:.2f} ± {result.std_error:.2f}")   # regular: lambda = d/2 = 1
      1.07 ± 0.10
    """
    betas, results = _per_temperature(problem, draws, sampler)
    if betas.size != 2:
        raise InputError(f"rlct_two_temperatures needs draws at exactly two inverse "
                         f"temperatures, got {betas.size}: {betas.tolist()}")
    lam, std_error = _two_temperature(results)
    intercept = results[1].wbic - lam / betas[1]
    return _result(problem, results, fit, sampler, lam=lam, std_error=std_error,
                   multiplicity=1, multiplicity_interval=(1, 1),
                   window=(float(betas[0]), float(betas[1])),
                   coefficients=np.array([intercept, lam]), method="two_temperature",
                   messages=[])


def _per_temperature(problem: Problem, draws: TemperedDraws, sampler: str):
    """(the distinct betas ascending, a `WBICResult` per beta without issued warnings)."""
    betas = np.unique(draws.betas)
    return betas, tuple(
        summarise_draws(problem, draws.select(draws.betas == beta), sampler=sampler, warn=False)
        for beta in betas
    )


def _two_temperature(results) -> tuple[float, float]:
    """Watanabe's lambda_2T and its standard error between the outermost temperatures of
    `results` (one `WBICResult` per beta, ascending): (E_0 - E_1) / (1/beta_0 - 1/beta_1),
    hypot(se_0, se_1) over the same span (module doc)."""
    first, last = results[0], results[-1]
    span = 1.0 / first.beta - 1.0 / last.beta
    return (float((first.wbic - last.wbic) / span),
            float(np.hypot(first.std_error, last.std_error) / span))


def _result(problem, results, fit, sampler, *, lam, std_error, multiplicity,
            multiplicity_interval, window, coefficients, method, messages) -> RLCTResult:
    """The `RLCTResult` of an estimate: Watanabe's two-temperature column over the outermost
    temperatures, the singular BIC, and the warnings (the temperatures', range, se)."""
    betas = np.array([r.beta for r in results])
    two_temperature, two_temperature_std_error = _two_temperature(results)
    nll_hat = float("nan") if fit is None else -float(fit.loglik)
    log_n = float(np.log(problem.n))
    outside = range_warning(lam, std_error, problem.dim)
    messages = ([message for r in results for message in r.warnings]
                + ([outside] if outside else []) + list(messages))
    if std_error > RELATIVE_SE_WARNING * abs(lam):
        messages.append(
            f"the standard error of lambda_hat ({std_error:.2g}) exceeds "
            f"{RELATIVE_SE_WARNING:.0%} of lambda_hat = {lam:.3g}: it cannot tell models apart"
        )
    return RLCTResult(
        rlct=lam, std_error=std_error, multiplicity=multiplicity,
        multiplicity_interval=multiplicity_interval, window=window,
        two_temperature=two_temperature, two_temperature_std_error=two_temperature_std_error,
        betas=betas, expected_nll=np.array([r.wbic for r in results]),
        expected_nll_std_error=np.array([r.std_error for r in results]), n=problem.n,
        dim=problem.dim, sampler=sampler, nll_hat=nll_hat,
        singular_bic=nll_hat + lam * log_n - (multiplicity - 1) * np.log(log_n),
        singular_bic_std_error=std_error * log_n, bic=nll_hat + 0.5 * problem.dim * log_n,
        coefficients=np.asarray(coefficients), wbic_results=results, warnings=tuple(messages),
        method=method,
    )


def local_slopes(results) -> tuple[np.ndarray, np.ndarray]:
    """beta^2 Var_beta[n L_n] at each temperature's `WBICResult` (= dE_beta[n L_n] / d(1/beta)
    exactly; module doc), over all its draws, and its standard error from the spread of the
    per-chain values over sqrt(chains) (NaN with one chain)."""
    slopes, errors = [], []
    for result in results:
        nll = np.asarray(result.nll, np.float64).reshape(np.shape(result.nll)[0], -1)
        per_chain = result.beta**2 * nll.var(axis=1)
        slopes.append(result.beta**2 * nll.var())
        errors.append(per_chain.std(ddof=1) / np.sqrt(per_chain.size) if per_chain.size > 1
                      else float("nan"))
    return np.array(slopes), np.array(errors)


def slope_warning(betas, results, window, rlct: float) -> str | None:
    """A warning when the local slope falls significantly from the hottest to the coldest
    temperature of `window` (module doc), else None."""
    inside = np.flatnonzero((betas >= window[0]) & (betas <= window[1]))
    slopes, errors = local_slopes([results[i] for i in inside[[0, -1]]])
    fall = slopes[0] - slopes[1]
    if not (fall > SLOPE_TREND_SE * np.hypot(*errors)
            and fall > SLOPE_TREND_RELATIVE * abs(rlct)):
        return None
    return (
        f"the local slope beta^2 Var_beta[n L_n] (the exact slope of E_beta[n L_n] against "
        f"1/beta) falls from {slopes[0]:.3g} ± {errors[0]:.2g} at beta = {betas[inside[0]]:.3g} "
        f"to {slopes[1]:.3g} ± {errors[1]:.2g} at beta = {betas[inside[-1]]:.3g}: E_beta[n L_n] "
        f"is not yet a + lambda/beta there (terms of order 1/(n beta^2), as a mixture's "
        f"component scales give, or mass in poorly fitting regions at the hot end), so "
        f"lambda_hat = {rlct:.3g} is biased high; the coldest local slope is the closer bound "
        f"(use colder temperatures or more data)"
    )


def _design(betas):
    """Columns 1 and 1/beta."""
    return np.stack([np.ones_like(betas), 1.0 / betas], axis=1)


def _offset(betas, n, multiplicity):
    """The multiplicity term -(m - 1) / (beta log(n beta))."""
    return -(multiplicity - 1) / (betas * np.log(n * betas))


def _regression(betas, targets, errors):
    """Weighted least squares of `targets` ((..., beta)) on (1, 1/beta): coefficients
    (..., 2), their covariance (inflated by the reduced chi-square of the first row of targets
    when above 1) and that chi-square."""
    design = _design(np.asarray(betas, np.float64))
    weights = 1.0 / np.maximum(np.asarray(errors, np.float64), 1e-12) ** 2
    covariance = np.linalg.inv(design.T @ (weights[:, None] * design))
    coefficients = np.asarray(targets) @ (weights[:, None] * design) @ covariance
    first = coefficients if coefficients.ndim == 1 else coefficients[0]
    chi2 = float(np.sum(weights * (np.reshape(targets, (-1, len(betas)))[0]
                                   - design @ first) ** 2))
    dof = len(betas) - 2
    if dof > 0:
        covariance = covariance * max(1.0, chi2 / dof)
    return coefficients, covariance, chi2


def _best_fit(betas, means, errors, per_chain, n, max_multiplicity) -> dict:
    """The (window, m) fit with the smallest standard error of lambda (module doc)."""
    size = len(betas)
    windows = sorted(((a, b) for a in range(size) for b in range(a + 3, size + 1)),
                     key=lambda w: w[0] - w[1])  # widest first: ties go to them
    fits = []
    for (low, high), m in product(windows, range(1, max_multiplicity + 1)):
        b = betas[low:high]
        offset = _offset(b, n, m)
        coefficients, covariance, chi2 = _regression(b, means[low:high] - offset,
                                                     errors[low:high])
        std_error = float(np.sqrt(covariance[1, 1]))
        if per_chain.shape[0] >= 2:
            chains, _, _ = _regression(b, per_chain[:, low:high] - offset, errors[low:high])
            std_error = max(std_error, float(chains[:, 1].std(ddof=1)
                                             / np.sqrt(per_chain.shape[0])))
        fits.append({"rlct": float(coefficients[1]), "std_error": std_error,
                     "coefficients": coefficients, "multiplicity": m, "chi2": chi2,
                     "window": (float(b[0]), float(b[-1])), "bounds": (low, high)})
    candidates = []
    for bounds in windows:
        same_window = [f for f in fits if f["bounds"] == bounds]
        lowest = min(f["chi2"] for f in same_window)
        consistent = [f for f in same_window if f["chi2"] <= lowest + MULTIPLICITY_CHI2]
        chosen = min(consistent, key=lambda f: f["multiplicity"])
        chosen["multiplicity_interval"] = (chosen["multiplicity"],
                                           max(f["multiplicity"] for f in consistent))
        candidates.append(chosen)
    return min(candidates, key=lambda f: f["std_error"])


def range_warning(rlct: float, std_error: float, dim: int) -> str | None:
    """A warning when lambda_hat is outside [0, d/2] by more than `RANGE_WARNING_SE` se."""
    margin = RANGE_WARNING_SE * std_error
    if -margin <= rlct <= dim / 2 + margin:
        return None
    return (
        f"lambda_hat = {rlct:.3g} ± {std_error:.2g} lies outside [0, d/2 = {dim / 2}] by more "
        f"than {RANGE_WARNING_SE:g} standard errors: the temperatures or the draws are inadequate"
    )
