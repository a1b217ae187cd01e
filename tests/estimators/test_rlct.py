"""lambda from temperatures: regular and singular models, the regression, the BIC beside it."""

import warnings
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

from slt import NUTS, Tempering, models, truth
from slt.estimators import rlct
from slt.estimators.evidence.rlct import (
    _offset,
    _regression,
    inverse_temperatures,
    local_slopes,
    range_warning,
    slope_warning,
    temperatures,
)
from slt.validation import InputError

from .evidence_cases import conjugate_regression, product_model, regression_fit

matplotlib.use("Agg")


def test_regular_model_gives_half_d():
    """Four temperatures, one chain each: the configuration of test_wbic (compiled once)."""
    case = conjugate_regression()
    fit = regression_fit(prior=False)
    result = rlct(case.problem, jax.random.key(1), fit=fit, multipliers=(0.5, 1, 2, 4),
                  sampler=NUTS(num_chains=1), progress=False)
    assert abs(result.rlct - 1.5) < 4 * result.std_error
    assert abs(result.two_temperature - 1.5) < 4 * result.two_temperature_std_error
    assert result.multiplicity == 1 and result.multiplicity_interval[0] == 1
    # each E_beta[n L_n] against the closed form
    for beta, mean, se in zip(result.betas, result.expected_nll, result.expected_nll_std_error,
                              strict=True):
        assert abs(mean - case.expected_nll(beta)) < 4 * se
    log_n = np.log(case.problem.n)
    assert result.singular_bic == pytest.approx(-fit.loglik + result.rlct * log_n)
    assert result.bic == pytest.approx(-fit.loglik + 1.5 * log_n)
    assert result.wbic().beta == pytest.approx(1 / log_n)
    assert len(result.summary()) == 4 and "RLCTResult" in repr(result)
    assert result.plot() is not None
    posterior = result.to_inference_data().posterior  # NUTS keeps positions: sites stack too
    np.testing.assert_array_equal(posterior["beta"].values, result.betas)
    assert posterior.data_vars
    for name, draws in posterior.data_vars.items():
        assert draws.dims[:3] == ("chain", "draw", "beta")
        np.testing.assert_array_equal(
            draws.isel(beta=2).values, result.wbic_results[2].inference_data.posterior[name])


def test_regression_recovers_known_coefficients():
    betas = np.array([0.05, 0.1, 0.2, 0.4, 0.8])
    coefficients, covariance, chi2 = _regression(betas, 1400 + 0.5 / betas, np.full(5, 0.1))
    np.testing.assert_allclose(coefficients, [1400, 0.5], rtol=1e-9)
    assert np.all(np.diag(covariance) > 0) and chi2 == pytest.approx(0, abs=1e-12)
    per_chain, _, _ = _regression(betas, np.stack([1400 + 0.5 / betas, 1 + 2 / betas]),
                                  np.full(5, 0.1))
    np.testing.assert_allclose(per_chain, [[1400, 0.5], [1, 2]], rtol=1e-9)


@pytest.mark.slow
def test_product_model_lambda_within_thirty_percent_of_a_half():
    """Truth ab = 0 (lambda = 1/2, m = 2) at n = 1000. The multiplicity term matters: with exact
    expectations the two-temperature estimator gives 0.33 here, the three-term fit 0.44."""
    case = product_model()
    result = rlct(case.problem, jax.random.key(3), multipliers=np.geomspace(0.25, 4, 9),
                  sampler=NUTS(num_samples=4000, target_acceptance=0.95), progress=False)
    assert abs(result.rlct - 0.5) < 0.3 * 0.5
    assert result.std_error < 0.06


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="at least 3 distinct"):
        rlct(problem, jax.random.key(0), multipliers=(1.0, 2.0))
    with pytest.raises(ValueError, match="n beta > e"):
        rlct(problem, jax.random.key(0), betas=(0.001, 0.1, 1.0))


def test_out_of_range_warning_needs_more_than_two_standard_errors():
    """lambda = d/2 exactly is right at the edge: an estimate 1.2 se above it (as the tempered
    path gave on conjugate regression) is no evidence of bad draws; 4.5 se above it is."""
    assert range_warning(1.522, 0.019, 3) is None
    assert range_warning(-0.03, 0.02, 3) is None
    assert "outside [0, d/2 = 2.5]" in range_warning(2.59, 0.02, 5)
    assert "outside" in range_warning(-0.1, 0.02, 5)


def test_temperatures_above_one_on_the_smc_path_get_a_clear_error():
    """At n = 50 the multiplier 4, given, is beta = 4 / log 50 = 1.02, which the tempered
    path (beta from 0 to 1) cannot reach: the error says so and what to do, instead of
    complaining about waypoints the user never passed."""
    spec = models.linear_regression(1)
    problem = spec.problem(spec.simulate(jax.random.key(0), {"w": jnp.ones(1)}, 50))
    with pytest.raises(InputError, match=r"cannot reach beta = 1.02.*sampler=NUTS\(\)"):
        rlct(problem, jax.random.key(1), multipliers=(0.25, 0.5, 1, 2, 4), progress=False)


def test_default_temperatures_lie_in_the_admissible_range_at_every_n():
    """The default window: five distinct temperatures with 3 <= n beta and beta <= 1 at every
    n >= 4, unchanged (c_j / log n) from n = 55 on."""
    for n in range(4, 2000):
        betas = inverse_temperatures(n)
        assert betas.size == 5 and np.all(np.diff(betas) > 0)
        assert betas[-1] <= 1.0 and n * betas[0] >= 3.0 * (1 - 1e-12)
        if n >= 55:
            np.testing.assert_allclose(betas, np.array([0.25, 0.5, 1, 2, 4]) / np.log(n))
    with pytest.raises(ValueError, match="need n > 3"):
        inverse_temperatures(3)


@pytest.mark.slow
def test_default_temperatures_run_at_n_42_and_hit_the_exact_target():
    """At n = 42 the default multipliers would reach beta = 4 / log 42 = 1.07, past the tempered
    path's end: the default window is mapped into 3 / n <= beta <= 1 instead, and rlct runs on
    the default (tempered) path. Conjugate regression d = 3: E_beta[n L_n] is exact
    (`slt.truth`), so the fit of the exact expectations over the same temperatures, window and
    multiplicity is the value lambda_hat estimates; it is within 4 se of it. (It is not d/2:
    at n = 42 the prior N(0, I/2) still pulls the hot end, benchmarks/RESULTS.md.)"""
    noise, precision = 0.5, 2.0
    spec = models.linear_regression(3, noise_scale=noise, prior_precision=precision)
    data = spec.simulate(jax.random.key(4), {"w": jnp.array([1.0, -0.5, 0.0])}, 42)
    result = rlct(spec.problem(data), jax.random.key(5), sampler=Tempering(num_particles=200),
                  progress=False)
    np.testing.assert_allclose(result.betas, inverse_temperatures(42))
    assert result.betas[-1] == 1.0
    x, y = np.asarray(data["x"]), np.asarray(data["y"])
    inside = (result.betas >= result.window[0]) & (result.betas <= result.window[1])
    betas = result.betas[inside]
    exact = np.array([truth.linear_regression_tempered_expected_nll(x, y, noise, precision, b)
                      for b in betas])
    target, _, _ = _regression(betas, exact - _offset(betas, 42, result.multiplicity),
                               result.expected_nll_std_error[inside])
    assert abs(result.rlct - target[1]) < 4 * result.std_error


def test_inverse_temperatures_and_the_deprecated_name():
    """`inverse_temperatures` is named for what it returns; the old name `temperatures` still
    works for one release, with a DeprecationWarning."""
    betas = inverse_temperatures(100, (0.5, 1.0, 2.0))
    np.testing.assert_allclose(betas, np.array([0.5, 1.0, 2.0]) / np.log(100))
    with pytest.warns(DeprecationWarning, match="use inverse_temperatures"):
        old = temperatures(100, (0.5, 1.0, 2.0))
    np.testing.assert_array_equal(old, betas)


def test_a_falling_local_slope_is_warned_about_and_a_rising_one_is_not():
    """beta^2 Var_beta[n L_n] per temperature (the exact slope of E_beta[n L_n] against 1/beta),
    from 4 chains of 20 000 normal draws with the variance it implies: falling from 2.8 to 2.6 (Old
    Faithful K = 2's profile, lambda = 2.5) earns the warning with the numbers; rising (the
    multiplicity term's, or a prior's, shape) or flat does not."""
    rng = np.random.default_rng(0)
    betas = np.array([0.18, 0.36, 0.71])

    def results(slopes):
        return [SimpleNamespace(beta=b, nll=rng.normal(0, np.sqrt(s) / b, (4, 20_000)))
                for b, s in zip(betas, slopes, strict=True)]

    falling = results((2.8, 2.7, 2.6))
    slopes, errors = local_slopes(falling)
    np.testing.assert_allclose(slopes, (2.8, 2.7, 2.6), atol=5 * errors.max())
    message = slope_warning(betas, falling, (0.18, 0.71), 2.71)
    assert message and "falls from 2.8" in message and "biased high" in message
    assert slope_warning(betas, results((2.0, 2.3, 2.5)), (0.18, 0.71), 2.4) is None
    assert slope_warning(betas, results((2.5, 2.5, 2.5)), (0.18, 0.71), 2.5) is None


def _exact_tempered_draws(case, betas, seed, chains=4, draws=2000):
    """Independent draws of n L_n from the exact tempered posteriors N(m_beta, S_beta) of the
    conjugate regression (`truth.linear_regression_tempered_expected_nll`'s algebra), as
    `TemperedDraws`: a sampler that is right by construction."""
    from slt.estimators.evidence.wbic import TemperedDraws

    data = case.problem.data
    X, y = np.asarray(data["x"], np.float64), np.asarray(data["y"], np.float64)
    noise, precision = 0.5, 2.0
    n, d = X.shape
    rows, labels = [], []
    for index, beta in enumerate(betas):
        covariance = np.linalg.inv(precision * np.eye(d) + beta * X.T @ X / noise**2)
        mean = beta * covariance @ X.T @ y / noise**2
        w = np.random.default_rng([seed, index]).multivariate_normal(mean, covariance,
                                                                      (chains, draws))
        residual = y - np.einsum("cki,ni->ckn", w, X)
        rows.append(0.5 * n * np.log(2 * np.pi * noise**2)
                    + np.sum(residual**2, axis=-1) / (2 * noise**2))
        labels.append(np.full(chains, beta))
    nll = np.concatenate(rows)
    return TemperedDraws(nll=nll, betas=np.concatenate(labels), positions=None,
                         sample_stats={}, compile_time=0.0, run_time=0.0)


@pytest.fixture(scope="module")
def two_temperatures():
    """lambda_hat from exact draws at 1/log n and 1 over five keys (the fast path's design)."""
    from slt.estimators.evidence.rlct import rlct_two_temperatures

    case = conjugate_regression()
    betas = (1.0 / np.log(case.problem.n), 1.0)
    results = [rlct_two_temperatures(case.problem, _exact_tempered_draws(
        case, betas, seed), sampler="exact") for seed in range(5)]
    return SimpleNamespace(case=case, betas=betas, results=results)


def test_two_temperatures_give_half_d_within_their_standard_error(two_temperatures):
    """Regular, d = 3: lambda = 3/2. The estimator's own finite-n target, from the closed-form
    E_beta[n L_n], is 1.497 here (the prior's pull, benchmarks/RESULTS.md): within a quarter
    of one standard error (0.017) of d/2, so each key's estimate must be within 4 se of d/2
    and of it.
    The reported se must describe the spread over keys (their sd within a factor 2 of it)."""
    case, (low, high) = two_temperatures.case, two_temperatures.betas
    exact = (case.expected_nll(low) - case.expected_nll(high)) / (1 / low - 1 / high)
    errors = np.array([r.std_error for r in two_temperatures.results])
    assert abs(exact - 1.5) < 0.25 * errors.min()
    values = np.array([r.rlct for r in two_temperatures.results])
    assert np.all(np.abs(values - 1.5) < 4 * errors) and np.all(np.abs(values - exact)
                                                                < 4 * errors)
    assert 0.5 < values.std(ddof=1) / errors.mean() < 2.0
    result = two_temperatures.results[0]
    assert result.method == "two_temperature" and result.multiplicity == 1
    assert result.rlct == result.two_temperature and result.window == (low, high)
    np.testing.assert_allclose(result.fitted(result.betas), result.expected_nll, rtol=1e-12)
    assert "two temperatures" in repr(result) and np.isnan(result.singular_bic)


def test_two_temperatures_need_exactly_two(two_temperatures):
    from slt.estimators.evidence.rlct import rlct_two_temperatures

    case = two_temperatures.case
    draws = _exact_tempered_draws(case, (0.1, 0.2, 1.0), 0, chains=2, draws=50)
    with pytest.raises(InputError, match="exactly two"):
        rlct_two_temperatures(case.problem, draws, sampler="exact")


def test_the_fast_path_runs_the_five_temperatures_only_when_asked():
    """compare's fast path: chains at 1/log n only (lambda_hat by two temperatures with those
    at beta = 1), unless the plan names lambda_hat's temperatures (then the fit over them)."""
    from slt import ComparisonPlan
    from slt.estimators.evidence.compare import _fast_temperatures
    from slt.estimators.evidence.rlct import DEFAULT_MULTIPLIERS

    np.testing.assert_allclose(_fast_temperatures(272, ComparisonPlan()), [1 / np.log(272)])
    given = _fast_temperatures(272, ComparisonPlan(multipliers=DEFAULT_MULTIPLIERS))
    np.testing.assert_allclose(given, np.array(DEFAULT_MULTIPLIERS) / np.log(272))
    assert _fast_temperatures(272, ComparisonPlan(betas=(0.1, 0.2, 0.5))).size == 4


def test_the_fast_path_reads_lambda_hat_from_the_right_chains(two_temperatures):
    """compare's lambda_hat where the fast F stood (`_path_rlct` on its NUTS draws, here exact
    draws in their place): by default from the chains at 1/log n and 1; with the plan's
    temperatures, the fit over those chains alone."""
    from slt import ComparisonPlan
    from slt.estimators.evidence.compare import _fast_temperatures, _path_rlct

    case = two_temperatures.case
    n = case.problem.n
    plans = (ComparisonPlan(), ComparisonPlan(multipliers=(0.5, 1.0, 2.0)))
    for plan, method in zip(plans, ("two_temperature", "fit"), strict=True):
        betas = np.append(_fast_temperatures(n, plan), 1.0)
        draws = _exact_tempered_draws(case, betas, 0, chains=2, draws=500)
        done = {"fit": SimpleNamespace(loglik=-100.0),
                "free_energy": SimpleNamespace(path="draws", run=SimpleNamespace(nuts=draws))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fit's range and se warnings at few draws
            result = _path_rlct(case.problem, done, plan)
        assert result.method == method
        expected = betas if method == "two_temperature" else np.array([0.5, 1, 2]) / np.log(n)
        np.testing.assert_allclose(result.betas, expected)
        assert result.singular_bic == pytest.approx(100.0 + result.rlct * np.log(n) - (
            result.multiplicity - 1) * np.log(np.log(n)), rel=1e-12)
