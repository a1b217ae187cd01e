"""The calibrated step read from curves fitted through every candidate (`fitted_step_size`),
on sweeps whose curves are known exactly and on noisy copies of them (coverage of the
reported interval). On a Gaussian posterior, where a Langevin step's temperature is known in
closed form: tests/estimators/test_llc.py."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from slt.estimators.local.calibration import (
    FIT_POINTS_PER_DECADE,
    choose_step_size,
    default_step_sizes,
)
from slt.samplers import Calibration

GRID = 10 ** (1 / FIT_POINTS_PER_DECADE)  # the resolution of the fitted step
FITTED, LARGEST = Calibration(choice="fitted"), Calibration(choice="largest")
DELTA = FITTED.max_temperature_deviation


def _sweep(heating=500.0, mala_scale=2e-3, power=1.5, se=0.02):
    """13 candidates whose temperature is 1 / (1 - heating eps) and whose MALA acceptance is
    2 Phi(-s / 2) with s = (eps / mala_scale)^power, exactly; `passes` by the old rule."""
    eps = np.logspace(-6, -2, 13)
    temperature = 1 / (1 - np.minimum(heating * eps, 0.9))
    acceptance = 2 * norm.cdf(-((eps / mala_scale) ** power) / 2)
    return pd.DataFrame({
        "step_size": eps, "gamma": 1.0, "num_warmup": 500, "num_samples": 1000,
        "temperature": temperature, "temperature_se": se, "mala_acceptance": acceptance,
        "diverged": False,
        "passes": (np.abs(temperature - 1) <= DELTA + 2 * se) & (acceptance >= 0.9),
    })


def test_the_fitted_step_is_the_tightest_bound_solved_exactly():
    # the temperature binds: heating eps = delta / (1 + delta)
    step, gamma, interval, limit = choose_step_size(_sweep(), FITTED, 0.0)
    assert limit == "temperature" and gamma == 1.0
    assert step == pytest.approx(DELTA / (1 + DELTA) / 500, rel=GRID - 1)
    assert interval[0] <= step <= interval[1] and interval[1] / interval[0] < 1.2
    # the MALA acceptance binds: s(eps) = -2 Phi^-1(0.45)
    step, _, _, limit = choose_step_size(_sweep(heating=1.0, mala_scale=5e-4), FITTED, 0.0)
    exact = 5e-4 * (-2 * norm.ppf(FITTED.min_acceptance / 2)) ** (1 / 1.5)
    assert limit == "MALA acceptance" and step == pytest.approx(exact, rel=GRID - 1)
    # the noise ratio binds: r = rho eps = max_noise_ratio
    step, _, interval, limit = choose_step_size(_sweep(), FITTED, 0.02 / 5e-5)
    assert limit == "noise ratio" and step == pytest.approx(5e-5, rel=GRID - 1)
    # "largest" keeps the old rule: the largest passing candidate
    sweep = _sweep()
    step, *_ = choose_step_size(sweep, LARGEST, 0.0)
    assert step == sweep.loc[sweep["passes"], "step_size"].max()


def test_the_fitted_step_does_not_depend_on_the_order_of_the_rows():
    sweep = _sweep(se=0.1).assign(temperature=lambda t: t["temperature"] * np.linspace(
        0.95, 1.05, 13))
    assert choose_step_size(sweep, FITTED, 0.0) == choose_step_size(
        sweep.sample(frac=1.0, random_state=0), FITTED, 0.0)


def test_the_interval_covers_the_exact_step_over_noisy_sweeps():
    """200 sweeps whose temperatures carry N(0, se^2) noise: the interval (INTERVAL_Z = 2 se
    of the fit, its ends on the fitted grid) holds the exact step in at least 95% of them,
    the steps chosen vary far less than the grid's factor 2.15 (the noise averages over
    candidates), and their median is the exact step (measured: 200 of 200 covered, 90%/10%
    quantile ratio 1.12, median 0.98 of exact)."""
    exact = DELTA / (1 + DELTA) / 500
    rng = np.random.default_rng(0)
    steps, covered = [], 0
    for _ in range(200):
        sweep = _sweep(se=0.1)
        sweep["temperature"] += 0.1 * rng.standard_normal(13)
        step, _, (low, high), _ = choose_step_size(sweep, FITTED, 0.0)
        steps.append(step)
        covered += low / GRID <= exact <= high * GRID
    # 95% expected; 200 draws: binomial sd 1.5%
    assert covered / 200 >= 0.9
    assert np.quantile(steps, 0.9) / np.quantile(steps, 0.1) < 2.0
    # within the fitted grid's spacing (2.3%) and a few se of the median (0.3%) of exact
    assert np.median(steps) == pytest.approx(exact, rel=0.03)


def test_the_fitted_default_grid_reaches_one_factor_past_the_noise_limit():
    grid = default_step_sizes(100.0, None, 1e-4, "fitted")
    assert grid.size == 13 and np.isclose(grid, 1e-4).sum() == 1
    assert grid[-1] == pytest.approx(1e-4 * 10 ** (1 / 3))
    np.testing.assert_allclose(default_step_sizes(100.0, None, 1.0, "fitted"),
                               default_step_sizes(100.0, None))  # a limit above the grid
