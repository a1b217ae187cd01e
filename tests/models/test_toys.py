import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from slt import models


@pytest.mark.parametrize("powers", [(1, 1), (1, 2), (2, 2), (1, 3), (0, 1, 3)])
def test_normal_crossing(handwritten_check, powers):
    spec = models.normal_crossing(powers, noise_scale=0.5)
    assert spec.dim == len(powers)
    handwritten_check(
        spec,
        {"w": jnp.zeros(len(powers))},
        lambda v, d: norm.logpdf(d["y"], d["x"] * np.prod(v["w"] ** np.array(powers)), 0.5),
    )


def test_product_model(handwritten_check):
    spec = models.product_model()
    handwritten_check(
        spec,
        {"w": jnp.array([1.0, 0.5])},
        lambda v, d: norm.logpdf(d["y"], v["w"][0] * v["w"][1] * d["x"], 1.0),
    )


def test_truth_at_zero_simulates_pure_noise(key):
    data = models.normal_crossing((1, 2)).simulate(key, {"w": jnp.zeros(2)}, 5000)
    y = np.asarray(data["y"])
    # y ~ N(0, 1): the sample variance has standard error sqrt(2 / n) = 0.02; 4 se
    assert abs(y.var() - 1.0) < 0.08


def test_toys_reject_bad_arguments(key):
    with pytest.raises(ValueError, match="powers"):
        models.normal_crossing((0, 0))
    with pytest.raises(ValueError, match="true_params lack"):
        models.product_model().simulate(key, {}, 10)
    with pytest.raises(ValueError, match="n must be"):
        models.product_model().simulate(key, {"w": jnp.zeros(2)}, 0)
