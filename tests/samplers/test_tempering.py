"""Adaptive tempered SMC: exact prior draws, the ESS-driven ladder, diffuse priors.

One compile per configuration is checked in tests/estimators/test_free_energy.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from estimators.evidence_cases import conjugate_regression
from jax.scipy.stats import norm

import slt
from slt import models, truth
from slt.samplers.tempering import Tempering, sample_prior, tempered_smc


def test_prior_draws_have_the_prior_moments():
    problem = conjugate_regression().problem  # w ~ N(0, I / 2)
    draws = np.asarray(sample_prior(problem, jax.random.key(0), 20000))
    assert draws.shape == (20000, 3)
    se_mean, se_var = np.sqrt(0.5 / 20000), 0.5 * np.sqrt(2 / 20000)
    assert np.all(np.abs(draws.mean(0)) < 4 * se_mean)
    assert np.all(np.abs(draws.var(0) - 0.5) < 4 * se_var)


def test_a_diffuse_prior_gets_a_fine_first_step_and_the_right_evidence():
    """w ~ N(0, 1e6): prior draws misfit by ~1e8 nats, so the first increment is ~1e-9.

    Written with Problem.from_loss, which needs its own prior sampler."""
    noise, precision = 0.3, 1e-6
    spec = models.linear_regression(1, noise_scale=noise, prior_precision=precision)
    data = spec.simulate(jax.random.key(1), {"w": jnp.array([0.7])}, 100)
    exact = truth.linear_regression_log_evidence(data["x"], data["y"], noise, precision)

    def nll(params, batch):
        return -norm.logpdf(batch["y"], batch["x"] @ params, noise)

    def log_prior(params):
        return jnp.sum(norm.logpdf(params, 0.0, precision**-0.5))

    def prior_sampler(key, num):
        return precision**-0.5 * jax.random.normal(key, (num, 1))

    problem = slt.Problem.from_loss(nll, jnp.zeros(1), data, log_prior=log_prior)
    with pytest.raises(ValueError, match="prior_sampler"):
        tempered_smc(problem, jax.random.key(2), progress=False)
    run = tempered_smc(problem, jax.random.key(2), Tempering(
        num_particles=500, num_copies=2, prior_sampler=prior_sampler), progress=False)
    assert np.all(run.betas[:, 1] < 1e-6)
    assert np.all(np.abs(run.log_evidence - exact) < 0.3)
    assert np.all(np.nanmin(run.acceptance, axis=1) > 0.3)


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="num_particles"):
        tempered_smc(problem, jax.random.key(0), Tempering(num_particles=1))
    with pytest.raises(ValueError, match="num_mcmc_steps"):
        tempered_smc(problem, jax.random.key(0), Tempering(num_mcmc_steps=0))
    with pytest.raises(ValueError, match="kernel must be one of"):
        tempered_smc(problem, jax.random.key(0), Tempering(kernel="mala"))
    with pytest.raises(ValueError, match="num_particles must be at least 16"):
        tempered_smc(problem, jax.random.key(0), Tempering(kernel="hmc_imh", num_particles=10))
    with pytest.raises(ValueError, match="every prior draw"):
        tempered_smc(problem, jax.random.key(0), Tempering(
            num_particles=10, prior_sampler=lambda key, num: jnp.full((num, 3), jnp.nan)))
    with pytest.raises(ValueError, match="sampler must be a Tempering value"):
        tempered_smc(problem, jax.random.key(0), {"num_particles": 10})
