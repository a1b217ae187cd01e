import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from slt import InputError, models

NUMPY_ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, 0.0),
    "sigmoid": expit,
    "identity": lambda z: z,
}


def _network_loglik(activation, bias, noise):
    def loglik(v, d):
        hidden = d["x"] @ v["V"].T + (v["b"] if bias else 0.0)
        mean = NUMPY_ACTIVATIONS[activation](hidden) @ v["U"].T + (v["c"] if bias else 0.0)
        scale = v["noise_scale"] if noise is None else noise
        return norm.logpdf(d["y"], mean, scale).sum(axis=1)

    return loglik


@pytest.mark.parametrize("activation", sorted(models.ACTIVATIONS))
@pytest.mark.parametrize("bias,noise", [(True, 0.5), (False, None)])
def test_two_layer_network(handwritten_check, activation, bias, noise):
    n_in, h, n_out = 3, 4, 2
    spec = models.two_layer_network(
        n_in, h, n_out, activation=activation, bias=bias, noise_scale=noise
    )
    expected_d = h * (n_in + n_out) + (h + n_out if bias else 0) + (noise is None)
    assert spec.dim == expected_d
    truth = {"V": jnp.ones((h, n_in)), "U": jnp.ones((n_out, h))}
    if bias:
        truth |= {"b": jnp.zeros(h), "c": jnp.zeros(n_out)}
    if noise is None:
        truth["noise_scale"] = 0.3
    handwritten_check(spec, truth, _network_loglik(activation, bias, noise))


def test_two_layer_network_rejects_bad_arguments():
    with pytest.raises(ValueError, match="activation"):
        models.two_layer_network(1, 2, 1, activation="gelu")
    with pytest.raises(ValueError, match="num_hidden must be an integer >= 1, got 0"):
        models.two_layer_network(1, 0, 1)
    with pytest.raises(InputError, match="num_hidden must be an integer >= 1, got 2.7"):
        models.two_layer_network(1, 2.7, 1)     # was: built h = 2 silently
