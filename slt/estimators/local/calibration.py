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
The chosen step size is the **largest passing candidate** (`Calibration(choice="largest")`,
the default: fastest mixing among the accurate ones). A candidate grid step is a factor 2.15,
so where the passing set's edge is decided by noise the choice moves by that factor between
keys. `Calibration(choice="fitted")` reads the step from lines fitted through every usable
candidate instead (`fitted_step_size`): the largest step whose predicted temperature is within
3% of 1, whose predicted MALA acceptance is at least `min_acceptance` and whose noise ratio
passes. The sweep still needs one passing candidate, and the warmup `llc` needs is the
longest any passing candidate needed.

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
from slt.samplers.config import SGLD, RunPlan
from slt.samplers.local_chains import ChainTargets, configurational_temperature, run_chains
from slt.samplers.sgld import RMSPROP_DAMPING
from slt.validation import InputError

__all__ = [
    "CalibrationResult",
    "default_step_sizes",
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
# Calibration(choice="fitted") chooses the step whose fitted temperature is 1 + this.
FITTED_TEMPERATURE = 0.03
# ... by the temperature's fitted line only when its slope is this many standard errors above 0.
SLOPE_Z = 2.0


def default_step_sizes(nbeta: float, preconditioner: str | None,
                       noise_limit: float = np.inf) -> np.ndarray:
    """The candidate grid: 13 log-spaced values over four decades.

    Without preconditioning the stable step size scales like 1 / (n beta * curvature of L_n):
    the grid spans 1e-4 / (n beta) .. 1 / (n beta). RMSprop divides the gradient by its own
    magnitude, so its steps are in parameter units: 1e-7 .. 1e-3. When fewer than
    `USABLE_CANDIDATES` of these lie at or below `noise_limit` (the step whose gradient-noise
    ratio is the criterion's largest: wide networks with large per-example gradients), the
    four decades end at `noise_limit` instead, so that the sweep is not spent on steps that
    fail the noise criterion whatever their chains do.
    """
    grid = np.logspace(-7, -3, 13) if preconditioner == "rmsprop" else (
        np.logspace(-4, 0, 13) / nbeta)
    if np.sum(grid <= noise_limit) < USABLE_CANDIDATES:
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
    """

    step_size: float
    gamma: float
    table: pd.DataFrame = field(repr=False)
    criterion: str = field(repr=False, default=__doc__)
    num_warmup: int = 0
    gradients: int = 0

    def summary(self) -> pd.DataFrame:
        """One row per candidate (step size, gamma): `table` with a column ``chosen`` that
        marks the candidate picked (a fitted step size, `Calibration(choice="fitted")`: the
        candidate nearest to it)."""
        distance = np.abs(np.log(self.table["step_size"].to_numpy(float) / self.step_size))
        distance[self.table["gamma"].to_numpy() != self.gamma] = np.inf
        return self.table.assign(chosen=distance == distance.min())

    def to_xarray(self) -> xr.Dataset:
        """The sweep as an xarray Dataset: the columns of `summary` (step_size, gamma, llc,
        se, mala_acceptance, drift_z, temperature, temperature_se, noise_ratio, diverged,
        passes, chosen) as variables over dim ``candidate``; attrs criterion (in words)."""
        return xr.Dataset.from_dataframe(self.summary().rename_axis("candidate")).assign_attrs(
            criterion=self.criterion)

    def plot(self, **kwargs):
        """lambda_hat and MALA acceptance against step size, the chosen one marked."""
        from slt.plots.llc import plot_calibration

        return plot_calibration(self, **kwargs)

    def __repr__(self) -> str:
        passing = int(self.table["passes"].sum())
        return (
            f"CalibrationResult(step_size={self.step_size:.3g}, gamma={self.gamma:g}, "
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
      >>> found.step_size in (1e-3, 1e-2), len(found.table)
      (True, 2)
    """
    if not isinstance(sampler, SGLD) or sampler.calibration is None:
        raise InputError(f"llc_calibrate chooses SGLD's step size: give sampler=SGLD() (step "
                         f"size 'auto') or SGLD(step_size=Calibration(...)), got {sampler!r}")
    posterior = check_local_run(problem, params, key, posterior, sampler)
    sweep_options = sampler.calibration
    gammas = np.asarray([posterior.gamma] if sweep_options.gammas is None
                        else sweep_options.gammas, dtype=float)
    mask = restriction_mask(problem, params, posterior.restrict_to)
    nbeta = posterior.nbeta
    noise_per_step = gradient_noise_ratio(problem, params, 1.0, nbeta=nbeta, sampler=sampler,
                                          mask=mask)
    step_sizes = sweep_options.step_sizes
    if step_sizes is None:
        noise_limit = (sweep_options.max_noise_ratio / noise_per_step if noise_per_step > 0
                       else np.inf)
        step_sizes = default_step_sizes(nbeta, sampler.preconditioner, noise_limit)
    step_sizes = np.asarray(step_sizes, dtype=float)
    min_acceptance = sweep_options.min_acceptance
    max_noise_ratio = sweep_options.max_noise_ratio
    max_temperature_deviation = sweep_options.max_temperature_deviation
    chains_per_candidate = sweep_options.chains_per_candidate
    num_warmup, num_samples = sweep_options.num_warmup, sweep_options.num_samples
    sweeping = replace(sampler, mala_every=CALIBRATION_MALA_EVERY, extrapolate=False)
    grid_steps, grid_gammas = _candidate_grid(step_sizes, gammas)

    spent = [0]

    def sweep(sweep_key, steps, sweep_gammas, warmup, samples
              ) -> tuple[pd.DataFrame, np.ndarray]:
        """Every candidate (steps[i], sweep_gammas[i]) run and assessed, in one program: its
        table rows, and whether each fails only by not having settled."""
        spent[0] += (steps.size * chains_per_candidate * (warmup + samples)
                     * min(sampler.batch_size, problem.n))
        trace = run_chains(
            problem, params, sweep_key,
            ChainTargets(step_size=steps, gamma=sweep_gammas, nbeta=np.full(steps.size, nbeta),
                         include_prior=posterior.include_prior,
                         mask=None if mask is None else np.broadcast_to(
                             mask, (steps.size, mask.size))),
            sampler=sweeping,
            plan=RunPlan(num_chains=chains_per_candidate, num_warmup=warmup,
                         num_samples=samples, progress=progress),
            description="llc calibration",
        )
        rows = []
        for index, (step_size, gamma_value) in enumerate(zip(steps, sweep_gammas, strict=True)):
            chains = slice(index * chains_per_candidate, (index + 1) * chains_per_candidate)
            row = _assess(trace, chains, warmup, nbeta, min_acceptance, max_temperature_deviation)
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
    passing = table[table["passes"]]
    if passing.empty:
        raise ValueError(
            "no candidate passes the calibration criterion (divergence, MALA acceptance >= "
            f"{min_acceptance}, stationarity, noise ratio <= {max_noise_ratio}, |temperature - 1| "
            f"<= {max_temperature_deviation} + 2 se); widen "
            "step_sizes or gammas, or raise batch_size:\n" + table.to_string(index=False)
        )
    best_gamma = passing["gamma"].min()
    chosen = passing[passing["gamma"] == best_gamma].sort_values("step_size").iloc[-1]
    step_size = float(chosen["step_size"])
    if sweep_options.choice == "fitted":
        fitted = fitted_step_size(table[table["gamma"] == best_gamma], min_acceptance,
                                  max_noise_ratio / noise_per_step if noise_per_step > 0
                                  else np.inf)
        step_size = step_size if fitted is None else fitted
    return CalibrationResult(step_size=step_size, gamma=float(best_gamma), table=table,
                             num_warmup=int(passing["num_warmup"].max()), gradients=spent[0])


def fitted_step_size(table: pd.DataFrame, min_acceptance: float, noise_limit: float
                     ) -> float | None:
    """The step size `Calibration(choice="fitted")` chooses from one gamma's candidates.

    Usable candidates: no divergence, settled (neither drifting nor cold), a measured
    temperature. Two lines through them, both fitted over every usable candidate so that no
    one short run decides:

      T(eps) - 1 = a eps           (weighted least squares through the origin, weights
                                    1 / se(T)^2: SGLD's heating, discretisation and minibatch
                                    noise alike, vanishes with eps and grows linearly with it
                                    at small eps; measured on the tanh network at f = 0:
                                    (T - 1) / eps = 750, 750, 706, 706 over 2e-4 .. 1.7e-3),
      log(1 - acc(eps)) = c + p log eps   (least squares, over candidates with 1 - acc in
                                    (1e-6, 0.9)).

    The temperature's line counts only where its slope is more than SLOPE_Z (2) of its
    standard errors above 0: short runs of a model with few weights measure T to +-0.15, and a
    line through such noise would move the step by a decade from key to key (measured on a
    ReLU 2-4-1 network). The step is the largest whose predicted T - 1 is at most
    FITTED_TEMPERATURE (3%), whose
    predicted acceptance is at least `min_acceptance`, and which is at most `noise_limit` (the
    noise ratio's bound), clipped to the range of the usable candidates (the smallest settled
    one: smaller steps have not been seen to settle; the largest: larger ones were not seen to
    be safe). None with fewer than 3 usable candidates (the caller keeps the largest passing
    one).
    """
    usable = table[~table["diverged"] & table["settled"] & np.isfinite(table["temperature"])
                   & (table["temperature_se"] > 0)]
    if len(usable) < 3:
        return None
    eps = usable["step_size"].to_numpy(float)
    weights = usable["temperature_se"].to_numpy(float) ** -2
    information = np.sum(weights * eps**2)
    slope = np.sum(weights * eps * (usable["temperature"].to_numpy(float) - 1)) / information
    heating = slope > SLOPE_Z / np.sqrt(information)  # measured, not noise
    limits = [noise_limit, FITTED_TEMPERATURE / slope if heating else np.inf]
    rejection = 1 - usable["mala_acceptance"].to_numpy(float)
    fit = (rejection > 1e-6) & (rejection < 0.9)
    if fit.sum() >= 2:
        power, offset = np.polyfit(np.log(eps[fit]), np.log(rejection[fit]), 1)
        if power > 0:
            limits.append(float(np.exp((np.log(1 - min_acceptance) - offset) / power)))
    return float(np.clip(min(limits), eps.min(), eps.max()))


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
    sampler: SGLD,
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
    the preconditioner are `sampler`'s (an `SGLD`).
    Var_i is estimated from the per-example gradients of 512 examples evenly spaced through the
    data (`slt.estimators.local.center.measure_center`). With a
    `mask` (flat booleans: a restricted run) d and the sum count the selected weights only.
    """
    measured = measure_center(problem, params)
    mean, mean_square = measured.mean, measured.mean_square
    variance = jnp.maximum(mean_square - mean**2, 0.0)
    b = min(sampler.batch_size, problem.n)
    minibatch_variance = variance / b * (problem.n - b) / max(problem.n - 1, 1)
    if sampler.preconditioner == "rmsprop":
        stationary_square = nbeta**2 * (mean**2 + minibatch_variance)
        diagonal = 1.0 / (RMSPROP_DAMPING + jnp.sqrt(stationary_square))
    else:
        diagonal = jnp.ones_like(mean)
    per_weight = diagonal * minibatch_variance
    if mask is not None:
        per_weight = per_weight[np.asarray(mask)]
    return float(step_size / 4 * nbeta**2 * jnp.mean(per_weight))


def _assess(trace, chains, num_warmup, nbeta, min_acceptance, max_temperature_deviation) -> dict:
    """The criterion's checks 1, 2, 3 and 5 for one candidate's chains, whether they settled,
    and whether only settling keeps them from passing ("waiting")."""
    diverged = bool(np.any(trace.diverged_at[chains] >= 0))
    values = nbeta * (trace.loss[chains, num_warmup:] - trace.center_loss[chains, num_warmup:])
    acceptance = np.exp(trace.log_acceptance[chains, num_warmup:])
    mala = float(np.nanmean(acceptance)) if np.isfinite(acceptance).any() else 0.0
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
        "passes": bool(mala >= min_acceptance and settled and temperate),
        # what only settling keeps from passing (the noise criterion is checked by the caller)
        "waiting": bool(mala >= min_acceptance and not settled and not hot),
    }
