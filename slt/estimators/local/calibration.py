"""Choose the SGLD step size (and, if asked, gamma) for `llc` by a stated criterion.

Criterion. For every candidate (step size, gamma) a few short chains run, all candidates at
once in one compiled program (step size and gamma are per-chain runtime values). A candidate
**passes** when
  1. no chain diverges,
  2. the mean MALA acceptance probability is at least `min_acceptance` (0.9 by default:
     the discretisation error of each step is small; Lau et al. report trustworthy lambda_hat
     in that regime), and
  3. the trace is stationary: the mean of n beta (L_b - L_b(w*)) over the first and the second
     half of the post-warmup draws differ by less than 3 standard errors of the difference,
     or by less than 1% of lambda_hat (`slt.estimators.local.posterior.drifting`; too small a step
     size has not reached the local posterior and still drifts), and
  4. the minibatch gradient noise is small against the injected Langevin noise:
     r(eps) = (eps / 4d) sum_j G_j (n beta)^2 Var_b(g_j) <= `max_noise_ratio` (0.02), with
     Var_b(g_j) the variance of coordinate j of the minibatch gradient of L_b at w*
     (`gradient_noise_ratio`). Minibatch noise heats the chains: measured on reduced-rank
     regression, lambda_hat grows linearly in eps with a relative bias of about 2.5 r, which
     MALA acceptance (computed on one minibatch) cannot see. r <= 0.02 keeps it near 5%.
  5. the chains are neither hot nor cold: their configurational temperature T (measured from
     the draws; `slt.samplers.local_chains.configurational_temperature`, exactly 1 at the
     local posterior) satisfies |T - 1| <= `max_temperature_deviation` (0.1) + 2 standard
     errors, and is measurable (a mean Laplacian of U that is not positive happens only away
     from equilibrium). T < 1 flags chains still close to w*, which have not spread over the
     local posterior (too small a step size for the run's length: their lambda_hat is far too
     small, yet their trace can look stationary); T > 1 flags chains heated by a too large
     step or by minibatch noise. The two-standard-error allowance keeps a short noisy run from
     failing a good candidate, so the hot side catches only gross heating; the estimate of T
     in the final run, with its warning, is sharper.
The choice. A candidate's pass or fail is decided by a few short chains, and the grid is a
factor 2.15 apart, so "the largest passing candidate" moves by that factor, or more, with the
key wherever a noisy statistic decides the edge of the passing set. Measured over 5 keys on
the 13 points of benchmarks/llc_nonlinear.py (benchmarks/RESULTS.md, "The calibrated step
over keys"): the edge was set by single-candidate drift tests and temperatures that were
noise (the noise ratio, which is exact, set only the grid's end), the chosen steps spread by
2.15 to 4.6 over keys at 7 of 12 points, and on the deeper networks every candidate but the
grid's smallest ran hot, so no candidate passed on 3 of 5 keys. So by default
(`Calibration(choice="fitted")`, `fitted_step_size`) the step is read from curves fitted
through every candidate, each noisy statistic as the trend theory gives it in eps (the noise
ratio r = rho eps exactly; MALA's log-acceptance spread a power of eps; 1 - 1/T = c eps, exact
for a Gaussian): the largest step at which every fitted curve meets its bound, not quantised
to the grid, the noise averaged over candidates (the fitted curve meets the bound itself,
T - 1 <= `max_temperature_deviation`, with no 2 se allowance: the fit is what removes the
noise). Among the steps whose bias the bounds accept, the largest mixes best (effective draws
per gradient grow as eps). Measured on the same points and keys (built in float64): with 2
chains a candidate 1.10x to 2.21x over 5 keys at 12 points (within 2x at 10); the fitted
temperature curve's noise set the spread, so the default is 4 chains a candidate (twice the
sweep's gradients): 1.06x to 1.74x at the same 12 points, and every key calibrates. The result
reports the interval the step would move over if the curves moved by 2 of their standard
errors (`CalibrationResult.interval`) and the bound that set it (`limit`). Its grid ends one
grid factor above the noise limit, so the candidates straddle the edge they measure, and
reaches four decades below it. The sweep still needs one passing candidate (the fitted step
is no smaller than the smallest one), and the warmup `llc` needs is the longest any passing
candidate needed. `Calibration(choice="largest")` is the former rule, grid included: the
largest passing candidate.

Chains that need longer to settle. How long chains take to forget w* grows with the spread of
the loss's curvatures (the condition number of the Hessian at w*), which grows with the width
of a network: on reduced-rank regression at d = 1e5 no candidate settles within the default
500 + 1000 steps. When no candidate passes, the candidates that fail *only* by not having
settled (drifting, or cold, with no divergence, enough acceptance, a small noise ratio and no
heat) are swept again with twice the warmup and draws, the `SETTLING_CANDIDATES` largest
step sizes of each gamma (larger steps settle sooner), up to `max_lengthenings` times. The
result records the warmup of the sweep that passed (`CalibrationResult.num_warmup`); `llc`
warms up at least that long.
With several gammas, the smallest gamma that has a passing step size is chosen (gamma biases
lambda_hat downward by confining the chains; the smallest workable gamma biases it least).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import norm

from slt.estimators.local.center import measure_center
from slt.estimators.local.posterior import (
    LocalPosterior,
    check_local_run,
    drifting,
    restriction_mask,
    trace_drift,
    trace_statistics,
)
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.config import SGHMC, SGLD, RunPlan, StochasticGradient, uses_control_variates
from slt.samplers.local_chains import ChainTargets, configurational_temperature, run_chains
from slt.samplers.sgld import RMSPROP_DAMPING
from slt.validation import InputError

__all__ = [
    "CalibrationResult",
    "default_step_sizes",
    "choose_step_size",
    "fitted_step_size",
    "gradient_noise_ratio",
    "llc_calibrate",
]

# The columns of `CalibrationResult.table`, in order.
_TABLE_COLUMNS = ["step_size", "gamma", "num_warmup", "num_samples", "llc", "se",
                  "mala_acceptance", "drift_z", "temperature", "temperature_se", "noise_ratio",
                  "diverged", "settled", "passes"]
# The candidates' chains measure the MALA acceptance and the temperature every this many steps
# (twice as often as llc's default: the short runs need the measurements).
CALIBRATION_MALA_EVERY = 5
# A sweep in which no candidate passes is repeated, lengthened, for at most this many of the
# candidates of each gamma that failed only by not having settled (the largest step sizes).
SETTLING_CANDIDATES = 3
# The default grid moves down to the noise limit when fewer of its candidates lie below it.
USABLE_CANDIDATES = 4
# Calibration(choice="fitted") reads its step from curves on a log grid this fine (a decade).
FIT_POINTS_PER_DECADE = 100
# ... fitting 1 - 1/T = c eps below the first candidate whose T - 1 is above this by 2 se.
MAX_FITTED_HEATING = 1.0
# ... and reports the steps chosen with every fitted curve moved by this many se as its interval.
INTERVAL_Z = 2.0


def default_step_sizes(nbeta: float, preconditioner: str | None,
                       noise_limit: float = np.inf, choice: str = "largest") -> np.ndarray:
    """The candidate grid: 13 log-spaced values over four decades, a factor 10^(1/3) apart.

    Without preconditioning the stable step size scales like 1 / (n beta * curvature of L_n):
    the grid spans 1e-4 / (n beta) .. 1 / (n beta). RMSprop divides the gradient by its own
    magnitude, so its steps are in parameter units: 1e-7 .. 1e-3. `noise_limit` is the step
    whose gradient-noise ratio is the criterion's largest (wide networks with large
    per-example gradients have it low). For choice "largest", when fewer than
    `USABLE_CANDIDATES` of these lie at or below it, the four decades end at `noise_limit`
    instead, so that the sweep is not spent on steps that fail the noise criterion whatever
    their chains do. For choice "fitted", whenever `noise_limit` is below the grid's top the
    four decades end one grid factor above it (`noise_limit` is a candidate): the fits need
    the candidates near the edge and below it (a network whose chains run hot below the
    fixed grid's smallest step is calibrated there), and one candidate beyond the limit shows
    the heating that sets in past it.
    """
    grid = np.logspace(-7, -3, 13) if preconditioner == "rmsprop" else (
        np.logspace(-4, 0, 13) / nbeta)
    if choice == "fitted" and noise_limit < grid[-1]:
        grid = noise_limit * np.logspace(-11 / 3, 1 / 3, 13)
    elif np.sum(grid <= noise_limit) < USABLE_CANDIDATES:
        grid = noise_limit * np.logspace(-4, 0, 13)
    return grid


@dataclass(frozen=True)
class CalibrationResult(Persistable):
    """The sweep and the choice.

    Attributes:
      step_size, gamma: the chosen values.
      table: one row per candidate: step_size, gamma, num_warmup and num_samples (the length
        of its last sweep), llc (mean), se, mala_acceptance, drift_z (half-to-half difference
        in standard errors), temperature and its se, noise_ratio, diverged, settled (neither
        drifting nor cold), passes.
      criterion: the criterion in words.
      num_warmup: the warmup of the chosen candidate's sweep: the default, or longer where
        the sweep had to be lengthened for the chains to settle (`llc` then warms up at
        least this long).
      gradients: the per-example gradients the sweeps' chain steps spent (steps times batch
        size).
      noise_per_step: the gradient-noise ratio per unit step, r(eps) / eps
        (`gradient_noise_ratio`).
      interval: (low, high): the steps chosen with every fitted curve moved up, then down, by
        INTERVAL_Z (2) of its standard errors (`fitted_step_size`): the spread of the choice
        over keys that the sweep itself measures. For choice "largest": the step twice.
      limit: the bound that set the step: "noise ratio", "temperature", "MALA acceptance",
        "largest usable candidate", "smallest passing candidate" (the fitted rule) or
        "largest passing candidate".
    """

    step_size: float
    gamma: float
    table: pd.DataFrame = field(repr=False)
    criterion: str = field(repr=False, default=__doc__)
    num_warmup: int = 0
    gradients: int = 0
    noise_per_step: float = 0.0
    interval: tuple[float, float] = (0.0, 0.0)
    limit: str = ""

    def summary(self) -> pd.DataFrame:
        """One row per candidate (step size, gamma): `table` with a column ``chosen`` that
        marks the candidate picked (a fitted step size, `Calibration(choice="fitted")`: the
        candidate nearest to it) and a column ``in_interval``: the candidates of the chosen
        gamma within the step's `interval`."""
        steps = self.table["step_size"].to_numpy(float)
        same_gamma = self.table["gamma"].to_numpy() == self.gamma
        distance = np.abs(np.log(steps / self.step_size))
        distance[~same_gamma] = np.inf
        low, high = self.interval
        return self.table.assign(chosen=distance == distance.min(),
                                 in_interval=same_gamma & (steps >= low) & (steps <= high))

    def to_xarray(self) -> xr.Dataset:
        """The sweep as an xarray Dataset: the columns of `summary` (step_size, gamma, llc,
        se, mala_acceptance, drift_z, temperature, temperature_se, noise_ratio, diverged,
        passes, chosen, in_interval) as variables over dim ``candidate``; attrs criterion
        (in words),
        step_size, interval and limit."""
        return xr.Dataset.from_dataframe(self.summary().rename_axis("candidate")).assign_attrs(
            criterion=self.criterion, step_size=self.step_size, interval=list(self.interval),
            limit=self.limit)

    def plot(self, **kwargs):
        """lambda_hat and MALA acceptance against step size, the chosen one marked."""
        from slt.plots.llc import plot_calibration

        return plot_calibration(self, **kwargs)

    def __repr__(self) -> str:
        passing = int(self.table["passes"].sum())
        return (
            f"CalibrationResult(step_size={self.step_size:.3g}, gamma={self.gamma:g}, "
            f"interval {self.interval[0]:.3g}..{self.interval[1]:.3g}, set by {self.limit}, "
            f"{passing}/{len(self.table)} candidates pass)"
        )


def llc_calibrate(
    problem: Problem,
    params: Params,
    key: jax.Array,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: SGLD = SGLD(),
    progress: bool = True,
) -> CalibrationResult:
    """Sweep SGLD step sizes (and optionally gammas) and pick one by the module's criterion.

    Args:
      problem, params: as for `llc` (params = w*).
      key: PRNG key.
      posterior: the local posterior, as for `llc` (its restrict_to: calibrate the chains that
        move only the selected weights; the noise ratio r(eps) then averages over those
        weights; its gamma: the one calibrated unless the sweep names candidate gammas).
      sampler: the SGLD whose step size is chosen: its batch_size and preconditioner are
        used, and its step_size says how to sweep: "auto" (the default `Calibration`) or a
        `slt.samplers.Calibration` (candidates, chains, run length, the criterion's limits).
      progress: show a progress bar.

    Returns:
      A `CalibrationResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): as for `llc`; a sampler that is not SGLD,
        or whose step size is a number (there is nothing to choose).
      ValueError: no candidate passes (the message holds the table).

    Example:
      >>> sweep = slt.samplers.Calibration(step_sizes=(1e-3, 1e-2), num_samples=200,
      ...                                  num_warmup=100)
      >>> found = slt.llc_calibrate(problem, params, key,
      ...                           sampler=slt.samplers.SGLD(step_size=sweep), progress=False)
      >>> low, high = found.interval
      >>> 1e-3 <= low <= found.step_size <= high <= 1e-2, len(found.table)
      (True, 2)
    """
    if not isinstance(sampler, StochasticGradient) or sampler.calibration is None:
        raise InputError(f"llc_calibrate chooses SGLD's or SGHMC's step size: give "
                         f"sampler=SGLD() (step size 'auto') or SGLD(step_size="
                         f"Calibration(...)), the same for SGHMC, got {sampler!r}")
    posterior = check_local_run(problem, params, key, posterior, sampler)
    sweep_options = sampler.calibration
    gammas = np.asarray([posterior.gamma] if sweep_options.gammas is None
                        else sweep_options.gammas, dtype=float)
    mask = restriction_mask(problem, params, posterior.restrict_to)
    nbeta = posterior.nbeta
    noise_per_step = gradient_noise_ratio(problem, params, 1.0, nbeta=nbeta, sampler=sampler,
                                          mask=mask)
    # with control variates (no noise ratio to measure) the chains need grad L_n(w*)
    center_gradient = (measure_center(problem, params).gradient[None]
                       if uses_control_variates(sampler) else None)
    step_sizes = sweep_options.step_sizes
    if step_sizes is None:
        noise_limit = (sweep_options.max_noise_ratio / noise_per_step if noise_per_step > 0
                       else np.inf)
        step_sizes = default_step_sizes(nbeta, getattr(sampler, "preconditioner", None),
                                        noise_limit, sweep_options.choice)
    step_sizes = np.asarray(step_sizes, dtype=float)
    min_acceptance = sweep_options.min_acceptance
    max_noise_ratio = sweep_options.max_noise_ratio
    max_temperature_deviation = sweep_options.max_temperature_deviation
    chains_per_candidate = sweep_options.chains_per_candidate
    num_warmup, num_samples = sweep_options.num_warmup, sweep_options.num_samples
    sweeping = (replace(sampler, measure_every=CALIBRATION_MALA_EVERY)
                if isinstance(sampler, SGHMC) else
                replace(sampler, mala_every=CALIBRATION_MALA_EVERY, extrapolate=False))
    grid_steps, grid_gammas = _candidate_grid(step_sizes, gammas)

    spent = [0]

    def sweep(sweep_key, steps, sweep_gammas, warmup, samples
              ) -> tuple[pd.DataFrame, np.ndarray]:
        """Every candidate (steps[i], sweep_gammas[i]) run and assessed, in one program: its
        table rows, and whether each fails only by not having settled."""
        spent[0] += (steps.size * chains_per_candidate * (warmup + samples)
                     * min(sampler.batch_size, problem.n) * sweeping.gradients_per_step)
        trace = run_chains(
            problem, params, sweep_key,
            ChainTargets(step_size=steps, gamma=sweep_gammas, nbeta=np.full(steps.size, nbeta),
                         include_prior=posterior.include_prior,
                         mask=None if mask is None else np.broadcast_to(
                             mask, (steps.size, mask.size)),
                         center_gradient=center_gradient),
            sampler=sweeping,
            plan=RunPlan(num_chains=chains_per_candidate, num_warmup=warmup,
                         num_samples=samples, progress=progress),
            description="llc calibration",
        )
        rows = []
        for index, (step_size, gamma_value) in enumerate(zip(steps, sweep_gammas, strict=True)):
            chains = slice(index * chains_per_candidate, (index + 1) * chains_per_candidate)
            row = _assess(trace, chains, warmup, nbeta, min_acceptance,
                          max_temperature_deviation, sampler)
            row["noise_ratio"] = noise_per_step * step_size
            quiet = row["noise_ratio"] <= max_noise_ratio
            row["passes"] = row["passes"] and quiet
            row["waiting"] = row["waiting"] and quiet
            rows.append(row | {"step_size": step_size, "gamma": gamma_value,
                               "num_warmup": warmup, "num_samples": samples})
        table = pd.DataFrame(rows)
        return table[_TABLE_COLUMNS], table["waiting"].to_numpy()

    table, waiting = sweep(key, grid_steps, grid_gammas, num_warmup, num_samples)
    for lengthening in range(1, sweep_options.max_lengthenings + 1):
        unsettled = _largest_per_gamma(table, waiting)
        if table["passes"].any() or not unsettled.any():
            break
        num_warmup, num_samples = 2 * num_warmup, 2 * num_samples
        again, waiting_again = sweep(
            jax.random.fold_in(key, lengthening), table["step_size"].to_numpy()[unsettled],
            table["gamma"].to_numpy()[unsettled], num_warmup, num_samples)
        again.index = table.index[unsettled]
        table = pd.concat([table[~unsettled], again]).sort_index()
        waiting = waiting.copy()
        waiting[unsettled] = waiting_again
    step_size, best_gamma, interval, limit = choose_step_size(table, sweep_options,
                                                              noise_per_step)
    passing = table[table["passes"]]
    return CalibrationResult(step_size=step_size, gamma=best_gamma, table=table,
                             num_warmup=int(passing["num_warmup"].max()), gradients=spent[0],
                             noise_per_step=noise_per_step, interval=interval, limit=limit)


def choose_step_size(table: pd.DataFrame, options, noise_per_step: float
                     ) -> tuple[float, float, tuple[float, float], str]:
    """The (step size, gamma) `options.choice` (a `Calibration`) picks from a sweep's `table`.

    Gamma: the smallest with a passing candidate. "largest": its largest passing candidate
    (interval: that step alone). "fitted": `fitted_step_size` over that gamma's candidates.

    Returns:
      step size, gamma, the step's interval (low, high) and the limit that set it.

    Raises:
      ValueError: no candidate passes (the message holds the table).
    """
    passing = table[table["passes"]]
    if passing.empty:
        raise ValueError(
            "no candidate passes the calibration criterion (divergence, MALA acceptance >= "
            f"{options.min_acceptance}, stationarity, noise ratio <= {options.max_noise_ratio}, "
            f"|temperature - 1| <= {options.max_temperature_deviation} + 2 se); widen "
            "step_sizes or gammas, or raise batch_size:\n" + table.to_string(index=False)
        )
    best_gamma = float(passing["gamma"].min())
    if options.choice == "largest":
        step_size = float(passing.loc[passing["gamma"] == best_gamma, "step_size"].max())
        return step_size, best_gamma, (step_size, step_size), "largest passing candidate"
    step_size, interval, limit = fitted_step_size(
        table[table["gamma"] == best_gamma], options, noise_per_step)
    return step_size, best_gamma, interval, limit


def fitted_step_size(table: pd.DataFrame, options, noise_per_step: float
                     ) -> tuple[float, tuple[float, float], str]:
    """The step `Calibration(choice="fitted")` (the default) reads from one gamma's sweep.

    Every bound of the criterion that is a noisy statistic is read from a curve fitted
    through all the candidates that measure it, not from the one candidate at the edge of the
    passing set, so that the noise of the short runs averages over candidates and the step is
    not quantised to the grid:

      noise ratio    r(eps) = rho eps exactly (`gradient_noise_ratio`, rho = `noise_per_step`):
                     eps <= max_noise_ratio / rho.
      MALA           in the Gaussian limit of the log acceptance ratio (Roberts & Rosenthal
                     1998), acc = 2 Phi(-s / 2) with s its standard deviation, and s grows as
                     a power of eps (s^2 ~ d eps^3 for a smooth target; fitted, not assumed):
                     log s_i = -2 Phi^-1(acc_i / 2) is fitted by weighted least squares
                     log s = c + p log eps over candidates with 0 < acc < 1 (weights 1 /
                     Var(log s_i), Var(acc_i) <= acc (1 - acc) / N_i with N_i the acceptance
                     measurements, by the delta method; the fit's residual variance scales
                     them), and the bound is s(eps) <= -2 Phi^-1(min_acceptance / 2).
      temperature    SGLD's stationary law is off by O(eps) (discretisation and minibatch
                     noise alike). On a Gaussian posterior of curvature h the Langevin step's
                     stationary variance is 1 / (h (1 - eps h / 4)), so T = 1 / (1 - eps h / 4):
                     1 - 1/T = c eps exactly (c = h / 4); minibatch noise, of variance
                     proportional to eps^2 per step, adds to c at first order. So
                     1 - 1/T = c eps, one
                     parameter, fitted by weighted least squares through the origin (weights
                     T^4 / se(T)^2, by the delta method; the covariance scaled up by the fit's
                     chi^2 per degree of freedom when above 1) over the candidates up to the
                     upper clip below (within the expansion's range) that did not diverge
                     and are not cold (their T measures chains that have not spread yet);
                     a hot measurement is not left out, which would bias c low. The bound:
                     T(eps) - 1 <= max_temperature_deviation, i.e. c eps <= delta / (1 + delta).

    The step is the largest eps, on a log grid of FIT_POINTS_PER_DECADE points a decade (and
    the noise ratio's exact bound), below which every fitted bound holds, clipped to [the
    smallest passing candidate, the largest candidate below the first one above it that
    diverged or ran hot past the expansion (T - 1 beyond MAX_FITTED_HEATING by 2 se)]: below,
    no chain was seen to settle in the sweep; above, none was seen to be stable. Among the
    steps whose bias the bounds accept, the largest is the one that mixes best: Langevin
    dynamics advances its time by eps a step, so the autocorrelation time in steps, and with
    it the gradients per effective draw, falls as 1 / eps until the discretisation error the
    bounds limit takes over.

    The interval (the candidates' spread): the same with each fitted curve moved up, then
    down, by INTERVAL_Z of its standard errors (the fit's covariance): the steps a sweep with
    other keys would plausibly have chosen.

    Args:
      table: one gamma's rows of `CalibrationResult.table`.
      options: the `Calibration` (min_acceptance, max_noise_ratio,
        max_temperature_deviation, chains_per_candidate).
      noise_per_step: rho, r(eps) / eps.

    Returns:
      the step, its interval (low, high) and the name of the bound that set it.
    """
    steps = table["step_size"].to_numpy(float)
    heating = table["temperature"].to_numpy(float) - 1
    low_clip = float(table.loc[table["passes"], "step_size"].min())
    broken = (steps > low_clip) & (
        table["diverged"].to_numpy(bool)
        | (heating - 2 * table["temperature_se"].to_numpy(float) > MAX_FITTED_HEATING))
    below = steps[~broken & (steps < steps[broken].min(initial=np.inf))]
    high_clip = max(float(below.max(initial=low_clip)), low_clip)
    grid = np.exp(np.linspace(np.log(low_clip), np.log(high_clip), max(2, int(np.ceil(
        FIT_POINTS_PER_DECADE * np.log10(high_clip / low_clip))) + 1)))
    grid[0], grid[-1] = low_clip, high_clip  # the candidates themselves, not rounded
    noise_limit = options.max_noise_ratio / noise_per_step if noise_per_step > 0 else np.inf
    if low_clip < noise_limit < high_clip:  # the noise ratio's bound is exact: a grid step
        grid = np.sort(np.append(grid, noise_limit))
    bounds = {"noise ratio": (np.full(grid.size, noise_per_step) * grid, np.zeros(grid.size),
                              options.max_noise_ratio)}
    bounds["MALA acceptance"] = _fitted_mala(table, options, grid)
    bounds["temperature"] = _fitted_heating(table[steps <= high_clip], options, grid)

    def largest(z: float) -> tuple[float, str]:
        """The largest grid step below which every bound, moved up by z se, holds."""
        first_breach, limit = grid.size, "largest usable candidate"
        for name, bound in bounds.items():
            if bound is None:
                continue
            value, se, maximum = bound
            breached = np.flatnonzero(~(value + z * se <= maximum))
            if breached.size and breached[0] < first_breach:
                first_breach, limit = breached[0], name
        if first_breach == 0:
            return low_clip, "smallest passing candidate"
        return float(grid[first_breach - 1]), limit

    step_size, limit = largest(0.0)
    interval = (min(largest(INTERVAL_Z)[0], step_size), max(largest(-INTERVAL_Z)[0], step_size))
    return step_size, interval, limit


def _fitted_mala(table: pd.DataFrame, options, grid: np.ndarray):
    """The MALA bound of `fitted_step_size` on `grid`: (log s, its se, log s at
    min_acceptance), or None with fewer than 2 candidates to fit or no growth with eps."""
    acceptance = table["mala_acceptance"].to_numpy(float)
    fit = ~table["diverged"].to_numpy(bool) & (acceptance > 0) & (acceptance < 1)
    if fit.sum() < 2:
        return None
    acceptance = acceptance[fit]
    spread = -2 * norm.ppf(acceptance / 2)  # s
    measurements = (options.chains_per_candidate * table["num_samples"].to_numpy(float)[fit]
                    / CALIBRATION_MALA_EVERY)
    variance = (acceptance * (1 - acceptance) / measurements
                / (spread * norm.pdf(spread / 2)) ** 2)
    x = np.log(table["step_size"].to_numpy(float)[fit])
    design = np.stack([np.ones_like(x), x], axis=1)
    coefficients, covariance = _weighted_fit(design, np.log(spread), variance, known=False)
    if coefficients[1] <= 0:
        return None
    at = np.stack([np.ones(grid.size), np.log(grid)], axis=1)
    return (at @ coefficients, np.sqrt(np.einsum("ij,jk,ik->i", at, covariance, at)),
            float(np.log(-2 * norm.ppf(options.min_acceptance / 2))))


def _fitted_heating(table: pd.DataFrame, options, grid: np.ndarray):
    """The temperature bound of `fitted_step_size` on `grid`: (predicted 1 - 1/T, its se,
    the bound delta / (1 + delta)), or None with no candidate to fit."""
    temperature = table["temperature"].to_numpy(float)
    se = table["temperature_se"].to_numpy(float)
    allowance = options.max_temperature_deviation + 2 * se
    fit = (~table["diverged"].to_numpy(bool) & np.isfinite(temperature) & (se > 0)
           & (temperature > 0) & (1 - temperature <= allowance))
    if not fit.any():
        return None
    scale = grid[-1]
    design = (table["step_size"].to_numpy(float)[fit] / scale)[:, None]
    heat = 1 - 1 / temperature[fit]
    slope, covariance = _weighted_fit(design, heat, (se[fit] / temperature[fit] ** 2) ** 2,
                                      known=True)
    at = grid / scale
    deviation = options.max_temperature_deviation
    return at * slope[0], at * np.sqrt(covariance[0, 0]), deviation / (1 + deviation)


def _weighted_fit(design: np.ndarray, y: np.ndarray, variance: np.ndarray, *, known: bool):
    """Weighted least squares y ~ design @ beta with weights 1 / variance: beta and its
    covariance, scaled by the residual chi^2 per degree of freedom when there is a degree of
    freedom left (`known`: the variances are measured, so only when that is above 1;
    otherwise they are bounds of uncertain scale: always)."""
    weights = 1 / variance
    information = design.T @ (weights[:, None] * design)
    covariance = np.linalg.pinv(information)
    coefficients = covariance @ (design.T @ (weights * y))
    freedom = y.size - design.shape[1]
    if freedom > 0:
        dispersion = float(np.sum(weights * (y - design @ coefficients) ** 2)) / freedom
        covariance = covariance * (max(dispersion, 1.0) if known else dispersion)
    return coefficients, covariance


def _largest_per_gamma(table: pd.DataFrame, waiting: np.ndarray) -> np.ndarray:
    """The candidates worth a longer sweep: of those `waiting` (failing only by not having
    settled: drifting or cold, with no divergence, enough acceptance, a small noise ratio
    and no heat), the `SETTLING_CANDIDATES` largest step sizes of each gamma. A boolean per
    row."""
    largest = table[waiting].groupby("gamma")["step_size"].nlargest(
        SETTLING_CANDIDATES).index.get_level_values(-1)
    return np.asarray(table.index.isin(largest) & waiting)


def _candidate_grid(step_sizes, gammas) -> tuple[np.ndarray, np.ndarray]:
    """Every (step size, gamma) candidate, step sizes varying fastest."""
    if gammas.size == 0:
        raise InputError("gammas must be a non-empty list of numbers")
    grid_steps, grid_gammas = (g.ravel() for g in np.meshgrid(step_sizes, gammas))
    return grid_steps, grid_gammas


def gradient_noise_ratio(
    problem: Problem,
    params: Params,
    step_size: float,
    *,
    nbeta: float,
    sampler: SGLD | SGHMC,
    mask=None,
) -> float:
    """r(eps): minibatch gradient noise relative to the injected Langevin noise, at w*.

    One SGLD step adds (eps/2) G (n beta) (grad L_b - grad L_n), of variance per coordinate
    (eps^2 / 4) G_j^2 (n beta)^2 Var_b(g_j), to the Langevin noise of variance eps G_j; their
    ratio averaged over coordinates is

        r = (eps / 4d) sum_j G_j (n beta)^2 Var_b(g_j),
        Var_b(g_j) = Var_i(grad_j l_i(w*)) / b * (n - b) / (n - 1)   (sampling without replacement).

    G = 1 without preconditioning; for RMSprop G_j = 1 / (delta + sqrt(v_j)) with v_j the
    stationary mean square of the scaled gradient, (n beta)^2 (mean_j^2 + Var_b(g_j)); b and
    the preconditioner are `sampler`'s.
    SGHMC (`slt.samplers.SGHMC`) adds about h (n beta) (grad L_b - grad L_n) (h^2 = eps) to
    its momentum a step, against injected noise of variance 1 - e^-2a (a the friction):
    r = eps / ((1 - e^-2a) d) sum_j (n beta)^2 Var_b(g_j). With control variates its noise
    at w* is 0 (the minibatch gradient is taken relative to w*), and so is r: the sweep's
    configurational temperature sees the noise the chains meet away from w*.
    Var_i is estimated from the per-example gradients of 512 examples evenly spaced through the
    data (`slt.estimators.local.center.measure_center`). With a
    `mask` (flat booleans: a restricted run) d and the sum count the selected weights only.
    """
    if uses_control_variates(sampler):
        return 0.0  # no need to measure the centre
    measured = measure_center(problem, params)
    mean, mean_square = measured.mean, measured.mean_square
    variance = jnp.maximum(mean_square - mean**2, 0.0)
    b = min(sampler.batch_size, problem.n)
    minibatch_variance = variance / b * (problem.n - b) / max(problem.n - 1, 1)
    # the noise a step adds against the injected noise's variance: SGLD's eps / 4 (G-scaled),
    # SGHMC's eps / (1 - e^-2a)
    if isinstance(sampler, SGHMC):
        diagonal, injected = jnp.ones_like(mean), -np.expm1(-2 * sampler.friction)
    elif sampler.preconditioner == "rmsprop":
        stationary_square = nbeta**2 * (mean**2 + minibatch_variance)
        diagonal, injected = 1.0 / (RMSPROP_DAMPING + jnp.sqrt(stationary_square)), 4
    else:
        diagonal, injected = jnp.ones_like(mean), 4
    per_weight = diagonal * minibatch_variance
    if mask is not None:
        per_weight = per_weight[np.asarray(mask)]
    return float(step_size / injected * nbeta**2 * jnp.mean(per_weight))


def _assess(trace, chains, num_warmup, nbeta, min_acceptance, max_temperature_deviation,
            sampler) -> dict:
    """The criterion's checks 1, 2, 3 and 5 for one candidate's chains, whether they settled,
    and whether only settling keeps them from passing ("waiting")."""
    diverged = bool(np.any(trace.diverged_at[chains] >= 0))
    values = nbeta * (trace.loss[chains, num_warmup:] - trace.center_loss[chains, num_warmup:])
    acceptance = np.exp(trace.log_acceptance[chains, num_warmup:])
    # NaN where the sampler has no MALA check (SGHMC): the check does not apply; a chain
    # that measures none for another reason (it diverged) has failed already
    mala = (float(np.nanmean(acceptance)) if np.isfinite(acceptance).any() else
            0.0 if sampler.has_mala_check else float("nan"))
    acceptable = np.isnan(mala) or mala >= min_acceptance
    temperature, temperature_se = configurational_temperature(
        trace.gradient_product[chains, num_warmup:], trace.laplacian[chains, num_warmup:]
    )
    if diverged or not np.all(np.isfinite(values)):
        return {
            "llc": np.nan,
            "se": np.nan,
            "mala_acceptance": mala,
            "drift_z": np.nan,
            "temperature": temperature,
            "temperature_se": temperature_se,
            "diverged": True,
            "settled": False,
            "passes": False,
            "waiting": False,
        }
    drift_z = trace_drift(values)
    allowance = max_temperature_deviation + 2 * temperature_se
    temperate = abs(temperature - 1) <= allowance
    # a temperature that cannot be measured (mean Laplacian not positive) is a chain not
    # yet at equilibrium, as is a cold one
    settled = bool(not drifting(values, drift_z) and np.isfinite(temperature)
                   and not 1 - temperature > allowance)
    hot = temperature - 1 > allowance
    return {
        "llc": float(values.mean()),
        "se": trace_statistics(values)[1],
        "mala_acceptance": mala,
        "drift_z": drift_z,
        "temperature": temperature,
        "temperature_se": temperature_se,
        "diverged": False,
        "settled": settled,
        "passes": bool(acceptable and settled and temperate),
        # what only settling keeps from passing (the noise criterion is checked by the caller)
        "waiting": bool(acceptable and not settled and not hot),
    }
