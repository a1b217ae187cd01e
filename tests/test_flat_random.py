"""slt.flat_random: the same values as `jax.random`, under both Threefry settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt import flat_random


@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("shape", [(7,), (5, 3), (2, 3, 4), (0, 3)])
def test_normal_and_uniform_equal_jax_random_bitwise(partitionable, shape):
    key = jax.random.key(11)
    with jax.threefry_partitionable(partitionable):
        for dtype in (jnp.float32, jnp.float64):
            ours = flat_random.normal(key, shape, dtype)
            theirs = jax.random.normal(key, shape, dtype)
            assert ours.dtype == theirs.dtype and ours.shape == shape
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(flat_random.uniform(key, shape, jnp.float32, -2.0, 3.0),
                                      jax.random.uniform(key, shape, jnp.float32, -2.0, 3.0))


@pytest.mark.parametrize("partitionable", [True, False])
def test_categorical_equals_jax_random_bitwise(partitionable):
    logits = jnp.log(jnp.array([0.1, 0.2, 0.3, 0.4, 0.0]))  # a zero-weight category too
    with jax.threefry_partitionable(partitionable):
        for seed in range(3):
            key = jax.random.key(seed)
            ours = flat_random.categorical(key, logits, 500)
            theirs = jax.random.categorical(key, logits, shape=(500,))
            assert ours.dtype == theirs.dtype and ours.shape == (500,)
            np.testing.assert_array_equal(ours, theirs)
            assert not np.any(ours == 4)


def test_under_jit_the_values_are_the_same():
    key = jax.random.key(2)
    np.testing.assert_array_equal(jax.jit(lambda k: flat_random.normal(k, (4, 6)))(key),
                                  jax.random.normal(key, (4, 6)))
