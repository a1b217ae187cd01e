"""The empty-component cover q_E of a mixture's posterior (slt.samplers.empty_component).

The exact check: with the prior as the target (Z = 1), q_E whose K - 1 component part is
fitted to the K - 1 component prior and whose empty weight is Beta(1, K - 1) (the marginal of
one Dirichlet(1_K) weight) is the prior itself up to the fit, by the Dirichlet's aggregation
property; importance sampling from it must give log Z = 0 within its standard error. A density
that does not integrate to one, a Jacobian left out, or a sampler that does not draw from the
density, all move log Z by more than that.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt.models import gaussian_mixture, linear_regression
from slt.models.mixtures import fixed_component_mixture
from slt.samplers.empty_component import (
    component_structure,
    cover_log_density,
    fit_cover,
    reduced_draws_from,
    reduced_draws_of,
    sample_cover,
)

DATA = {"y": jnp.array([-1.2, -0.8, 0.1, 0.9, 1.4, 2.2])}


def _problem(k, dim=1, **kwargs):
    data = DATA if dim == 1 else {"y": jnp.stack([DATA["y"], -DATA["y"]], axis=1)}
    return gaussian_mixture(k, dim, **kwargs).problem(data)


def _prior_draws(problem, key, size):
    """(size, dim) flat unconstrained draws of `problem`'s prior (independent sites)."""
    distributions = problem.prior_distributions(problem.unravel(jnp.zeros(problem.dim)))
    keys = jax.random.split(key, len(distributions))
    values = {name: fn.sample(site_key, (size,))
              for (name, fn), site_key in zip(distributions.items(), keys, strict=True)}
    return jax.vmap(lambda v: problem.ravel(problem.unconstrain(v)))(values)


@pytest.mark.heavy
@pytest.mark.parametrize(("k", "dim", "shared"), [(3, 1, False), (2, 2, True)])
def test_importance_sampling_of_the_prior_from_the_cover_gives_log_z_zero(k, dim, shared):
    problem, smaller = _problem(k, dim, shared_scale=shared), _problem(k - 1, dim,
                                                                        shared_scale=shared)
    structure = component_structure(problem)
    fit_key, prior_key, draw_key = jax.random.split(jax.random.key(k), 3)
    reduced = reduced_draws_of(problem, structure, smaller,
                               _prior_draws(smaller, prior_key, 3000))
    cover = fit_cover(problem, structure, fit_key, reduced, 8, concentration=k - 1.0)
    draws = sample_cover(problem, cover, draw_key, 10_000)
    log_q = jax.jit(lambda points: cover_log_density(problem, cover, points))(draws)
    log_prior = jax.vmap(lambda u: problem.log_prior(problem.unravel(u)))(draws)
    log_weights = np.asarray(log_prior - log_q, np.float64)
    ratio = np.exp(log_weights - log_weights.max())
    log_z = np.log(ratio.mean()) + log_weights.max()
    std_error = ratio.std() / (np.sqrt(ratio.size) * ratio.mean())
    assert std_error < 0.01
    assert abs(log_z) < 4 * std_error


def test_the_reduced_coordinates_jacobian_is_the_constraining_maps_determinant():
    """log |det d theta / d u| of the K - 1 component coordinates, theta = (weights[:-1],
    means, scales), against the determinant of the map's Jacobian computed by autodiff."""
    structure = component_structure(_problem(4))
    reduced = structure.reduced
    points = jax.random.normal(jax.random.key(0), (5, reduced.dim))

    def theta(u):
        values = reduced.constrain(reduced.unravel(u))
        return jnp.concatenate([values["weights"][:-1], values["means"].ravel(),
                                values["scales"].ravel()])

    by_autodiff = jax.vmap(lambda u: jnp.linalg.slogdet(jax.jacfwd(theta)(u))[1])(points)
    by_transforms = jax.vmap(lambda u: reduced.log_jacobian(reduced.unravel(u)))(points)
    np.testing.assert_allclose(by_transforms, by_autodiff, rtol=1e-5, atol=1e-5)


def test_structure_is_found_for_mixtures_only():
    structure = component_structure(_problem(3, 2))
    assert (structure.size, structure.weights, set(structure.sites)) == (
        3, "weights", {"means", "scales"})
    assert structure.reduced.dim == gaussian_mixture(2, 2).dim
    shared = component_structure(_problem(3, 2, shared_scale=True))
    assert shared.sites == ("means",) and shared.reduced.dim == gaussian_mixture(
        2, 2, shared_scale=True).dim
    regression = linear_regression(1).problem({"x": jnp.ones((4, 1)), "y": jnp.ones(4)})
    assert component_structure(regression) is None
    assert component_structure(_problem(1)) is None  # K = 1: nothing exchangeable
    assert component_structure(fixed_component_mixture().problem(DATA)) is None
    with pytest.raises(ValueError, match="not a latent site"):
        _problem(2).transform("y")


def test_reduced_draws():
    problem, smaller = _problem(3), _problem(2)
    structure = component_structure(problem)
    flat = jax.random.normal(jax.random.key(1), (6, problem.dim))
    values = jax.vmap(lambda u: problem.constrain(problem.unravel(u)))(flat)
    reduced = jax.vmap(lambda u: structure.reduced.constrain(structure.reduced.unravel(u)))(
        reduced_draws_from(problem, structure, flat))
    for row in range(6):
        keep = np.delete(np.arange(3), np.argmin(values["weights"][row]))
        weights = values["weights"][row][keep]
        np.testing.assert_allclose(reduced["weights"][row], weights / weights.sum(), rtol=1e-5)
        np.testing.assert_allclose(reduced["means"][row], values["means"][row][keep],
                                   rtol=1e-5)
    small = jax.random.normal(jax.random.key(2), (4, smaller.dim))
    np.testing.assert_allclose(reduced_draws_of(problem, structure, smaller, small), small,
                               atol=1e-6)  # the same coordinates
    assert reduced_draws_of(problem, structure, _problem(3), flat) is None  # not K - 1
    assert reduced_draws_of(problem, structure, _problem(2, shared_scale=True),
                            jnp.zeros((2, 4))) is None


@pytest.mark.parametrize("concentration", [1.0, 3.0, 68.75])
def test_the_empty_weight_is_beta_one_b(concentration):
    """The inverse-CDF draws of Beta(1, b): Kolmogorov-Smirnov against the exact CDF (the
    statistic's 0.1% critical value at 10^5 draws is 0.0062), strictly inside (0, 1)."""
    from scipy import stats

    from slt.samplers.empty_component import _beta_one

    for dtype in (jnp.float32, jnp.float64):
        draws = np.asarray(_beta_one(jax.random.key(5), concentration, 100_000, dtype))
        assert draws.dtype == dtype and np.all((draws > 0) & (draws < 1))
        assert stats.kstest(draws, stats.beta(1.0, concentration).cdf).statistic < 0.0062
