import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from slt import InputError, models


def _mixture_loglik(v, d):
    weights, means = v["weights"], v["means"]
    scales = np.broadcast_to(v["scales"], means.shape)
    y = d["y"] if d["y"].ndim == 2 else d["y"][:, None]
    per_component = norm.logpdf(y[:, None, :], means, scales).sum(axis=2)
    return logsumexp(np.log(weights) + per_component, axis=1)


@pytest.mark.parametrize(
    "K,D,shared",
    [(1, 1, False), (3, 1, False), (3, 1, True), (2, 2, False), (3, 2, True)],
)
def test_gaussian_mixture(handwritten_check, K, D, shared):
    spec = models.gaussian_mixture(K, D, shared_scale=shared)
    assert spec.dim == (K - 1) + K * D + (D if shared else K * D)
    truth = {
        "weights": jnp.full(K, 1.0 / K),
        "means": jnp.arange(K * D, dtype=float).reshape(K, D) * 3.0,
        "scales": jnp.ones(D) if shared else jnp.ones((K, D)),
    }
    problem = handwritten_check(spec, truth, _mixture_loglik)
    assert problem.data["y"].ndim == (1 if D == 1 else 2)


def _fixed_component_loglik(v, d, weight="pi", mean="mu", scale="sigma"):
    sigma = v.get(scale, 1.0)
    return np.logaddexp(
        np.log1p(-v[weight]) + norm.logpdf(d["y"], 0.0, 1.0),
        np.log(v[weight]) + norm.logpdf(d["y"], v[mean], sigma),
    )


def test_fixed_component_mixture(handwritten_check):
    spec = models.fixed_component_mixture()
    assert spec.dim == 3
    handwritten_check(spec, {"pi": 0.5, "mu": 1.0, "sigma": 1.0}, _fixed_component_loglik)


def test_two_component_mixture(handwritten_check):
    spec = models.two_component_mixture()
    assert spec.site_names == ("a", "b") and spec.dim == 2
    handwritten_check(
        spec,
        {"a": 0.3, "b": 2.0},
        lambda v, d: _fixed_component_loglik(v, d, weight="a", mean="b"),
    )


def test_mixture_simulation_follows_the_weights(key):
    spec = models.gaussian_mixture(2)
    data = spec.simulate(
        key,
        {
            "weights": jnp.array([0.2, 0.8]),
            "means": jnp.array([[-50.0], [50.0]]),
            "scales": jnp.ones((2, 1)),
        },
        20_000,
    )
    fraction = float(np.mean(np.asarray(data["y"]) > 0))
    # binomial standard error sqrt(0.2 * 0.8 / 20000) = 0.0028; 4 se
    assert abs(fraction - 0.8) < 4 * 0.0028


def test_mixture_builders_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_components"):
        models.gaussian_mixture(0)
    with pytest.raises(InputError, match="num_components must be an integer >= 1, got 2.5"):
        models.gaussian_mixture(2.5)     # was: built K = 2 silently
    with pytest.raises(InputError, match="dim must be an integer >= 1, got 1.5"):
        models.gaussian_mixture(2, 1.5)
    with pytest.raises(ValueError, match="mean_prior_scale"):
        models.fixed_component_mixture(mean_prior_scale=0.0)
