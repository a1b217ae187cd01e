"""Nested slice sampling (BlackJAX) against exact log evidences (TRUTH.md), `slt.free_energy`
(method "nested") on the same run, and their bad input.

Tolerances come from the standard error each run states (the larger of nested sampling's own
and the runs' spread): the truth within 4 se. The fast tests use few live points (se about
0.1 nats); the slow ones run the defaults and also ask for 0.1 nats.
"""

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

pytest.importorskip("blackjax", reason="nested sampling needs blackjax (slt[nested])")
from estimators.evidence_cases import conjugate_regression, product_model
from jax.scipy.stats import norm

import slt
from slt import models, truth
from slt.samplers import nested
from slt.samplers.nested import NestedSampling, nested_sampling
from slt.validation import InputError

matplotlib.use("Agg")

NOISE, PRECISION = 0.5, 2.0  # conjugate_regression()'s noise sd and prior precision


def _regression_posterior():
    """Exact posterior N(m, A^-1) of conjugate_regression() and KL(posterior ‖ prior)."""
    data = conjugate_regression().problem.data
    X, y = np.asarray(data["x"]), np.asarray(data["y"])
    d = X.shape[1]
    A = PRECISION * np.eye(d) + X.T @ X / NOISE**2
    covariance = np.linalg.inv(A)
    mean = covariance @ X.T @ y / NOISE**2
    kl = 0.5 * (PRECISION * np.trace(covariance) + PRECISION * mean @ mean - d
                + np.linalg.slogdet(A)[1] - d * np.log(PRECISION))
    return mean, covariance, kl


@pytest.fixture(scope="module")
def regression_run():
    case = conjugate_regression()
    traces = nested._TRACE_COUNT[0]
    run = nested_sampling(case.problem, jax.random.key(0),
                          NestedSampling(num_live=400, num_runs=2), progress=False)
    return case, run, nested._TRACE_COUNT[0] - traces


def test_conjugate_regression_within_four_standard_errors(regression_run):
    case, run, _ = regression_run
    assert abs(run.combined_log_evidence - case.log_evidence) < 4 * run.std_error
    # one run of N = 400 has se ≈ sqrt(H / N) ≈ 0.15; two merged ≈ 0.1
    assert run.std_error < 0.2 and run.std_error >= run.ns_std_error
    assert np.all(np.abs(run.log_evidence - case.log_evidence)
                  < 4 * run.log_evidence_std_error)


def test_information_and_weighted_draws_match_the_exact_posterior(regression_run):
    _, run, _ = regression_run
    mean, covariance, kl = _regression_posterior()
    assert abs(run.information - kl) < 0.1 * kl
    weights = np.exp(run.log_weights)
    assert weights.sum() == pytest.approx(1.0)
    ess = 1.0 / np.sum(weights**2)
    assert ess > 500
    estimate = weights @ run.samples
    assert np.all(np.abs(estimate - mean) < 4 * np.sqrt(np.diag(covariance) / ess))


def test_counts_and_times(regression_run):
    _, run, _ = regression_run
    assert run.log_evidence.shape == run.num_likelihood_evaluations.shape == (2,)
    # each run deletes num_delete = 10 points per iteration; the final 400 live points join
    assert run.samples.shape == (2 * (10 * run.num_iterations + 400), 3)
    # each of the 4 d = 12 slice moves per new point costs at least 3 evaluations
    assert np.all(run.num_likelihood_evaluations > 10 * run.num_iterations * 12 * 3)
    # (compile_time is 0.0 where an earlier test in this process compiled the same program)
    assert run.compile_time >= 0.0 and run.run_time > 0


@pytest.fixture(scope="module")
def regression_free_energy(regression_run):
    """`slt.free_energy(method="nested")` with the sampler run's key and settings: the same
    program (no new trace) and, if the estimator adds nothing wrong, the same numbers."""
    case, run, _ = regression_run
    before = nested._TRACE_COUNT[0]
    result = slt.free_energy(case.problem, jax.random.key(0),
                             NestedSampling(num_live=400, num_runs=2), progress=False)
    return result, nested._TRACE_COUNT[0] - before


def test_same_key_same_result_and_one_compilation(regression_run, regression_free_energy):
    _, run, traces = regression_run
    assert traces == 1  # one program for every chunk of the run
    result, traces_again = regression_free_energy
    assert traces_again == 0 and result.run.compile_time == 0.0
    np.testing.assert_array_equal(result.run.log_evidence, run.log_evidence)
    assert result.run.combined_log_evidence == run.combined_log_evidence


def test_nested_free_energy_is_the_runs_negative_log_evidence(regression_run,
                                                               regression_free_energy):
    case, run, _ = regression_run
    result, _ = regression_free_energy
    assert result.method == "nested" and result.nested == (result.free_energy, result.std_error)
    assert result.free_energy == -run.combined_log_evidence
    assert abs(result.free_energy + case.log_evidence) < 4 * result.std_error
    assert 0.0 < result.std_error < 0.2
    assert np.isnan(result.smc[0]) and np.isnan(result.target_ess)
    np.testing.assert_allclose(result.per_copy, -result.run.log_evidence)


def test_nested_result_reports_tables_plots_and_saves(regression_free_energy, tmp_path):
    result, _ = regression_free_energy
    row = result.summary().iloc[0]
    assert row["nested"] == result.free_energy and row["nested_iterations"] > 0
    assert np.isnan(row["stages"])
    assert result.to_xarray()["log_evidence"].dims == ("run",)
    assert "nested: F=" in repr(result) and "H=" in repr(result)
    assert result.plot() is not None
    result.save(tmp_path / "nested.nc")
    again = slt.FreeEnergyResult.load(tmp_path / "nested.nc")
    assert repr(again) == repr(result)
    np.testing.assert_array_equal(again.run.samples, result.run.samples)


def test_product_model_within_four_standard_errors():
    """Singular: a, b ~ N(0, 1), truth ab = 0, n = 1000; log Z by quadrature."""
    case = product_model()
    run = nested_sampling(case.problem, jax.random.key(1),
                          NestedSampling(num_live=300, num_runs=2), progress=False)
    assert abs(run.combined_log_evidence - case.log_evidence) < 4 * run.std_error
    assert run.std_error < 0.1


@pytest.mark.slow
def test_conjugate_regression_with_more_live_points_within_a_tenth_of_a_nat():
    case = conjugate_regression()
    # H ≈ 9 nats: 4 runs of 2000 live points give se ≈ sqrt(9 / 8000) ≈ 0.035, so that
    # 0.1 nats is three standard errors (the default 4 × 500 gives 0.07)
    run = nested_sampling(case.problem, jax.random.key(2), NestedSampling(num_live=2000),
                          progress=False)
    error = abs(run.combined_log_evidence - case.log_evidence)
    assert error < 0.1 and error < 4 * run.std_error and run.std_error < 0.05


@pytest.mark.slow
def test_defaults_product_model_within_a_tenth_of_a_nat():
    case = product_model()
    # H ≈ 1.9 nats: the defaults (4 runs of 500) give se ≈ 0.03
    run = nested_sampling(case.problem, jax.random.key(3), progress=False)
    error = abs(run.combined_log_evidence - case.log_evidence)
    assert error < 0.1 and error < 4 * run.std_error and run.std_error < 0.05


def _from_loss_regression(log_prior=True):
    """y = x w + eps, noise 0.3, w ~ N(0, 1), n = 100, written with Problem.from_loss."""
    spec = models.linear_regression(1, noise_scale=0.3, prior_precision=1.0)
    data = spec.simulate(jax.random.key(4), {"w": jnp.array([0.7])}, 100)

    def nll(params, batch):
        return -norm.logpdf(batch["y"], batch["x"] @ params, 0.3)

    def prior(params):
        return jnp.sum(norm.logpdf(params))

    problem = slt.Problem.from_loss(nll, jnp.zeros(1), data,
                                    log_prior=prior if log_prior else None)
    exact = truth.linear_regression_log_evidence(data["x"], data["y"], 0.3, 1.0)
    return problem, exact


@pytest.mark.slow
def test_from_loss_with_a_prior_sampler():
    problem, exact = _from_loss_regression()
    run = nested_sampling(problem, jax.random.key(5), NestedSampling(
        num_live=500, prior_sampler=lambda key, num: jax.random.normal(key, (num, 1))),
        progress=False)
    assert abs(run.combined_log_evidence - exact) < 4 * run.std_error


def test_bad_input():
    problem = conjugate_regression().problem
    key = jax.random.key(0)
    bad = [
        ({"num_live": 1}, "num_live"),
        ({"num_delete": 0}, "num_delete"),
        ({"num_live": 10, "num_delete": 10}, "num_delete must be smaller"),
        ({"num_inner_steps": 0}, "num_inner_steps"),
        ({"num_runs": 0}, "num_runs"),
        ({"termination": 0.0}, "termination"),
        ({"termination": 1.0}, "termination"),
        ({"jump_probability": 1.5}, "jump_probability"),
        ({"max_iterations": 2.5}, "max_iterations"),
        ({"prior_sampler": "normal"}, "prior_sampler"),
        ({"prior_sampler": lambda k, num: jnp.zeros((num, 2))}, r"shape \(num, dim\)"),
        ({"prior_sampler": lambda k, num: jnp.full((num, 3), jnp.nan)}, "prior density"),
    ]
    for settings, message in bad:
        with pytest.raises(InputError, match=message):
            nested_sampling(problem, key, NestedSampling(**settings), progress=False)
    with pytest.raises(InputError, match="sampler must be a NestedSampling value"):
        nested_sampling(problem, key, {"num_live": 10})
    with pytest.raises(InputError, match="problem"):
        nested_sampling("model", key)
    with pytest.raises(InputError, match="key"):
        nested_sampling(problem, 0)


def test_a_problem_without_a_prior_or_a_prior_sampler_is_refused():
    no_prior, _ = _from_loss_regression(log_prior=False)
    with pytest.raises(InputError, match="proper prior"):
        nested_sampling(no_prior, jax.random.key(0), progress=False)
    problem, _ = _from_loss_regression()
    with pytest.raises(ValueError, match="prior_sampler"):
        nested_sampling(problem, jax.random.key(0), progress=False)


def test_a_likelihood_that_vanishes_at_every_prior_draw_is_an_error():
    problem, _ = _from_loss_regression()
    impossible = slt.Problem.from_loss(
        lambda params, batch: jnp.where(params[0] > 5.0, jnp.inf, 0.0 * batch["y"]),
        jnp.zeros(1), problem.data, log_prior=lambda params: jnp.sum(norm.logpdf(params)),
    )
    with pytest.raises(ValueError, match="every initial live point"):
        nested_sampling(impossible, jax.random.key(0), NestedSampling(
            num_live=20, num_runs=1, prior_sampler=lambda key, num: jnp.full((num, 1), 6.0)),
            progress=False)


@pytest.mark.slow
def test_float32_parameters_under_x64():
    """BlackJAX's slice coordinate is a float64 under x64; float32 problems must stay so."""
    case = product_model()
    problem = models.product_model().problem(case.problem.data, x64=False)
    run = nested_sampling(problem, jax.random.key(6), NestedSampling(num_live=300, num_runs=2),
                          progress=False)
    assert run.samples.dtype == np.float32
    assert abs(run.combined_log_evidence - case.log_evidence) < 4 * run.std_error
