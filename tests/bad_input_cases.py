"""The small problems that test_bad_inputs.py and test_input_sweep.py feed bad input to.

A linear network y = x W + b (W of shape (2, 1)) on n = 40 examples, as a `from_predict`
Gaussian problem, its parameters as float32 arrays, and a NumPyro regression model function
for the Fisher information of a user's model.
"""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

N = 40
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 2)).astype(np.float32)
Y = (X @ np.array([[1.0], [-0.5]]) + 0.3 + 0.1 * RNG.normal(size=(N, 1))).astype(np.float32)
PARAMS = {"W": jnp.array([[1.0], [-0.5]], jnp.float32), "b": jnp.array([0.3], jnp.float32)}


def predict(params, x):
    """The network's outputs: means of y (gaussian) or logits (categorical)."""
    return x @ params["W"] + params["b"]


def regression(x, y=None):
    """y ~ N(x w, 1), w ~ N(0, I_2): a NumPyro model function model(x, y=None)."""
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]))
    numpyro.sample("y", dist.Normal(x @ w, 1.0), obs=y)
