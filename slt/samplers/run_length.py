"""How long local chains run: the statistics of their traces, and the plan's "auto" lengths.

A run's per-draw estimates x_t = n beta (L_b(w_t) - L_b(w*)) (chain, draw) say when the run has
done its job. `RunPlan(num_warmup="auto", num_samples="auto")`, the default, lets them decide,
after every chunk of steps (`run_chains`):

- **Warmup, by a sequential test of stationarity.** The warmup ends at the first step b of a
  grid (every `WARMUP_GRID` steps, coarser as the run grows so that at most about 20 are
  tried; at least the exact samplers' adaptation window) after which the draws so far,
  x[:, b:t], look stationary across chains: split R-hat (rank-normalised, ArviZ) at most
  `STATIONARY_RHAT` (1.05: Vehtari et al.'s 1.01 presumes an ESS of 400 or more, and at the
  ESS of 70-150 of a short run of a 2-parameter model a stationary run's R-hat wanders to
  1.04) and no drift between their halves (more than 3 standard errors of the later half and
  1%: `_rising`, which is what catches a relaxation: R-hat compares chains, and chains
  relaxing alike agree). The chains start apart
  (`RunPlan(start="dispersed")`), so chains that have not yet forgotten their starts
  disagree and R-hat sees it. The test is repeated as the run
  grows and b is re-chosen each time, so a b that looked stationary on a short window but not
  on a longer one moves later.
- **Draws, by precision.** After b the run continues until lambda_hat's standard error is at
  most `target_se` (5%) of |lambda_hat| with at least `MIN_DRAWS` draws per chain, and, with
  `RunPlan(min_ess=m)`, until the chains' distance from w* after b has a bulk ESS of at least
  m over all chains (the estimators that observe example losses need it: their statistics
  mix as slowly as the weights, not as the minibatch loss, whose ESS is near its draws).
- **Floors.** The warmup is at least `MIN_WARMUP` (1000) steps and the draws at least
  `MIN_DRAWS` (1000), the earlier fixed default's lengths: a test on the chains' own traces
  cannot see a direction that relaxes more slowly than its window in every chain alike (on a
  tanh 2-4-1 teacher, chains at a noise-limited step passed R-hat 1.01 and the drift test
  after 1000 steps with lambda_hat a third of d/2), so the run is never shorter than it was.
- **A budget.** Whatever happens, a run stops after `max_steps` steps per chain; the result
  then says which goal was not reached (`RunLength.reason`), and its diagnostics warn.

With several parts (`llc_table`, trajectories) every part is judged on its own chains; the run
stops when every part is done, and each part keeps its own warmup and all its draws after it.
A fixed plan (numbers for both) runs exactly num_warmup + num_samples steps, as before; a
fixed num_warmup with num_samples="auto" adapts only the draws, and the reverse only the
warmup. The decision is a function of the recorded traces alone, so a checkpointed run resumes
to the same decision.
"""

from __future__ import annotations

from typing import NamedTuple

import arviz as az
import numpy as np

__all__ = [
    "EXACT_ADAPTATION",
    "MAX_DRIFT",
    "MIN_DRAWS",
    "MIN_WARMUP",
    "MIN_RELATIVE_DRIFT",
    "RunLength",
    "STATIONARY_RHAT",
    "WARMUP_GRID",
    "decide_run_length",
    "drifting",
    "trace_drift",
    "trace_statistics",
]

# lambda_hat moving between the halves of the run by more than this many standard errors
# (`trace_drift`) earns a warning and fails a calibration candidate.
MAX_DRIFT = 3.0
# ... and by more than this fraction of lambda_hat: at lambda ~ 1e4 a standard error is ~0.1%
# of lambda_hat, and a statistically clear drift can be far too small to matter.
MIN_RELATIVE_DRIFT = 0.01
# The "auto" warmup ends on a multiple of this many steps.
WARMUP_GRID = 100
# Split R-hat of the draws after the warmup at most this: stationary.
STATIONARY_RHAT = 1.05
# An "auto" run warms up at least this many steps and keeps at least this many draws per chain
# (the earlier fixed default's lengths: an "auto" run is never shorter than it was).
MIN_WARMUP = 1000
MIN_DRAWS = 1000
# An exact sampler with an "auto" warmup adapts its step size (and mass) over this many steps.
EXACT_ADAPTATION = 1000


def trace_statistics(values: np.ndarray) -> tuple[float, float, float, float]:
    """Mean, standard error (sd / sqrt(ESS)), bulk ESS and R-hat of a (chain, draw) array."""
    chains, draws = values.shape
    ess = float(az.ess(values)) if draws >= 4 else float(values.size)
    rhat = float(az.rhat(values)) if chains >= 2 and draws >= 4 else float("nan")
    std_error = float(values.std() / np.sqrt(max(ess, 1.0)))
    return float(values.mean()), std_error, ess, rhat


def trace_drift(values: np.ndarray) -> float:
    """How far the mean of a (chain, draw) trace moves between the two halves of the run.

    |mean(second half) - mean(first half)| in standard errors of that difference (each
    half's standard error from its own ESS, `trace_statistics`). A stationary trace gives
    about |N(0, 1)|; chains that are still spreading out from w* (too short a warmup for the
    step size) give a rising lambda_hat and a large value. NaN with fewer than 8 draws.
    """
    first, second = _halves(values)
    if first.shape[1] < 4:
        return float("nan")
    se_first, se_second = (trace_statistics(part)[1] for part in (first, second))
    return float(abs(second.mean() - first.mean()) / np.hypot(se_first, se_second))


def drifting(values: np.ndarray, drift_z: float) -> bool:
    """Whether a (chain, draw) trace has not settled: its mean moves between the halves of
    the run by more than MAX_DRIFT standard errors (`drift_z`, its `trace_drift`) *and* by
    more than MIN_RELATIVE_DRIFT of its mean."""
    first, second = _halves(values)
    change = abs(second.mean() - first.mean())
    return bool(drift_z > MAX_DRIFT and change > MIN_RELATIVE_DRIFT * abs(values.mean()))


def _halves(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and the second half of a (chain, draw) trace's draws (equal lengths)."""
    half = values.shape[1] // 2
    return values[:, :half], values[:, half : 2 * half]


class RunLength(NamedTuple):
    """Where a part's kept draws begin (`num_warmup`), how many it keeps (`num_samples`), and
    why the run stopped where it did (`reason`, words for the result)."""

    num_warmup: int
    num_samples: int
    reason: str


def decide_run_length(values: np.ndarray, plan, *, min_warmup: int = 0,
                      final: bool = False, distance: np.ndarray | None = None
                      ) -> RunLength | None:
    """The `RunLength` of one part from its per-draw estimates so far (`values`, (chain,
    steps done)) under `plan` (a `slt.samplers.RunPlan`), or None while the part needs more
    steps (module doc). `min_warmup`: the least warmup (an exact sampler's adaptation).
    `final`: the run has stopped (its budget spent, or other parts done): decide now.
    `distance`: the chains' distance from w* (like `values`), for `plan.min_ess`."""
    done = values.shape[1]
    finite = np.all(np.isfinite(values), axis=1)  # diverged chains say nothing
    values = values[finite]
    distance = None if distance is None or not plan.min_ess else distance[finite]
    if values.shape[0] == 0:
        return RunLength(min(done, min_warmup), done - min(done, min_warmup),
                         "every chain diverged")
    goal = f"the standard error reached {plan.target_se:.0%} of lambda_hat" + (
        "" if distance is None else f" and the distance from w* an ESS of {plan.min_ess}")
    warmup = _stationary_start(values, max(min_warmup, MIN_WARMUP)) if (
        plan.num_warmup == "auto") else (
        plan.num_warmup if done > plan.num_warmup else None)
    if warmup is not None:
        kept = values[:, warmup:]
        if plan.num_samples != "auto":
            if kept.shape[1] >= plan.num_samples:
                return RunLength(warmup, plan.num_samples, "the planned draws were made")
        elif kept.shape[1] >= MIN_DRAWS and _precise(kept, plan.target_se) and (
                distance is None or _effective_draws(distance[:, warmup:]) >= plan.min_ess):
            return RunLength(warmup, kept.shape[1], goal)
    if not final:
        return None
    if warmup is None:
        warmup = max(min_warmup, done // 2) if plan.num_warmup == "auto" else min(
            plan.num_warmup, done)
        return RunLength(warmup, done - warmup, f"the budget of {done} steps per chain was "
                         "spent before the chains looked stationary")
    return RunLength(warmup, done - warmup,
                     f"the budget of {done} steps per chain was spent before {goal}")


def _stationary_start(values: np.ndarray, min_warmup: int) -> int | None:
    """The first step of the grid (from `min_warmup`) after which the draws look stationary
    with at least MIN_DRAWS of them (module doc), or None."""
    done = values.shape[1]
    grid = WARMUP_GRID * max(1, done // (20 * WARMUP_GRID))  # at most ~20 candidates
    first = -(-min_warmup // grid) * grid
    for start in range(first, done - MIN_DRAWS + 1, grid):
        kept = values[:, start:]
        if not np.all(np.isfinite(kept)):
            continue
        rhat = trace_statistics(kept)[3]
        if (np.isnan(rhat) or rhat <= STATIONARY_RHAT) and not _rising(kept):
            return start
    return None


def _rising(values: np.ndarray) -> bool:
    """`drifting`, with both halves' standard errors taken from the second half's: a trend
    in the first half inflates that half's autocorrelation time, and with it its own
    standard error, so that measured against itself a relaxation hides (a linear relaxation
    over a fifth of the window: z = 2 against itself, 9 against the second half)."""
    first, second = _halves(values)
    if first.shape[1] < 4:
        return False
    z = abs(second.mean() - first.mean()) / (np.sqrt(2) * trace_statistics(second)[1])
    return drifting(values, z)


def _effective_draws(values: np.ndarray) -> float:
    """Bulk ESS of a (chain, draw) trace over all its chains (`trace_statistics`)."""
    return trace_statistics(values)[2]


def _precise(kept: np.ndarray, target_se: float) -> bool:
    """Whether the mean of `kept` has a standard error at most `target_se` of its size."""
    mean, std_error, _, _ = trace_statistics(kept)
    return bool(std_error <= target_se * abs(mean))
