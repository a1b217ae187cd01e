"""Geometry of networks trained elsewhere (`Problem.from_predict`) and of NumPyro model
functions given with their inputs: the true Fisher against the generalised Gauss-Newton
matrix written out by hand, every geometry entry point, and the refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from slt import FisherRequest, Problem, fisher_information, fisher_scan, kl_divergence
from slt.geometry.matrix_free import fisher_spectrum, fisher_vector_product
from slt.models.base import ModelSpec
from slt.validation import InputError

N, D, H, K = 40, 3, 5, 4


def mlp(params, x):
    hidden = jnp.tanh(x @ params["W1"] + params["b1"])
    return hidden @ params["W2"] + params["b2"]


@pytest.fixture(scope="module")
def x():
    return np.asarray(jax.random.normal(jax.random.key(0), (N, D)), np.float64)


@pytest.fixture(scope="module")
def params():
    keys = jax.random.split(jax.random.key(1), 2)
    return {"W1": jax.random.normal(keys[0], (D, H)), "b1": jnp.linspace(-0.5, 0.5, H),
            "W2": jax.random.normal(keys[1], (H, K)), "b2": jnp.zeros(K)}


def output_jacobian(problem, params, x):
    """d f(w, x_i) / d w, (n, K, d), in the Problem's flat order (the Fisher's coordinates)."""
    return np.asarray(jax.jacfwd(lambda flat: mlp(problem.unravel(flat), x))(
        problem.ravel(params)))


@pytest.fixture(scope="module")
def classifier(x, params):
    labels = np.asarray(jnp.argmax(mlp(params, x), axis=1))
    return Problem.from_predict(mlp, params, {"x": x, "y": labels}, "categorical")


def test_classifier_fisher_is_the_gauss_newton_matrix_of_softmax(classifier, params, x):
    fisher = fisher_information(classifier, params)
    p = np.asarray(jax.nn.softmax(mlp(params, x)))
    covariance = np.einsum("nk,kl->nkl", p, np.eye(K)) - np.einsum("nk,nl->nkl", p, p)
    jac = output_jacobian(classifier, params, x)
    expected = np.einsum("nki,nkl,nlj->ij", jac, covariance, jac) / N
    np.testing.assert_allclose(fisher.matrix, expected, rtol=0, atol=1e-10)
    # a common shift of the K logits changes nothing: b2 along 1, and W2's rows along 1
    assert fisher.dim == classifier.dim and fisher.rank == classifier.dim - (H + 1)
    assert fisher.names[:2] == ("W1[0,0]", "W1[0,1]") and fisher.names[-1] == "b2[3]"


def test_gaussian_bernoulli_and_poisson_networks_in_closed_form(params, x):
    outputs = np.asarray(mlp(params, x))
    scale = np.array([0.5, 1.0, 2.0, 4.0])
    problem = Problem.from_predict(mlp, params, {"x": x, "y": outputs + 0.1}, "gaussian",
                                   scale=scale)
    jac = output_jacobian(problem, params, x) / scale[None, :, None]
    np.testing.assert_allclose(fisher_information(problem, params).matrix,
                               np.einsum("nki,nkj->ij", jac, jac) / N, rtol=0, atol=1e-10)
    # Gaussian: L_n keeps its constants
    residual = (outputs + 0.1 - outputs) / scale
    nll = np.mean(np.sum(0.5 * residual**2 + np.log(scale) + 0.5 * np.log(2 * np.pi), axis=1))
    assert abs(float(problem.loss(params)) - nll) < 1e-12
    for likelihood, variance in (("bernoulli", lambda f: jax.nn.sigmoid(f) * jax.nn.sigmoid(-f)),
                                 ("poisson", jnp.exp)):
        problem = Problem.from_predict(mlp, params, {"x": x, "y": (outputs > 0) * 1.0},
                                       likelihood)
        jac = output_jacobian(problem, params, x)
        expected = np.einsum("nki,nk,nkj->ij", jac, np.asarray(variance(outputs)), jac) / N
        np.testing.assert_allclose(fisher_information(problem, params).matrix, expected,
                                   rtol=0, atol=1e-10)


def test_every_geometry_entry_point_takes_the_network(classifier, params, x):
    fisher = fisher_information(classifier, params)
    v = np.asarray(jax.random.normal(jax.random.key(2), (classifier.dim,)))
    np.testing.assert_allclose(fisher_vector_product(classifier, params)(v), fisher.matrix @ v,
                               rtol=1e-12, atol=1e-12)
    delta = jax.tree_util.tree_map(lambda a: 1e-3 * jnp.ones_like(a), params)
    moved = jax.tree_util.tree_map(jnp.add, params, delta)
    step = np.asarray(classifier.ravel(delta))
    kl = kl_divergence(classifier, params, moved)
    assert abs(kl - 0.5 * step @ fisher.matrix @ step) < 2e-3 * kl
    spectrum = fisher_spectrum(classifier, params, key=jax.random.key(3),
                               num_steps=classifier.dim)
    assert spectrum.rank == fisher.rank
    np.testing.assert_allclose(spectrum.max_eigenvalue, fisher.eigenvalues[-1], rtol=1e-10)
    scan = fisher_scan(classifier, params, {"b1[0]": np.linspace(-1.0, 1.0, 3)},
                       progress=False)
    assert np.all(scan["rank"].values == fisher.rank)
    monte_carlo = fisher_information(classifier, params, key=jax.random.key(4),
                                     request=FisherRequest(kind="monte_carlo", num_draws=40))
    z = np.abs(monte_carlo.matrix - fisher.matrix) / np.maximum(monte_carlo.std_error, 1e-12)
    assert np.all(z < 5.0), z.max()  # the largest of ~1900 entries: 4 se would fail ~1 in 8
    empirical = fisher_information(classifier, params, request=FisherRequest(kind="empirical"))
    assert empirical.kind == "empirical" and empirical.matrix.shape == fisher.matrix.shape


def logistic(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


def test_a_numpyro_model_function_with_its_inputs(x):
    w0 = np.array([0.5, -1.0, 0.3])
    p = 1 / (1 + np.exp(-x @ w0))
    expected = np.einsum("i,ij,ik->jk", p * (1 - p), x, x) / N
    fisher = fisher_information(logistic, {"w": w0}, request=FisherRequest(x=x))
    np.testing.assert_allclose(fisher.matrix, expected, rtol=0, atol=1e-12)
    p1 = 1 / (1 + np.exp(-x @ (w0 + 0.2)))
    exact_kl = np.mean(p * np.log(p / p1) + (1 - p) * np.log((1 - p) / (1 - p1)))
    assert abs(kl_divergence(logistic, {"w": w0}, {"w": w0 + 0.2}, x=x) - exact_kl) < 1e-12
    scan = fisher_scan(logistic, {"w": w0}, {"w[1]": np.linspace(-1, 1, 3)},
                       request=FisherRequest(x=x), progress=False)
    assert np.all(scan["rank"].values == D)
    y = (x @ w0 > 0) * 1.0
    empirical = fisher_information(logistic, {"w": w0},
                                   request=FisherRequest(kind="empirical", data={"x": x, "y": y}))
    scores = (y - p)[:, None] * x
    np.testing.assert_allclose(empirical.matrix, scores.T @ scores / N, rtol=0, atol=1e-12)


def test_a_multivariate_normal_with_fixed_covariance(x):
    covariance = np.array([[1.0, 0.3], [0.3, 0.5]])

    def model(x, y=None, learned=False):
        W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([D, 2]).to_event(2))
        scale = numpyro.sample("s", dist.LogNormal(0.0, 1.0)) if learned else 1.0
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.MultivariateNormal(x @ W, scale * covariance), obs=y)

    W0 = np.asarray(jax.random.normal(jax.random.key(5), (D, 2)))
    # d mean_l / d W_jl = x_j: I = mean_i x_i x_i^T kron Sigma^-1 (W row-major)
    expected = np.kron(x.T @ x / N, np.linalg.inv(covariance))
    fisher = fisher_information(model, {"W": W0}, request=FisherRequest(x=x))
    np.testing.assert_allclose(fisher.matrix, expected, rtol=0, atol=1e-12)
    monte_carlo = fisher_information(model, {"W": W0}, key=jax.random.key(6),
                                     request=FisherRequest(x=x, kind="monte_carlo", num_draws=300))
    assert np.all(np.abs(monte_carlo.matrix - expected) < 4.5 * monte_carlo.std_error)
    step = 0.1 * np.ones((D, 2))
    shift = x @ step
    exact_kl = 0.5 * np.mean(np.einsum("ni,ij,nj->n", shift, np.linalg.inv(covariance), shift))
    assert abs(kl_divergence(model, {"W": W0}, {"W": W0 + step}, x=x) - exact_kl) < 1e-14

    def learned(x, y=None):
        model(x, y, learned=True)

    with pytest.raises(ValueError, match=r"parameter-dependent covariance.*monte_carlo"):
        fisher_information(learned, {"W": W0, "s": 1.0}, request=FisherRequest(x=x))


def test_refusals_name_what_is_wrong(params, x):
    labels = np.zeros(N, np.int32)
    data = {"x": x, "y": labels}
    with pytest.raises(InputError, match="likelihood must be one of"):
        Problem.from_predict(mlp, params, data, "student")
    with pytest.raises(InputError, match="no outputs 'labels'"):
        Problem.from_predict(mlp, params, data, "categorical", y="labels")
    with pytest.raises(InputError, match=r"shape \(40, 4\); a gaussian likelihood needs y's"):
        Problem.from_predict(mlp, params, {"x": x, "y": np.zeros(N)}, "gaussian")
    with pytest.raises(InputError, match="integer class labels"):
        Problem.from_predict(mlp, params, {"x": x, "y": labels * 1.0}, "categorical")
    with pytest.raises(InputError, match=r"must lie in \[0, 4\)"):
        Problem.from_predict(mlp, params, {"x": x, "y": labels + 4}, "categorical")
    with pytest.raises(InputError, match="in {0, 1}"):
        Problem.from_predict(mlp, params, {"x": x, "y": np.full((N, K), 2.0)}, "bernoulli")
    with pytest.raises(InputError, match="scale must be finite and > 0"):
        Problem.from_predict(mlp, params, {"x": x, "y": np.zeros((N, K))}, "gaussian",
                             scale=0.0)
    with pytest.raises(InputError, match=r"scale has shape \(3,\); it must be a float or one sd"):
        Problem.from_predict(mlp, params, {"x": x, "y": np.zeros((N, K))}, "gaussian",
                             scale=np.ones(3))
    loss_only = Problem.from_loss(lambda p, batch: jnp.sum(mlp(p, batch["x"]) ** 2, axis=1),
                                  params, data)
    with pytest.raises(InputError, match="from_predict"):
        fisher_information(loss_only, params)
    classifier = Problem.from_predict(mlp, params, data, "categorical")
    with pytest.raises(ValueError, match="structure of the network's parameters"):
        fisher_information(classifier, {"W1": params["W1"]})
    with pytest.raises(InputError, match="needs its inputs: x="):
        fisher_information(logistic, {"w": np.zeros(D)})

    def unnamed(x, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("obs", dist.Bernoulli(logits=x @ w), obs=y)

    with pytest.raises(InputError, match="one observed site named after an argument"):
        fisher_information(unnamed, {"w": np.zeros(D)}, request=FisherRequest(x=x))


def test_a_broken_simulator_of_a_model_spec_is_named_not_taken_for_a_shape_error(x):
    def simulate(key, values, n):
        raise RuntimeError("no simulator written")

    spec = ModelSpec("hand-built", logistic, D, "N(0, 1)", ("w",), simulate)
    with pytest.raises(ValueError, match="its simulator failed .*no simulator written"):
        fisher_information(spec, {"w": np.zeros(D)}, request=FisherRequest(x=x))
