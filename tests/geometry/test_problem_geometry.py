"""Geometry on a `Problem` built from a user's own NumPyro model: exact Fisher of the
exponential families against closed forms, Monte Carlo against exact, KL, scans, spectra and
natural gradient through the same path."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from slt import FisherRequest, Problem, fisher_information, fisher_scan, kl_divergence, models
from slt.fit.natural_gradient import natural_gradient_fit
from slt.geometry.matrix_free import fisher_spectrum
from slt.validation import InputError

N, D, K = 60, 3, 4
TRIALS = 5


def logistic(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


def logistic_probs(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(probs=jax.nn.sigmoid(x @ w)), obs=y)


def poisson(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(x @ w)), obs=y)


def binomial(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Binomial(TRIALS, logits=x @ w), obs=y)


def softmax(x, y=None):
    W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([D, K]).to_event(2))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Categorical(logits=x @ W), obs=y)


def two_gaussians(y=None):
    """The library's fixed_component_mixture, written by hand."""
    pi = numpyro.sample("pi", dist.Uniform(0.0, 1.0))
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.LogNormal(0.0, 1.0))
    mixture = dist.MixtureSameFamily(
        dist.Categorical(jnp.stack([1.0 - pi, pi])),
        dist.Normal(jnp.stack([0.0, mu]), jnp.stack([1.0, sigma])),
    )
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", mixture, obs=y)


@pytest.fixture(scope="module")
def x():
    return np.asarray(jax.random.normal(jax.random.key(0), (N, D)), np.float64)


def problem_of(model, x, y):
    return Problem(model, {"x": x, "y": y})


W0 = np.array([0.5, -1.0, 0.3])


@pytest.mark.parametrize("model", [logistic, logistic_probs])
def test_logistic_regression_fisher_is_mean_p_one_minus_p_x_xt(model, x):
    problem = problem_of(model, x, (x @ W0 > 0).astype(np.float64))
    fisher = fisher_information(problem, {"w": W0})
    p = 1 / (1 + np.exp(-x @ W0))
    expected = np.einsum("i,ij,ik->jk", p * (1 - p), x, x) / N
    np.testing.assert_allclose(fisher.matrix, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    assert fisher.num_inputs == N and fisher.kind == "exact"


def test_binomial_poisson_and_softmax_regression_in_closed_form(x):
    rate = np.exp(x @ W0)
    problem = problem_of(poisson, x, np.round(rate))
    expected = np.einsum("i,ij,ik->jk", rate, x, x) / N
    np.testing.assert_allclose(fisher_information(problem, {"w": W0}).matrix, expected,
                               rtol=1e-10)
    p = 1 / (1 + np.exp(-x @ W0))
    problem = problem_of(binomial, x, np.full(N, 2.0))
    expected = np.einsum("i,ij,ik->jk", TRIALS * p * (1 - p), x, x) / N
    np.testing.assert_allclose(fisher_information(problem, {"w": W0}).matrix, expected,
                               rtol=1e-10)
    W = np.asarray(jax.random.normal(jax.random.key(1), (D, K)), np.float64)
    logits = x @ W
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    labels = np.argmax(logits, axis=1)
    problem = problem_of(softmax, x, labels)
    # d logits_k / d W_jl = x_j [k = l]: I = mean_i (x_i x_i^T) kron (diag(p_i) - p_i p_i^T),
    # in the row-major order of W (j major, class minor)
    covariance = np.einsum("ik,kl->ikl", p, np.eye(K)) - np.einsum("ik,il->ikl", p, p)
    expected = np.einsum("ij,im,ikl->jkml", x, x, covariance).reshape(D * K, D * K) / N
    fisher = fisher_information(problem, {"W": W})
    np.testing.assert_allclose(fisher.matrix, expected, rtol=0, atol=1e-10)
    assert fisher.rank == D * (K - 1)  # a shift of all K logits changes nothing
    # the empirical Fisher takes the integer labels from the Problem's data
    empirical = fisher_information(problem, {"W": W}, request=FisherRequest(kind="empirical"))
    assert empirical.kind == "empirical" and empirical.matrix.shape == (D * K, D * K)


@pytest.mark.parametrize("model", [binomial, poisson, softmax])  # (Bernoulli: Binomial(1))
def test_monte_carlo_agrees_with_exact_within_four_standard_errors(model, x):
    y = np.zeros(N, np.int32 if model is softmax else np.float64)
    problem = problem_of(model, x, y)
    point = {"W": np.asarray(jax.random.normal(jax.random.key(2), (D, K)))} if (
        model is softmax) else {"w": W0}
    exact = fisher_information(problem, point)
    monte_carlo = fisher_information(problem, point, key=jax.random.key(3),
                                     request=FisherRequest(kind="monte_carlo", num_draws=200))
    z = np.abs(monte_carlo.matrix - exact.matrix) / np.maximum(monte_carlo.std_error, 1e-12)
    assert np.all(z < 4.5), z.max()  # 4.5: the largest of up to 144 entries


def test_a_hand_written_mixture_equals_the_library_model():
    spec = models.fixed_component_mixture()
    data = spec.simulate(jax.random.key(4), {"pi": 0.3, "mu": 1.5, "sigma": 0.8}, 50)
    problem = Problem(two_gaussians, data)
    points = [{"pi": 0.5, "mu": 1.0, "sigma": 1.0}, {"pi": 0.0, "mu": 1.0, "sigma": 1.0},
              {"pi": 0.3, "mu": 0.0, "sigma": 1.0}, {"pi": 0.9, "mu": -2.0, "sigma": 0.5},
              {"pi": 0.1, "mu": 3.0, "sigma": 2.0}]
    for point in points:
        np.testing.assert_allclose(fisher_information(problem, point).matrix,
                                   fisher_information(spec, point).matrix, rtol=0, atol=1e-10)


def test_kl_scan_spectrum_and_natural_gradient_take_the_problem(x):
    problem = problem_of(logistic, x, (x @ W0 + 0.5 * np.sin(7 * x[:, 0]) > 0) * 1.0)
    fisher = fisher_information(problem, {"w": W0})
    # KL(w || w + delta) = delta^T I delta / 2 + O(|delta|^3)
    delta = 1e-3 * np.array([1.0, -2.0, 0.5])
    kl = kl_divergence(problem, {"w": W0}, {"w": W0 + delta})
    assert abs(kl - 0.5 * delta @ fisher.matrix @ delta) < 1e-3 * kl
    p0, p1 = (1 / (1 + np.exp(-x @ w)) for w in (W0, W0 + 0.3))
    exact_kl = np.mean(p0 * np.log(p0 / p1) + (1 - p0) * np.log((1 - p0) / (1 - p1)))
    assert abs(kl_divergence(problem, {"w": W0}, {"w": W0 + 0.3}) - exact_kl) < 1e-12
    scan = fisher_scan(problem, {"w": W0}, {"w[0]": np.linspace(-1, 1, 5)}, progress=False)
    assert np.all(scan["rank"].values == D) and scan.model_name == "logistic"
    spectrum = fisher_spectrum(problem, {"w": W0}, key=jax.random.key(5), num_steps=D)
    np.testing.assert_allclose(np.sort(spectrum.ritz_values), fisher.eigenvalues, rtol=1e-8)
    fit = natural_gradient_fit(problem, key=jax.random.key(6), max_steps=30)
    gradient = jax.grad(lambda flat: problem.log_joint(problem.unravel(flat)))(
        problem.ravel(fit.params))
    assert float(jnp.linalg.norm(gradient)) < 1e-5 * problem.n


def test_refusals_name_the_reason(x):
    problem = Problem.from_loss(lambda params, batch: (batch["y"] - batch["x"] @ params) ** 2,
                                jnp.zeros(D), {"x": x, "y": x[:, 0]})
    with pytest.raises(InputError, match="from_loss"):
        fisher_information(problem, {"w": W0})
    with pytest.raises(InputError, match="carries its data"):
        natural_gradient_fit(problem_of(logistic, x, np.zeros(N)), {"x": x}, jax.random.key(0))

    def student(x, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.StudentT(3.0, x @ w, 1.0), obs=y)

    with pytest.raises(ValueError, match="StudentT observations.*monte_carlo"):
        fisher_information(problem_of(student, x, np.zeros(N)), {"w": W0})

    def renamed(x, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("obs", dist.Bernoulli(logits=x @ w), obs=y)

    with pytest.raises(ValueError, match="'obs' must be named after its data argument"):
        fisher_information(problem_of(renamed, x, np.zeros(N)), {"w": W0})


def test_repeated_geometry_on_a_problem_compiles_nothing_new(x, count_compiles):
    """Fisher, KL and scan at new points of the same Problem reuse its programs (that they
    are released with it is tested in tests/test_compile_cache.py)."""
    problem = problem_of(logistic, x, np.zeros(N))

    def geometry_at(w):
        fisher_information(problem, {"w": w})
        kl_divergence(problem, {"w": w}, {"w": w + 0.1})
        fisher_scan(problem, {"w": w}, {"w[0]": w[0] + np.linspace(-1, 1, 5)}, progress=False)

    geometry_at(W0)
    with count_compiles() as counter:
        geometry_at(W0 + 0.2)
    assert counter.count == 0
