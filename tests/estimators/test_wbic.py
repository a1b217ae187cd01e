"""WBIC against the closed-form E_beta[n L_n] of conjugate linear regression; API and errors."""

import arviz as az
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
from jax.scipy.stats import norm

import slt
from slt import NUTS, TemperedSGLD
from slt.estimators import wbic
from slt.estimators.evidence.wbic import SAMPLERS, TemperedDraws, summarise_draws, wbic_beta

from .evidence_cases import conjugate_regression

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def regression_wbic():
    case = conjugate_regression()
    return case, wbic(case.problem, jax.random.key(0), sampler=NUTS(), progress=False)


def test_wbic_matches_the_closed_form_within_four_standard_errors(regression_wbic):
    case, result = regression_wbic
    beta = 1 / np.log(case.problem.n)
    assert result.beta == pytest.approx(beta)
    exact = case.expected_nll(beta)
    assert abs(result.wbic - exact) < 4 * result.std_error
    # the standard error is a real Monte Carlo error: ESS of thousands, a few tenths of a nat
    assert 0.02 < result.std_error < 0.3 and result.ess > 1000
    assert result.rhat < 1.01 and result.num_divergences == 0 and not result.warnings


def test_wbic_reports_draws_as_inference_data(regression_wbic):
    case, result = regression_wbic
    data = result.to_inference_data()
    assert isinstance(data, az.InferenceData)
    assert data.posterior["w"].shape == (4, 1000, 3)
    assert data.sample_stats["nll"].shape == (4, 1000)
    assert "diverging" in data.sample_stats and "log_likelihood" not in data.groups()
    np.testing.assert_allclose(result.per_chain.mean(), result.wbic)
    assert len(result.summary()) == 1 and "WBICResult" in repr(result)
    assert result.plot() is not None


def test_any_beta_can_be_asked_for():
    case = conjugate_regression()
    result = wbic(case.problem, jax.random.key(1), sampler=NUTS(), beta=1.0, progress=False)
    assert result.beta == 1.0
    assert abs(result.wbic - case.expected_nll(1.0)) < 4 * result.std_error


@pytest.mark.heavy
def test_sgld_sampler_matches_the_closed_form_within_four_standard_errors():
    """Minibatch SGLD with the automatic step size and step-size extrapolation."""
    case = conjugate_regression()
    result = wbic(case.problem, jax.random.key(3), sampler=TemperedSGLD(
        slt.samplers.SGLD(batch_size=64, extrapolate=True),
        slt.RunPlan(num_warmup=1000, num_samples=2000)), progress=False)
    exact = case.expected_nll(wbic_beta(case.problem.n))
    assert result.sampler == "sgld" and result.nll.shape == (4, 2000)
    assert abs(result.wbic - exact) < 4 * result.std_error
    # a real Monte Carlo error, small against the d / (2 beta) = 8 nats being estimated
    assert 0.1 < result.std_error < 1.5 and result.rhat < 1.05


def test_sgld_sampler_rejects_a_bad_step_size_and_reports_divergence():
    case = conjugate_regression()
    with pytest.raises(ValueError, match="step_size"):
        wbic(case.problem, jax.random.key(0),
             sampler=TemperedSGLD(slt.samplers.SGLD(step_size=-1.0)), progress=False)
    no_prior = slt.Problem.from_loss(
        lambda params, batch: (batch["y"] - batch["x"] @ params["w"]) ** 2,
        {"w": jnp.zeros(3)}, case.problem.data,
    )
    with pytest.raises(ValueError, match="proper prior"):
        wbic(no_prior, jax.random.key(0), sampler=TemperedSGLD(), progress=False)
    with pytest.raises(FloatingPointError, match="try step_size"):
        wbic(case.problem, jax.random.key(0), sampler=TemperedSGLD(
            slt.samplers.SGLD(step_size=10.0, extrapolate=True),
            slt.RunPlan(num_warmup=10, num_samples=10)), progress=False)


def test_from_loss_problem_gives_the_same_answer():
    """A network trained elsewhere: Problem.from_loss with a log prior runs the same NUTS."""
    case = conjugate_regression()
    data = case.problem.data

    def nll(params, batch):
        return -norm.logpdf(batch["y"], batch["x"] @ params["w"], 0.5)

    def log_prior(params):
        return jnp.sum(norm.logpdf(params["w"], 0.0, 2.0**-0.5))

    problem = slt.Problem.from_loss(nll, {"w": jnp.zeros(3)}, data, log_prior=log_prior)
    result = wbic(problem, jax.random.key(2), sampler=NUTS(num_warmup=500, num_samples=500),
                  progress=False)
    exact = case.expected_nll(wbic_beta(problem.n))
    assert abs(result.wbic - exact) < 4 * result.std_error
    assert result.inference_data.posterior["w"].shape == (4, 500, 3)


def test_divergences_and_non_finite_draws_are_flagged():
    case = conjugate_regression()
    nll = 100.0 + np.random.default_rng(0).normal(size=(2, 10))
    diverging = np.zeros((2, 10), bool)
    diverging[0, 3] = True
    draws = TemperedDraws(nll=nll, betas=np.full(2, 0.2), positions=None,
                          sample_stats={"diverging": diverging}, compile_time=0.0, run_time=0.0)
    with pytest.warns(UserWarning, match="1 divergent transition"):
        result = summarise_draws(case.problem, draws, sampler="nuts")
    assert result.num_divergences == 1 and result.warnings
    assert "posterior" not in result.inference_data.groups()
    with pytest.raises(FloatingPointError, match="not finite at 1 draw"):
        summarise_draws(case.problem, draws._replace(nll=np.where(diverging, np.nan, nll)),
                        sampler="nuts")


def test_bad_input():
    case = conjugate_regression()
    with pytest.raises(ValueError, match="available: Tempering.*NUTS"):
        wbic(case.problem, jax.random.key(0), sampler="hmc")
    assert NUTS in SAMPLERS
    with pytest.raises(ValueError, match="beta"):
        wbic(case.problem, jax.random.key(0), beta=0.0)
    with pytest.raises(ValueError, match="num_chains"):
        wbic(case.problem, jax.random.key(0), sampler=NUTS(num_chains=0))
    with pytest.raises(ValueError, match="init: tempered SMC starts from exact prior draws"):
        wbic(case.problem, jax.random.key(0), init={"w": jnp.zeros(3)}, progress=False)
    with pytest.raises(ValueError, match="n >= 2"):
        wbic_beta(1)
    flat = slt.Problem.from_loss(
        lambda p, b: (b["y"] - p["w"]) ** 2, {"w": jnp.zeros(())}, {"y": np.ones(5)}
    )
    with pytest.raises(ValueError, match="proper prior"):
        wbic(flat, jax.random.key(0))
