"""fisher_information against the exact Fisher matrices of TRUTH.md section 3."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from slt import models
from slt.geometry import FisherRequest, fisher_information

MIXTURE = models.fixed_component_mixture()


@pytest.mark.parametrize("mu, sigma", [(0.0, 1.0), (-1.3, 0.4), (2.0, 3.0)])
def test_normal_fisher_is_truth_in_both_parametrisations(normal_model, mu, sigma):
    in_sigma = fisher_information(normal_model("sigma"), {"mu": mu, "sigma": sigma})
    np.testing.assert_allclose(in_sigma.matrix, np.diag([1 / sigma**2, 2 / sigma**2]), atol=1e-10)
    variance = sigma**2
    in_variance = fisher_information(normal_model("variance"), {"mu": mu, "variance": variance})
    expected = np.diag([1 / variance, 1 / (2 * variance**2)])
    np.testing.assert_allclose(in_variance.matrix, expected, rtol=1e-10, atol=1e-12)
    assert in_sigma.names == ("mu", "sigma") and in_sigma.rank == 2


def test_one_component_mixture_by_quadrature_is_the_normal_fisher():
    """gaussian_mixture(1) goes through the quadrature path: same answer to 1e-10."""
    spec = models.gaussian_mixture(1)
    fisher = fisher_information(spec, {"weights": [1.0], "means": [[0.7]], "scales": [[1.6]]})
    assert fisher.names == ("means[0,0]", "scales[0,0]")  # a 1-simplex has no free coordinate
    np.testing.assert_allclose(fisher.matrix, np.diag([1, 2]) / 1.6**2, atol=1e-10)


def test_linear_regression_fisher_is_x_transpose_x_over_sigma_squared():
    spec = models.linear_regression(4, noise_scale=0.7)
    x = np.random.default_rng(0).normal(size=(30, 4))
    for w in (np.zeros(4), np.array([1.0, -2.0, 0.5, 3.0])):  # independent of w
        fisher = fisher_information(spec, {"w": w}, request=FisherRequest(x=x))
        np.testing.assert_allclose(fisher.matrix, x.T @ x / 30 / 0.7**2, rtol=1e-10)


def test_affine_fisher_is_identity_kron_second_moment(affine_regression):
    """y = A x + b: I = (1/s^2) I_N (x) E[[x;1][x;1]^T], in the order (A row-major, b)."""
    spec = affine_regression(3, 2, 0.5)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(25, 3))
    augmented = np.hstack([x, np.ones((25, 1))])
    expected = np.kron(np.eye(2), augmented.T @ augmented / 25) / 0.25
    order = [0, 1, 2, 6, 3, 4, 5, 7]  # A[0,:], b[0], A[1,:], b[1]
    for values in ({"A": np.zeros((2, 3)), "b": np.zeros(2)},
                   {"A": rng.normal(size=(2, 3)), "b": rng.normal(size=2)}):
        fisher = fisher_information(spec, values, request=FisherRequest(x=x))
        np.testing.assert_allclose(fisher.matrix[np.ix_(order, order)], expected, rtol=1e-10)
        assert fisher.rank == 8


def test_product_model_fisher_and_its_scaling_kernel():
    """f = v u x: I = E[x^2] [[v^2, uv], [uv, u^2]], kernel (u, -v), zero at u = v = 0."""
    spec = models.product_model()
    x = np.random.default_rng(2).normal(size=50)
    second_moment = np.mean(x**2)
    u, v = 0.8, -1.7
    fisher = fisher_information(spec, {"w": [u, v]}, request=FisherRequest(x=x))
    expected = second_moment * np.array([[v * v, u * v], [u * v, u * u]])
    np.testing.assert_allclose(fisher.matrix, expected, rtol=1e-10, atol=1e-14)
    assert fisher.rank == 1
    kernel = fisher.null_space()[:, 0]
    np.testing.assert_allclose(abs(kernel @ np.array([u, -v])), np.hypot(u, v), rtol=1e-10)
    at_origin = fisher_information(spec, {"w": [0.0, 0.0]}, request=FisherRequest(x=x))
    assert at_origin.rank == 0 and np.all(at_origin.matrix == 0)


def _mixture_log_density(theta, y):
    """Hand-written log p(y) of pi N(mu, sigma^2) + (1 - pi) N(0, 1): no NumPyro."""
    pi, mu, sigma = theta
    fixed = jnp.log1p(-pi) - 0.5 * y * y
    moving = jnp.log(pi) - 0.5 * ((y - mu) / sigma) ** 2 - jnp.log(sigma)
    return jnp.logaddexp(fixed, moving) - 0.5 * jnp.log(2 * jnp.pi)


@pytest.mark.parametrize("point", [(0.2, -2.0, 0.5), (0.03, 3.0, 1.0), (0.6, 5.0, 2.0)])
def test_mixture_quadrature_fisher_is_minus_expected_hessian(point):
    """Information equality to 1e-8, against an independent adaptive quadrature (QUADPACK's
    rule through scipy's quad_vec) of the Hessian of a hand-written log density."""
    fisher = fisher_information(MIXTURE, dict(zip(("pi", "mu", "sigma"), point, strict=True)))
    theta = jnp.array(point)

    @jax.jit
    def integrand(y):
        density = jnp.exp(_mixture_log_density(theta, y))
        return -jax.hessian(_mixture_log_density)(theta, y) * density

    expected = integrate.quad_vec(
        lambda y: np.asarray(integrand(y)), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12
    )[0]
    np.testing.assert_allclose(fisher.matrix, expected, atol=1e-8 * np.abs(expected).max())


def test_mixture_rank_drops_where_truth_says():
    full = fisher_information(MIXTURE, {"pi": 0.5, "mu": 1.0, "sigma": 1.0})
    same_components = fisher_information(MIXTURE, {"pi": 0.5, "mu": 0.0, "sigma": 1.0})
    no_weight = fisher_information(MIXTURE, {"pi": 0.0, "mu": 1.0, "sigma": 1.0})
    both = fisher_information(MIXTURE, {"pi": 0.0, "mu": 0.0, "sigma": 1.0})
    wider = fisher_information(MIXTURE, {"pi": 0.5, "mu": 0.0, "sigma": 1.5})
    assert (full.rank, same_components.rank, no_weight.rank, both.rank) == (3, 2, 1, 0)
    assert wider.rank == 3  # mu = 0 alone is regular: the components still differ
    assert same_components.log_det == -np.inf and np.isfinite(same_components.log_pdet)
    assert same_components.condition_number == np.inf
    # at pi = 0 the pi-score is N(mu, 1) / N(0, 1) - 1: E[s^2] = exp(mu^2) - 1
    np.testing.assert_allclose(no_weight.matrix[0, 0], np.e - 1, rtol=1e-10)


def _assert_symmetric_psd(fisher):
    assert np.array_equal(fisher.matrix, fisher.matrix.T)
    largest = max(fisher.eigenvalues[-1], 1e-300)
    assert fisher.eigenvalues[0] >= -1e-13 * largest


@settings(max_examples=20, deadline=None)
@given(pi=st.one_of(st.just(0.0), st.floats(0.0, 1.0)), mu=st.floats(-3, 3),
       sigma=st.floats(0.5, 2.0))
def test_mixture_fisher_is_symmetric_psd(pi, mu, sigma):
    _assert_symmetric_psd(fisher_information(MIXTURE, {"pi": pi, "mu": mu, "sigma": sigma}))


NETWORK = models.two_layer_network(2, 3, 2, activation="sigmoid", noise_scale=None)
NETWORK_INPUTS = np.random.default_rng(10).normal(size=(15, 2))


@settings(max_examples=15, deadline=None)
@given(flat=st.lists(st.floats(-3, 3), min_size=17, max_size=17), noise=st.floats(0.1, 3.0))
def test_network_fisher_is_symmetric_psd(flat, noise):
    w = np.asarray(flat)
    values = {"V": w[:6].reshape(3, 2), "b": w[6:9], "U": w[9:15].reshape(2, 3), "c": w[15:],
              "noise_scale": noise}
    _assert_symmetric_psd(fisher_information(NETWORK, values,
                                             request=FisherRequest(x=NETWORK_INPUTS)))


def test_near_singular_eigenvalue_is_resolved_in_float64_even_when_jax_is_32_bit():
    """At mu = 1e-2 the smallest eigenvalue is 1.6658e-13 (3e-13 of the largest; the same to
    5 digits with trapezoid rules of 6 to 32 steps per sd); float32 cannot resolve it."""
    with jax.enable_x64(False):
        fisher = fisher_information(MIXTURE, {"pi": 0.5, "mu": 1e-2, "sigma": 1.0})
    assert fisher.matrix.dtype == np.float64
    np.testing.assert_allclose(fisher.eigenvalues[0], 1.66579e-13, rtol=1e-4)
    in_float32 = np.linalg.eigvalsh(fisher.matrix.astype(np.float32))[0]
    assert abs(in_float32 - fisher.eigenvalues[0]) > fisher.eigenvalues[0]


def test_unconstrained_fisher_is_the_pullback_and_keeps_rank():
    """I_u = J^T I J with J = d(pi, mu, sigma) / d(logit pi, mu, log sigma)."""
    point = {"pi": 0.3, "mu": 0.8, "sigma": 1.4}
    natural = fisher_information(MIXTURE, point)
    unconstrained = fisher_information(MIXTURE, point,
                                       request=FisherRequest(coordinates="unconstrained"))
    jacobian = np.diag([0.3 * 0.7, 1.0, 1.4])
    np.testing.assert_allclose(unconstrained.matrix, jacobian.T @ natural.matrix @ jacobian,
                               rtol=1e-10)
    np.testing.assert_allclose(unconstrained.log_det - natural.log_det,
                               2 * np.log(np.linalg.det(jacobian)), rtol=1e-10)
    assert unconstrained.rank == natural.rank == 3


def test_monte_carlo_agrees_with_exact_within_four_standard_errors():
    point = {"pi": 0.4, "mu": 1.5, "sigma": 0.8}
    exact = fisher_information(MIXTURE, point)
    estimate = fisher_information(MIXTURE, point, key=jax.random.key(3),
                                  request=FisherRequest(kind="monte_carlo", num_draws=5000))
    assert estimate.std_error.shape == (3, 3) and np.all(estimate.std_error > 0)
    assert np.all(np.abs(estimate.matrix - exact.matrix) <= 4 * estimate.std_error)
    assert estimate.num_draws == 5000 and "5000 replicates" in repr(estimate)


def test_monte_carlo_regression_agrees_with_exact():
    spec = models.two_layer_network(2, 3, 2, activation="tanh")
    rng = np.random.default_rng(5)
    values = {"V": rng.normal(size=(3, 2)), "b": rng.normal(size=3),
              "U": rng.normal(size=(2, 3)), "c": rng.normal(size=2)}
    x = rng.normal(size=(40, 2))
    exact = fisher_information(spec, values, request=FisherRequest(x=x))
    estimate = fisher_information(spec, values, key=jax.random.key(6),
                                  request=FisherRequest(x=x, kind="monte_carlo", num_draws=200))
    assert np.all(np.abs(estimate.matrix - exact.matrix) <= 4 * estimate.std_error + 1e-12)


def test_empirical_fisher_is_the_mean_outer_product_of_data_gradients():
    """Linear regression, unit noise: g_i = (y_i - x_i . w) x_i at the observed y_i."""
    spec = models.linear_regression(3, noise_scale=1.0)
    truth = {"w": np.array([0.5, -1.0, 2.0])}
    data = {k: np.asarray(v) for k, v in spec.simulate(jax.random.key(7), truth, 40).items()}
    w = np.array([0.4, -0.8, 1.5])
    fisher = fisher_information(spec, {"w": w}, request=FisherRequest(kind="empirical", data=data))
    gradients = (data["y"] - data["x"] @ w)[:, None] * data["x"]
    np.testing.assert_allclose(fisher.matrix, gradients.T @ gradients / 40, rtol=1e-10)
    assert "EMPIRICAL" in repr(fisher) and "not the Fisher" in repr(fisher)


def test_repeated_calls_at_new_points_do_not_recompile(count_compiles):
    fisher_information(MIXTURE, {"pi": 0.5, "mu": 1.0, "sigma": 1.0})
    with count_compiles() as counter:
        for mu in (0.9, 1.1, 1.2):
            fisher_information(MIXTURE, {"pi": 0.5, "mu": mu, "sigma": 1.0})
    assert counter.count == 0


def test_result_reports_and_converts():
    fisher = fisher_information(MIXTURE, {"pi": 0.5, "mu": 0.0, "sigma": 1.0})
    text = repr(fisher)
    assert "exact Fisher information" in text and "rank=2" in text and "pi=0.5" in text
    row = fisher.summary().iloc[0]
    assert (row["rank"], row["nullity"], row["d"]) == (2, 1, 3)
    dataset = fisher.to_xarray()
    assert list(dataset["fisher"].coords["row"].values) == ["pi", "mu", "sigma"]
    assert fisher.is_singular and fisher.null_space().shape == (3, 1)


def test_spectrum_plot_draws_the_threshold():
    import matplotlib

    matplotlib.use("Agg")
    figure = fisher_information(MIXTURE, {"pi": 0.5, "mu": 0.0, "sigma": 1.0}).plot()
    axis = figure.axes[0]
    assert "rank 2 of 3" in axis.get_title()
    assert any(line.get_linestyle() == "--" for line in axis.get_lines())


MIXTURE_POINT = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}


@pytest.mark.parametrize(
    "params, kwargs, message",
    [
        ({"pi": np.nan, "mu": 1.0, "sigma": 1.0}, {}, "not finite"),
        ({"pi": 0.5, "mu": 1.0, "sigma": 1.0, "tau": 1.0}, {}, "unknown: \\['tau'\\]"),
        ({"pi": 0.5, "mu": 1.0}, {}, "missing: \\['sigma'\\]"),
        ({"pi": 1.5, "mu": 1.0, "sigma": 1.0}, {}, "outside its support"),
        ({"pi": 0.5, "mu": 1.0, "sigma": -1.0}, {}, "outside its support"),
        ({"pi": 0.5, "mu": [1.0, 2.0], "sigma": 1.0}, {}, "shape"),
        (MIXTURE_POINT, {"kind": "observed"}, "kind must be one of"),
        (MIXTURE_POINT, {"x": np.zeros((3, 1))}, "density model with no inputs"),
        (MIXTURE_POINT, {"kind": "monte_carlo", "num_draws": 10}, "needs a PRNG key"),
        (MIXTURE_POINT, {"kind": "monte_carlo", "key": jax.random.key(0)}, "needs num_draws"),
        (MIXTURE_POINT, {"kind": "monte_carlo", "num_draws": 1, "key": jax.random.key(0)},
         "num_draws must be an integer >= 2"),
        (MIXTURE_POINT, {"num_draws": 100}, "num_draws is for kind='monte_carlo'"),
        (MIXTURE_POINT, {"key": jax.random.key(0)}, "key is for kind='monte_carlo'"),
        (MIXTURE_POINT, {"kind": "empirical"}, "needs data="),
        (MIXTURE_POINT, {"data": {"y": np.zeros(3)}}, "data is for kind='empirical'"),
        (MIXTURE_POINT, {"coordinates": "polar"}, "coordinates must be one of"),
        (MIXTURE_POINT, {"rank_tol": 0.0}, "rank_tol"),
        ({"pi": 0.0, "mu": 1.0, "sigma": 1.0}, {"coordinates": "unconstrained"}, "at infinity"),
        (MIXTURE_POINT, {"kind": "empirical", "data": {"y": [0.1, np.inf]}}, "non-finite"),
    ],
)
def test_bad_input_on_the_mixture_raises(params, kwargs, message):
    """`kwargs` are the request's fields and the key: a bad field is refused when the
    FisherRequest is built, what needs the model when it is used."""
    fields = {name: value for name, value in kwargs.items() if name != "key"}
    with pytest.raises(ValueError, match=message):
        fisher_information(MIXTURE, params, key=kwargs.get("key"),
                           request=FisherRequest(**fields))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "give its inputs x"),
        ({"x": np.zeros((5, 3))}, "must have shape \\(n, 2\\)"),
        ({"x": np.full((5, 2), np.nan)}, "non-finite"),
        ({"x": np.zeros((5, 2)), "x_weights": -np.ones(5)}, "non-negative"),
        ({"x": np.zeros((5, 2)), "x_weights": np.ones(4)}, "x_weights must be 5"),
    ],
)
def test_bad_input_on_a_regression_model_raises(kwargs, message):
    spec = models.two_layer_network(2, 3, 1)
    values = {"V": np.ones((3, 2)), "b": np.zeros(3), "U": np.ones((1, 3)), "c": np.zeros(1)}
    with pytest.raises(ValueError, match=message):
        fisher_information(spec, values, request=FisherRequest(**kwargs))


def test_no_exact_fisher_for_vector_mixtures_points_to_monte_carlo():
    spec = models.gaussian_mixture(2, dim=2)
    values = {"weights": [0.5, 0.5], "means": [[0.0, 0.0], [1.0, 1.0]], "scales": np.ones((2, 2))}
    with pytest.raises(ValueError, match="monte_carlo"):
        fisher_information(spec, values)


def test_model_must_be_a_problem_a_model_spec_or_a_model_function_with_inputs():
    with pytest.raises(ValueError, match="Problem, a NumPyro model function .* or a ModelSpec"):
        fisher_information("normal", {"mu": 0.0})
    with pytest.raises(ValueError, match="needs its inputs: x="):
        fisher_information(lambda y: None, {"mu": 0.0})
