"""The Gaussian-mixture proposal: EM recovers a known mixture, densities and draws agree with
scipy, and the cross-fitted independence sweep leaves its target invariant."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from slt.samplers.mixture_proposal import (
    GaussianMixture,
    cross_fitted_independence_sweep,
    fit_cross_mixtures,
    fit_gaussian_mixture,
    mixture_log_density,
    padded_mixture,
    sample_mixture,
    whitening_factor,
)

WEIGHTS = np.array([0.3, 0.7])
MEANS = np.array([[-3.0, 0.0], [2.0, 1.0]])
COVARIANCES = np.array([[[1.0, 0.5], [0.5, 1.0]], [[0.5, 0.0], [0.0, 2.0]]])


def known_mixture() -> GaussianMixture:
    factors = np.linalg.cholesky(COVARIANCES)
    return GaussianMixture(jnp.log(WEIGHTS), jnp.asarray(MEANS), jnp.asarray(factors),
                           jnp.asarray(np.linalg.inv(factors)))


def scipy_log_density(points):
    densities = [w * stats.multivariate_normal(m, c).pdf(points)
                 for w, m, c in zip(WEIGHTS, MEANS, COVARIANCES, strict=True)]
    return np.log(np.sum(densities, axis=0))


def test_density_matches_scipy_and_draws_have_the_mixture_moments():
    mixture = known_mixture()
    points = np.random.default_rng(0).normal(size=(50, 2)) * 3
    np.testing.assert_allclose(mixture_log_density(jnp.asarray(points), mixture),
                               scipy_log_density(points), rtol=1e-10)
    draws = np.asarray(sample_mixture(jax.random.key(0), mixture, 40000))
    mean = WEIGHTS @ MEANS
    second = sum(w * (c + np.outer(m, m))
                 for w, m, c in zip(WEIGHTS, MEANS, COVARIANCES, strict=True))
    covariance = second - np.outer(mean, mean)
    se = np.sqrt(np.diag(covariance) / draws.shape[0])
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se)
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.05, atol=0.05)


def test_a_mixture_padded_with_weightless_components_has_the_same_density():
    mixture = known_mixture()
    padded = padded_mixture(mixture, 5)
    assert padded.means.shape == (5, 2) and padded_mixture(mixture, 2) is mixture
    points = jax.random.normal(jax.random.key(0), (100, 2)) * 3.0
    np.testing.assert_array_equal(mixture_log_density(points, padded),
                                  mixture_log_density(points, mixture))


def test_em_recovers_a_well_separated_mixture():
    points = sample_mixture(jax.random.key(1), known_mixture(), 4000)
    fitted = fit_gaussian_mixture(jax.random.key(2), points, whitening_factor(points),
                                  num_components=2, num_iterations=50)
    order = np.argsort(np.asarray(fitted.means[:, 0]))
    weights = np.exp(np.asarray(fitted.log_weights))[order]
    se_weight = np.sqrt(WEIGHTS * (1 - WEIGHTS) / 4000)
    assert np.all(np.abs(weights - WEIGHTS) < 4 * se_weight)
    np.testing.assert_allclose(np.asarray(fitted.means)[order], MEANS, atol=0.1)
    covariances = np.einsum("mij,mkj->mik", fitted.cholesky, fitted.cholesky)[order]
    np.testing.assert_allclose(covariances, COVARIANCES, atol=0.15)
    np.testing.assert_allclose(np.einsum("mij,mjk->mik", fitted.inverse_cholesky, fitted.cholesky),
                               np.broadcast_to(np.eye(2), (2, 2, 2)), atol=1e-10)


def test_cross_fitted_independence_moves_leave_a_bimodal_target_invariant():
    """Exact draws from the target stay distributed as the target after 20 sweeps: the weight
    of each mode and the mean within it, to 4 standard errors."""
    target = known_mixture()
    size = 4000

    def log_target_values(points):
        value = mixture_log_density(points, target)
        return value, value

    position = sample_mixture(jax.random.key(3), target, size)
    loglik, _ = log_target_values(position)
    mixtures = fit_cross_mixtures(jax.random.key(4), position, 4)
    sweep = jax.jit(lambda key, x, ll: cross_fitted_independence_sweep(
        key, x, ll, log_target_values, mixtures))
    rates = []
    for index in range(20):
        position, loglik, rate = sweep(jax.random.key(10 + index), position, loglik)
        rates.append(float(rate))
    position = np.asarray(position)
    np.testing.assert_allclose(loglik, scipy_log_density(position), rtol=1e-8)
    assert min(rates) > 0.3  # the fitted mixture is close to the target: most moves accepted
    in_first = position[:, 0] < -0.5
    se = np.sqrt(WEIGHTS[0] * WEIGHTS[1] / size)
    assert abs(in_first.mean() - WEIGHTS[0]) < 4 * se
    for mask, mean, covariance in ((in_first, MEANS[0], COVARIANCES[0]),
                                   (~in_first, MEANS[1], COVARIANCES[1])):
        se_mean = np.sqrt(np.diag(covariance) / mask.sum())
        assert np.all(np.abs(position[mask].mean(0) - mean) < 4 * se_mean)
