import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt.samplers.noise import standard_normal
from slt.samplers.sgld import SGLDInfo, mala_log_acceptance, sgld
from tests.samplers.gaussian_runs import positions_on_a_gaussian


def test_sgld_samples_a_gaussian():
    """Full-gradient SGLD on N(m, diag(s^2)) is, per coordinate, the AR(1) chain
    w' - m = a (w - m) + sqrt(eps) xi with a = 1 - eps / (2 s^2): stationary mean m and variance
    s^2 / (1 - eps / (4 s^2)) exactly (5.3% above s^2 for s = 0.5 at this step). Both are
    checked within 4 standard errors of the AR(1) chain (integrated autocorrelation time
    (1 + a) / (1 - a) for the mean, (1 + a^2) / (1 - a^2) for the variance)."""
    mean, scale = np.array([1.0, -2.0]), np.array([0.5, 2.0])
    step_size = 0.05
    draws = positions_on_a_gaussian(sgld(), mean, scale, step_size, num_chains=64,
                                    burn_in=2_000, num_steps=20_000,
                                    key=jax.random.key(0)).reshape(-1, 2)
    a = 1 - step_size / (2 * scale**2)
    variance = scale**2 / (1 - step_size / (4 * scale**2))
    size = draws.shape[0]
    mean_se = np.sqrt(variance * (1 + a) / (1 - a) / size)
    variance_se = variance * np.sqrt(2 * (1 + a**2) / (1 - a**2) / size)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * mean_se)
    assert np.all(np.abs(draws.var(0) - variance) < 4 * variance_se)
    assert np.abs(draws.var(0)[0] - scale[0] ** 2) > 4 * variance_se[0]  # the bias is seen


def test_rmsprop_update_by_hand():
    """pSGLD by hand: v = .99 v + .01 g^2, G = 1 / (1e-5 + sqrt(v)), one step from w; the info
    holds log pi(w), its gradient, G and the target's auxiliary output."""
    algorithm = sgld("rmsprop")
    state = algorithm.init(jnp.array([0.5, -1.0]))
    gradient, eps, key = jnp.array([2.0, -0.1]), 1e-2, jax.random.key(3)

    def linear(w):  # log pi(w) = g . w: its gradient is g everywhere
        return jnp.dot(gradient, w), "aux"

    new_state, info = algorithm.step(key, state, linear, eps)
    diagonal = info.diagonal
    assert info.aux == "aux" and float(info.log_density) == float(jnp.dot(gradient, state.position))
    np.testing.assert_array_equal(info.gradient, gradient)
    square_avg = 0.01 * np.asarray(gradient) ** 2
    expected_diagonal = 1.0 / (1e-5 + np.sqrt(square_avg))
    noise = np.asarray(standard_normal(key, (2,), jnp.float64))
    expected = (
        np.array([0.5, -1.0])
        + 0.5 * eps * expected_diagonal * np.asarray(gradient)
        + np.sqrt(eps * expected_diagonal) * noise
    )
    np.testing.assert_allclose(new_state.square_avg, square_avg, rtol=1e-12)
    np.testing.assert_allclose(diagonal, expected_diagonal, rtol=1e-12)
    np.testing.assert_allclose(new_state.position, expected, rtol=1e-12)


def test_mala_acceptance_by_hand():
    """A 1-D Gaussian log pi(w) = -w^2 / 2, step eps = 0.5 from w = 1 to w' = 0.2."""
    eps, w, w_new = 0.5, jnp.array([1.0]), jnp.array([0.2])

    def value_and_grad(x):
        return -0.5 * jnp.sum(x**2), -x

    log_q_forward = -0.5 * (0.2 - (1.0 - 0.25 * 1.0)) ** 2 / eps
    log_q_backward = -0.5 * (1.0 - (0.2 - 0.25 * 0.2)) ** 2 / eps
    expected = min(0.0, (-0.5 * 0.04 + 0.5) + log_q_backward - log_q_forward)
    value, gradient = value_and_grad(w)
    info = SGLDInfo(value, None, gradient, jnp.ones(1))
    actual = mala_log_acceptance(w, w_new, info, value_and_grad, eps)
    np.testing.assert_allclose(actual, expected, rtol=1e-12)


def test_unknown_preconditioner_is_rejected():
    with pytest.raises(ValueError, match="preconditioner"):
        sgld("adam")
