import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt.samplers.shuffle import epoch_indices


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000, 20_000])
def test_each_epoch_is_a_permutation(n):
    key = jax.random.key(0)
    for epoch in range(3):
        order = np.asarray(epoch_indices(key, epoch, jnp.arange(n), n))
        assert np.array_equal(np.sort(order), np.arange(n))


def test_epochs_and_keys_give_different_orders_that_look_uniform():
    n = 1000
    orders = [np.asarray(epoch_indices(jax.random.key(k), e, jnp.arange(n), n))
              for k in range(2) for e in range(2)]
    for a in range(4):
        for b in range(a + 1, 4):
            assert np.mean(orders[a] == orders[b]) < 0.02  # 1/n expected for random orders
    # where example 0 lands over many epochs is uniform: chi-square over 10 bins
    orders_by_epoch = jax.jit(jax.vmap(lambda e: epoch_indices(jax.random.key(1), e,
                                                               jnp.arange(n), n)))(jnp.arange(400))
    landing = np.argmax(np.asarray(orders_by_epoch) == 0, axis=1)
    counts = np.bincount(landing // 100, minlength=10)
    chi2 = np.sum((counts - 40) ** 2 / 40)
    assert chi2 < 27.9  # the 0.999 quantile of chi-square with 9 degrees of freedom
