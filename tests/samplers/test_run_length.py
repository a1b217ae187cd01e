"""The "auto" run length (`slt.samplers.run_length`) on traces whose answer is known."""

import numpy as np
import pytest

import slt
from slt.samplers.run_length import MIN_DRAWS, WARMUP_GRID, decide_run_length

AUTO = slt.RunPlan()


def _trace(chains=4, steps=3000, transient=0, seed=0, level=10.0, sd=3.0, starts=None):
    """Independent N(level, sd^2) draws per chain; the first `transient` steps relax
    linearly from the chains' `starts` (default: 0) to the level."""
    rng = np.random.default_rng(seed)
    values = level + sd * rng.standard_normal((chains, steps))
    if transient:
        starts = np.zeros(chains) if starts is None else np.asarray(starts, float)
        ramp = np.linspace(0.0, 1.0, transient)
        values[:, :transient] = starts[:, None] * (1 - ramp) + level * ramp + values[
            :, :transient] - level
    return values


def test_the_warmup_ends_after_the_transient_and_the_draws_at_the_target():
    values = _trace(steps=5000, transient=1600)  # relaxing for longer than the warmup's floor
    assert decide_run_length(values[:, :2000], AUTO) is None  # still relaxing: go on
    length = decide_run_length(values, AUTO)
    # most of the relaxation is left out, and what is kept is the level within its error
    assert length.num_warmup % WARMUP_GRID == 0 and 1300 <= length.num_warmup <= 2200
    kept = values[:, length.num_warmup:]
    se = kept.std() / np.sqrt(kept.size)
    assert abs(kept.mean() - 10.0) < 3 * se and se <= 0.05 * kept.mean()
    assert length.num_samples == values.shape[1] - length.num_warmup
    assert "standard error reached 5%" in length.reason


def test_a_fixed_plan_is_kept_and_a_budget_says_what_was_missed():
    values = _trace()
    fixed = slt.RunPlan(num_warmup=100, num_samples=500)
    assert decide_run_length(values[:, :550], fixed) is None
    assert decide_run_length(values, fixed) == (100, 500, "the planned draws were made")
    # a stationary trace: the floors, 1000 warmup steps and 1000 draws, and no more
    assert decide_run_length(values[:, :1999], AUTO) is None
    assert decide_run_length(values[:, :2000], AUTO)[:2] == (1000, 1000)
    noisy = _trace(sd=300.0)  # se 5% of 10 needs ~ 3.6e6 draws
    assert decide_run_length(noisy, AUTO) is None
    spent = decide_run_length(noisy, AUTO, final=True)
    assert spent.num_samples >= MIN_DRAWS and "before the standard error" in spent.reason
    apart = _trace(starts=[0.0, 0.0, 0.0, 0.0], transient=3000)  # never stationary
    assert "before the chains looked stationary" in decide_run_length(
        apart, AUTO, final=True).reason


def test_diverged_chains_are_left_out_and_all_diverged_stops_at_once():
    values = _trace()
    values[1, 50:] = np.nan
    assert decide_run_length(values, AUTO) == decide_run_length(np.delete(values, 1, 0), AUTO)
    assert decide_run_length(np.full((2, 100), np.nan), AUTO).reason == "every chain diverged"


def test_min_ess_draws_until_a_slow_trace_has_enough_effective_draws():
    """A slowly mixing distance trace (AR(1), rho = 0.99: ESS about draws / 200) keeps a run
    whose lambda trace is already precise going until its ESS reaches `min_ess`."""
    values = _trace(steps=10_000)
    rng = np.random.default_rng(1)
    distance = np.empty((4, 10_000))
    distance[:, 0] = rng.standard_normal(4)
    for t in range(1, 10_000):
        distance[:, t] = 0.99 * distance[:, t - 1] + np.sqrt(1 - 0.99**2) * rng.standard_normal(4)
    plan = slt.RunPlan(min_ess=100)
    assert decide_run_length(values[:, :2000], AUTO, distance=distance[:, :2000])[:2] == (
        1000, 1000)  # min_ess 0: the distance is not consulted
    assert decide_run_length(values[:, :2000], plan, distance=distance[:, :2000]) is None
    length = decide_run_length(values, plan, distance=distance)
    assert "ESS of 100" in length.reason
    spent = decide_run_length(values[:, :2000], plan, distance=distance[:, :2000], final=True)
    assert "before the standard error reached 5% of lambda_hat and the distance" in spent.reason
    with pytest.raises(ValueError, match="min_ess"):
        slt.RunPlan(min_ess=-1)

