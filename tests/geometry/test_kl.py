"""kl_divergence: closed form; its Hessian is the Fisher; KL = delta^T I delta / 2 + O(delta^3)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slt import models
from slt.geometry import FisherRequest, fisher_information, kl_divergence
from slt.geometry.fisher import prepare
from slt.geometry.kl import kl_function

MIXTURE = models.fixed_component_mixture()
NETWORK = models.two_layer_network(2, 2, 1, activation="tanh")
INPUTS = np.random.default_rng(0).normal(size=(30, 2))


def _normal_kl(mu0, sigma0, mu, sigma):
    return np.log(sigma / sigma0) + (sigma0**2 + (mu - mu0) ** 2) / (2 * sigma**2) - 0.5


def test_normal_kl_is_the_closed_form(normal_model):
    spec = normal_model("sigma")
    value = kl_divergence(spec, {"mu": 0.3, "sigma": 1.2}, {"mu": -0.5, "sigma": 0.7})
    np.testing.assert_allclose(value, _normal_kl(0.3, 1.2, -0.5, 0.7), rtol=1e-12)


def _kl_and_arrays(spec, w0, w1, x=None):
    with jax.enable_x64(True):
        request = FisherRequest(x=x)
        first = prepare(spec, w0, request=request)
        second = prepare(spec, w1, request=request)
        arrays = first.with_nodes(np.stack([first.theta, second.theta]))
        return kl_function(first.observation, first.coordinates), first, second, arrays


def test_normal_kl_hessian_in_either_argument_is_the_fisher(normal_model):
    """Grosse's Eqn 8 takes the Hessian in the first argument, the notes in the second (E-8)."""
    spec, point = normal_model("sigma"), {"mu": 0.4, "sigma": 1.3}
    kl, setup, _, arrays = _kl_and_arrays(spec, point, point)
    theta = jnp.asarray(setup.theta)
    with jax.enable_x64(True):
        second = jax.jit(jax.hessian(lambda t: kl(theta, t, arrays)))(theta)
        first = jax.jit(jax.hessian(lambda t: kl(t, theta, arrays)))(theta)
    expected = np.diag([1 / 1.3**2, 2 / 1.3**2])
    np.testing.assert_allclose(second, expected, atol=1e-10)
    np.testing.assert_allclose(first, expected, atol=1e-10)


def test_mixture_kl_hessian_is_the_quadrature_fisher():
    point = {"pi": 0.3, "mu": 1.2, "sigma": 0.8}
    kl, setup, _, arrays = _kl_and_arrays(MIXTURE, point, point)
    theta = jnp.asarray(setup.theta)
    with jax.enable_x64(True):
        hessian = jax.jit(jax.hessian(lambda t: kl(theta, t, arrays)))(theta)
    fisher = fisher_information(MIXTURE, point).matrix
    np.testing.assert_allclose(hessian, fisher, atol=1e-8 * np.abs(fisher).max())


def _third_order_residuals(spec, point, direction, x=None):
    """r(eps) = KL(w || w + eps u) - eps^2 u^T I u / 2 at eps = 1e-2 and 5e-3."""
    fisher = fisher_information(spec, point, request=FisherRequest(x=x))
    kl, setup, _, _ = _kl_and_arrays(spec, point, point, x=x)
    quadratic = 0.5 * direction @ fisher.matrix @ direction
    residuals = []
    for eps in (1e-2, 5e-3):
        moved = setup.coordinates.to_values(jnp.asarray(setup.theta + eps * direction))
        moved = {k: np.asarray(v) for k, v in moved.items()}
        value = kl_divergence(spec, point, moved, x=x)
        residuals.append(value - eps**2 * quadratic)
    return residuals, quadratic


def _unit(vector):
    vector = np.asarray(vector, dtype=float)
    return vector / np.linalg.norm(vector)


@settings(max_examples=12, deadline=None)
@given(
    pi=st.floats(0.1, 0.9), mu=st.floats(-2.5, 2.5), sigma=st.floats(0.5, 2.0),
    direction=st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(
        lambda v: np.linalg.norm(v) > 0.1
    ),
)
def test_mixture_kl_is_half_the_fisher_quadratic_form_to_third_order(pi, mu, sigma, direction):
    """Halving delta divides the residual by ~8 (O(|delta|^3)); an O(|delta|^2) error would
    only divide it by 4. The floor 1e-13 is float64 resolution of KL values of ~1e-4."""
    residuals, quadratic = _third_order_residuals(
        MIXTURE, {"pi": pi, "mu": mu, "sigma": sigma}, _unit(direction)
    )
    assert quadratic >= 0
    assert abs(residuals[1]) <= 0.2 * abs(residuals[0]) + 1e-13


@settings(max_examples=10, deadline=None)
@given(weights=st.lists(st.floats(-2, 2), min_size=9, max_size=9),
       direction=st.lists(st.floats(-1, 1), min_size=9, max_size=9).filter(
           lambda v: np.linalg.norm(v) > 0.1))
def test_regression_kl_is_half_the_fisher_quadratic_form_to_third_order(weights, direction):
    w = np.asarray(weights)
    point = {"V": w[:4].reshape(2, 2), "b": w[4:6], "U": w[6:8].reshape(1, 2), "c": w[8:]}
    residuals, _ = _third_order_residuals(NETWORK, point, _unit(direction), x=INPUTS)
    assert abs(residuals[1]) <= 0.2 * abs(residuals[0]) + 1e-13


def test_kl_vanishes_at_equal_points_and_is_positive_elsewhere():
    point = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
    assert abs(kl_divergence(MIXTURE, point, point)) < 1e-15
    assert kl_divergence(MIXTURE, point, {"pi": 0.5, "mu": 1.5, "sigma": 1.0}) > 0
    # along the singular set the models coincide: KL = 0 between pi = 0.2 and 0.7 at mu = 0
    same = kl_divergence(MIXTURE, {"pi": 0.2, "mu": 0.0, "sigma": 1.0},
                         {"pi": 0.7, "mu": 0.0, "sigma": 1.0})
    assert abs(same) < 1e-15


def test_kl_rejects_mismatched_points_and_models_without_exact_kl():
    with pytest.raises(ValueError, match="missing"):
        kl_divergence(MIXTURE, {"pi": 0.5, "mu": 1.0, "sigma": 1.0}, {"pi": 0.5, "mu": 1.0})
    spec = models.gaussian_mixture(2, dim=2)
    values = {"weights": [0.5, 0.5], "means": np.zeros((2, 2)), "scales": np.ones((2, 2))}
    with pytest.raises(ValueError, match="exact KL"):
        kl_divergence(spec, values, values)
