"""What a local run's draws say about themselves: named warnings, each with its remedy.

Every local estimator (`slt.llc`, `llc_table`, `llc_trajectory`, `loss_kernel`, `bif`,
`susceptibilities`) summarises its chains into an `LLCResult`; `diagnose` reads that result
and returns the warnings it earns. Each warning is a subclass of `LocalRunWarning` (a
`UserWarning`), so a user can filter or escalate one kind (``warnings.simplefilter("error",
slt.ColdChains)``); its message starts with the class name ("ColdChains: ...") and ends with
what to do, and the result keeps the messages in `warnings` (`LLCResult.warning_names` lists
the names).

The checks, and why each threshold is where it is:

- `DivergedChains`: a chain's loss became non-finite.
- `LowAcceptance` (SGLD only: `has_mala_check`, `slt.samplers.config`): the mean MALA
  acceptance its proposals would have had is below 0.5: each step's discretisation error is
  large.
- `BelowMinimum`: w* is not a minimum of L_n, found two ways. Its gradient: the score
  statistic exceeds its value at a population minimum by more than `MAX_GRADIENT_Z` (5) of
  its standard deviations *and* the shortfall of lambda_hat it causes exceeds
  `MAX_RELATIVE_SHORTFALL` (5%) of lambda_hat (`slt.estimators.local.center`: a minimum of the
  population loss evaluated on a sample, such as a true parameter, passes; a network stopped
  before its loss converged does not). Or its draws: more than `MAX_BELOW` (half) of them lie
  below L_n(w*) (a saddle point; an exact sampler's draws compared on the full data, SGLD's
  on the step's minibatch, paired, whose noise alone puts a fraction of a small model's draws
  below).
- `HotChains` / `ColdChains`: the configurational temperature T (1 at the local posterior)
  lies outside the band 1 +- `TEMPERATURE_TOLERANCE` (5%) by more than `TEMPERATURE_Z` (1)
  of its standard errors. lambda_hat is biased by up to the fraction T - 1 (on a Gaussian
  target, exactly), so the 5% band keeps unwarned runs within about 5%, and a run whose T is
  clearly outside it is reported however wide its uncertainty: T = 0.90 +- 0.03 and
  0.82 +- 0.06 (both missed by a 10%-and-3-se rule) are cold here.
- `NotSpread`: the virial temperature T_v (`slt.samplers.local_chains.virial_temperature`:
  E[(w - w*) . grad U] / k = 1 at the local posterior, k the sampled weights) lies below
  1 - `VIRIAL_TOLERANCE` (5%) by more than `TEMPERATURE_Z` (1) of its standard errors: the
  chains have not spread along directions in which L_n is flat (valleys of minima through
  w*, held only by gamma), which neither the loss trace, R-hat nor the configurational
  temperature can see (each chain is locally in equilibrium). SGLD never makes T_v low by
  itself (its discretisation and minibatch noise only widen the chains), so a low T_v is
  chains still spreading. Measured on reduced-rank regression at its true parameter
  (n = 10^4, gamma = 1): default SGLD runs gave lambda_hat 8.5 and 8.8 at T_v = 0.61 and
  0.62 (configurational T 1.16 and 1.02) against the exact 7.52 of the local posterior
  (blocked Gibbs, benchmarks/rrr_gibbs.py); the second run was silent before this check.
- `ChainsDisagree`: R-hat above 1.1, or the chains' own estimates differ by more than their
  standard errors allow (chi-square test of the chain means, p < 0.001) *and* by more than
  5% of lambda_hat (a difference that matters). The chains start apart (`RunPlan(start=
  "dispersed")`), so chains that have not mixed disagree.
- `NotSettled`: lambda_hat moves between the halves of the draws by more than 3 standard
  errors and 1% (`slt.estimators.local.posterior.drifting`), or an "auto" run spent its
  budget before its chains looked stationary (`slt.samplers.run_length`).
- `LargeStandardError`: the standard error exceeds `MAX_RELATIVE_SE` (10%) of |lambda_hat|.
- `TooFewDraws`: fewer than 4 draws per chain (R-hat and the effective sample size undefined).
- `ChainsDidNotMove`: no chain's distance from w* changed over the draws by more than
  `MOTIONLESS` (1e-6) of that distance (or of 1 / sqrt(n beta) for chains at w*): the step
  size is far too small, and lambda_hat is that of the starting points (0 at w*). Or some
  chains, not all, did not move: an exact sampler's chain whose adapted step accepts nothing
  (measured: one HMC chain of 8 on a held-out deep linear network kept one draw for 8000
  steps, the others moved; benchmarks/RESULTS.md), which R-hat and the chain-agreement test
  may or may not catch.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from slt.estimators.local.posterior import drifting, trace_statistics
from slt.samplers.config import Sampler, StochasticGradient

__all__ = [
    "BelowMinimum",
    "ChainsDidNotMove",
    "ChainsDisagree",
    "ColdChains",
    "DivergedChains",
    "HotChains",
    "LargeStandardError",
    "LocalRunWarning",
    "LowAcceptance",
    "NotSettled",
    "NotSpread",
    "RunNote",
    "TooFewDraws",
    "diagnose",
    "warning_name",
]

LOW_ACCEPTANCE = 0.5
MAX_BELOW = 0.5
MAX_GRADIENT_Z = 5.0
MAX_RELATIVE_SHORTFALL = 0.05
TEMPERATURE_TOLERANCE = 0.05
TEMPERATURE_Z = 1.0
VIRIAL_TOLERANCE = 0.05
MAX_RHAT = 1.1
DISAGREEMENT_P = 1e-3
MIN_RELATIVE_DISAGREEMENT = 0.05
MAX_RELATIVE_SE = 0.1
MIN_DRAWS = 4
MOTIONLESS = 1e-6


class LocalRunWarning(UserWarning):
    """A diagnostic of a local run: the number it comes with should not be trusted as is."""


class RunNote(LocalRunWarning):
    """What the run did on its own account (a repetition at a smaller step, a longer warmup)."""


class DivergedChains(LocalRunWarning):
    """Chains whose loss became non-finite were stopped."""


class LowAcceptance(LocalRunWarning):
    """SGLD's steps are too large: the MALA acceptance of its proposals is low."""


class BelowMinimum(LocalRunWarning):
    """Many draws lie below L_n(w*): w* is not a local minimum of L_n."""


class HotChains(LocalRunWarning):
    """The chains run hotter than the local posterior: lambda_hat too high."""


class ColdChains(LocalRunWarning):
    """The chains have not spread over the local posterior: lambda_hat too low."""


class NotSpread(LocalRunWarning):
    """The chains have not spread along the flat directions of L_n (virial temperature < 1)."""


class ChainsDisagree(LocalRunWarning):
    """The chains' estimates differ by more than their standard errors allow."""


class NotSettled(LocalRunWarning):
    """lambda_hat still moves between the halves of the draws."""


class LargeStandardError(LocalRunWarning):
    """lambda_hat's standard error is more than 10% of it."""


class TooFewDraws(LocalRunWarning):
    """Too few draws per chain to judge the chains (R-hat, effective sample size)."""


class ChainsDidNotMove(LocalRunWarning):
    """Every chain, or some chains, stayed where they started (module doc)."""


def warning_name(message: str) -> str:
    """The name of the warning a message belongs to (its text before the first ": ")."""
    return message.split(": ", 1)[0]


def diagnose(result, kept: np.ndarray,
             sampler: Sampler) -> list[tuple[type[LocalRunWarning], str]]:
    """The warnings an `LLCResult` earns, as (category, message) pairs in a fixed order.

    Args:
      result: the run's `LLCResult` (its diagnostics filled in, `warnings` not yet).
      kept: the non-diverged chains' per-draw estimates n beta (L_b(w_t) - L_b(w*)),
        (chain, draw).
      sampler: the sampler value the chains ran with (`slt.samplers`).
    """
    found = []

    def add(category, text):
        found.append((category, f"{category.__name__}: {text}"))

    diverged = result.diverged_at >= 0
    if diverged.any():
        steps = ", ".join(str(int(s)) for s in result.diverged_at[diverged])
        add(DivergedChains, f"{int(diverged.sum())} chain(s) diverged (at step {steps}) and "
            f"were stopped; try step_size={result.suggested_step_size:.3g}")
    exact = not isinstance(sampler, StochasticGradient)  # Metropolis-adjusted
    if sampler.has_mala_check and result.mala_acceptance < LOW_ACCEPTANCE:
        add(LowAcceptance, f"MALA acceptance {result.mala_acceptance:.2f} is low: the step "
            "size is too large; use a smaller one")
    stuck = _motionless(result.distance_trace, result.nbeta)
    if stuck.size and stuck.all():
        add(ChainsDidNotMove, f"no chain moved from where it started (lambda_hat "
            f"{result.llc_mean:.3g} ± {result.std_error:.2g} is that of the starting points): "
            f"the step size {result.step_size:.3g} is far too small; use step_size='auto'")
        return found
    if stuck.any():
        chains = ", ".join(str(int(chain)) for chain in np.flatnonzero(stuck))
        add(ChainsDidNotMove, f"chain(s) {chains} of {stuck.size} did not move over the "
            "draws (lambda_hat averages in the value at where they stopped): a chain whose "
            "adapted step accepts no proposal; run with another key or a longer warmup")
    if kept.shape[1] < MIN_DRAWS:
        add(TooFewDraws, f"{kept.shape[1]} draw(s) per chain: the chains cannot be compared "
            "(R-hat, effective sample size undefined); draw more (num_samples)")
    descending = (result.gradient_z > MAX_GRADIENT_Z
                  and result.shortfall > MAX_RELATIVE_SHORTFALL * abs(result.llc_mean))
    if descending or result.fraction_below_init > MAX_BELOW:
        found_by = (f"its gradient is {result.gradient_z:.0f} standard deviations above "
                    f"sampling noise and lowers lambda_hat by about {result.shortfall:.3g}"
                    if descending else f"{result.fraction_below_init:.0%} of draws lie below "
                    "L_n(w*)")
        add(BelowMinimum, f"w* is not a local minimum of L_n ({found_by}; a saddle point, or "
            f"training stopped early), and lambda_hat {result.llc_mean:.3g} is too low; train "
            "w* to convergence first (or increase gamma to confine the chains)")
    found.extend(_temperature_warnings(result, exact))
    if _not_spread(result):
        add(NotSpread, f"the chains have not spread over the local posterior (virial "
            f"temperature {result.virial_temperature:.2f} ± "
            f"{result.virial_temperature_std_error:.2f}, 1 at equilibrium): along directions "
            "where L_n is flat, held only by gamma, they stay nearer w* than the posterior "
            f"does, so lambda_hat {result.llc_mean:.3g} is that of a tighter neighbourhood and "
            "changes as they spread; check it with an exact sampler (slt.llc_check, or "
            "sampler=slt.samplers.HMC()), draw much longer, or raise gamma (a narrower "
            "estimand that chains cross in about 1 / (gamma step_size) steps)")
    if _disagreeing(result, kept):
        per_chain = ", ".join(f"{value:.3g}" for value in result.llc_per_chain
                              if np.isfinite(value))
        add(ChainsDisagree, f"the chains disagree (lambda_hat per chain {per_chain}; R-hat "
            f"{result.rhat:.2f}): they have not mixed; warm up and draw longer, or check that "
            "w* is an isolated minimum at this gamma")
    if "before the chains looked stationary" in result.stop_reason:
        add(NotSettled, f"{result.stop_reason} (split R-hat {result.rhat:.3f}): lambda_hat "
            f"{result.llc_mean:.3g} may still be moving; raise RunPlan(max_steps=...), or a "
            "larger SGLD(batch_size=...), which admits a proportionally larger step")
    elif drifting(kept, result.drift_z):
        first, second = (kept[:, part].mean() for part in np.array_split(
            np.arange(kept.shape[1]), 2))
        add(NotSettled, f"lambda_hat drifts from {first:.3g} (first half of the draws) to "
            f"{second:.3g} (second half), {result.drift_z:.1f} standard errors: the chains "
            "have not settled; warm up longer (num_warmup) or draw more")
    if result.std_error > MAX_RELATIVE_SE * abs(result.llc_mean):
        add(LargeStandardError, f"the standard error {result.std_error:.2g} is "
            f"{result.std_error / max(abs(result.llc_mean), 1e-300):.0%} of lambda_hat "
            f"{result.llc_mean:.3g}: draw more (num_samples, num_chains)")
    return found


def _motionless(distance: np.ndarray | None, nbeta: float) -> np.ndarray:
    """Per chain, whether its distance from w* (`distance`: (chain, draw)) changed by no more
    than MOTIONLESS of its size, or of 1 / sqrt(n beta) (the local posterior's width along a
    direction of unit curvature) for a chain at w*; empty without a trace."""
    if distance is None or distance.size == 0:
        return np.zeros(0, bool)
    scale = np.maximum(np.max(np.abs(distance), axis=1), 1 / np.sqrt(nbeta))
    return np.ptp(distance, axis=1) <= MOTIONLESS * scale


def _temperature_warnings(result, exact: bool) -> list[tuple[type[LocalRunWarning], str]]:
    """HotChains / ColdChains when |T - 1| exceeds TEMPERATURE_TOLERANCE by more than
    TEMPERATURE_Z standard errors."""
    temperature, temperature_se = result.temperature, result.temperature_std_error
    if not np.isfinite(temperature):
        return []
    deviation = temperature - 1
    if abs(deviation) <= TEMPERATURE_TOLERANCE + TEMPERATURE_Z * temperature_se:
        return []
    measured = f"configurational temperature {temperature:.2f} ± {temperature_se:.2f}"
    if deviation > 0:
        remedy = ("the exact sampler has not reached equilibrium: warm up longer" if exact else
                  "use a smaller step size or SGLD(extrapolate=True)")
        return [(HotChains, f"HotChains: the chains run hot ({measured}): lambda_hat may be up "
                 f"to {deviation:.0%} too high; {remedy}")]
    return [(ColdChains, f"ColdChains: the chains are cold ({measured}): they have not "
             "reached the local posterior, and lambda_hat is too low; warm up longer"
             + ("" if exact else " or use a larger step size"))]


def _not_spread(result) -> bool:
    """T_v below 1 - VIRIAL_TOLERANCE by more than TEMPERATURE_Z standard errors."""
    virial = result.virial_temperature
    return bool(np.isfinite(virial) and 1 - virial > VIRIAL_TOLERANCE + TEMPERATURE_Z
                * result.virial_temperature_std_error)


def _disagreeing(result, kept: np.ndarray) -> bool:
    """R-hat above MAX_RHAT, or chain means that differ beyond their standard errors
    (chi-square test, p < DISAGREEMENT_P) and by more than MIN_RELATIVE_DISAGREEMENT of
    lambda_hat."""
    if result.rhat > MAX_RHAT:
        return True
    chains, draws = kept.shape
    if chains < 2 or draws < MIN_DRAWS:
        return False
    means = kept.mean(axis=1)
    errors = np.array([trace_statistics(chain[None])[1] for chain in kept])
    if not np.all(errors > 0):
        return False
    weights = errors**-2
    centre = np.sum(weights * means) / np.sum(weights)
    statistic = float(np.sum(weights * (means - centre) ** 2))
    significant = stats.chi2.sf(statistic, chains - 1) < DISAGREEMENT_P
    return bool(significant and np.std(means, ddof=1) > MIN_RELATIVE_DISAGREEMENT
                * abs(result.llc_mean))
