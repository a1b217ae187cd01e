import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from slt import models


def test_linear_regression_known_noise(handwritten_check):
    spec = models.linear_regression(3, noise_scale=0.7, prior_precision=2.0)
    handwritten_check(
        spec,
        {"w": jnp.array([1.0, -2.0, 0.5])},
        lambda v, d: norm.logpdf(d["y"], d["x"] @ v["w"], 0.7),
    )


def test_linear_regression_unknown_noise(handwritten_check):
    spec = models.linear_regression(2, noise_scale=None)
    assert spec.site_names == ("noise_variance", "w")
    handwritten_check(
        spec,
        {"w": jnp.array([1.0, 2.0]), "noise_variance": 0.5},
        lambda v, d: norm.logpdf(d["y"], d["x"] @ v["w"], np.sqrt(v["noise_variance"])),
    )


def _dln_loglik(names, noise):
    def loglik(v, d):
        mean = d["x"]
        for name in names:
            mean = mean @ v[name].T
        return norm.logpdf(d["y"], mean, noise).sum(axis=1)

    return loglik


@pytest.mark.parametrize("widths,rank", [([5, 3, 3, 5], 1), ([4, 6, 2, 6, 4], 2), ([3, 2], 2)])
def test_deep_linear_network(handwritten_check, widths, rank):
    spec = models.deep_linear_network(widths, noise_scale=0.5)
    names = [f"W{i + 1}" for i in range(len(widths) - 1)]
    truth = models.random_low_rank(jax.random.key(3), widths, rank)
    assert spec.dim == sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    handwritten_check(spec, truth, _dln_loglik(names, 0.5))


def test_reduced_rank_regression_is_depth_two_network(handwritten_check):
    spec = models.reduced_rank_regression(
        5, 3, 4, noise_scale=0.1, prior_scale=10.0, input_scale=3.0
    )
    assert spec.dim == 3 * (5 + 4)
    truth = models.random_low_rank(jax.random.key(4), [5, 3, 4], 2, scale=0.2)
    handwritten_check(spec, truth, _dln_loglik(["W1", "W2"], 0.1))


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_random_low_rank_has_the_requested_rank(rank):
    values = models.random_low_rank(jax.random.key(5), [6, 4, 5], rank)
    product = np.asarray(values["W2"] @ values["W1"])
    assert np.linalg.matrix_rank(product, tol=1e-8) == rank


def test_linear_builders_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_features"):
        models.linear_regression(0)
    with pytest.raises(ValueError, match="noise_scale"):
        models.linear_regression(2, noise_scale=-1.0)
    with pytest.raises(ValueError, match="widths"):
        models.deep_linear_network([3])
    with pytest.raises(ValueError, match="rank"):
        models.random_low_rank(jax.random.key(0), [3, 2, 3], 3)
