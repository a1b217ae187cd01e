"""Chains of a stochastic-gradient kernel (`slt.samplers.sgld`, `slt.samplers.sghmc`) on a
Gaussian target with its exact gradient: the draws the kernels' exactness tests read."""

import jax
import jax.numpy as jnp
import numpy as np


def positions_on_a_gaussian(algorithm, mean, scale, step_size, *, num_chains: int,
                            burn_in: int, num_steps: int, key) -> np.ndarray:
    """The positions of `num_chains` independent chains of `algorithm` (an `SGLDKernel`) on
    N(mean, diag(scale^2)), each started at the mean, after `burn_in` steps: an array
    (chain, step, coordinate) of `num_steps` steps."""
    mean, scale = np.asarray(mean), np.asarray(scale)

    def log_density(w):
        return -0.5 * jnp.sum(((w - mean) / scale) ** 2), None

    def run(chain_key):
        def step(state, k):
            state, _ = algorithm.step(k, state, log_density, step_size)
            return state, state.position

        keys = jax.random.split(chain_key, burn_in + num_steps)
        _, positions = jax.lax.scan(step, algorithm.init(jnp.asarray(mean)), keys)
        return positions[burn_in:]

    return np.asarray(jax.vmap(run)(jax.random.split(key, num_chains)))
