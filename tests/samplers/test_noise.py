"""The Langevin noise generator: the published Threefry-2x32-20 cipher, and N(0, 1) draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from slt.samplers.noise import standard_normal, threefry_2x32

# Known-answer vectors of Threefry-2x32-20 (Random123's kat_vectors): key, counter, output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KNOWN_ANSWERS)
def test_threefry_matches_the_published_known_answers(key, counter, expected):
    words = threefry_2x32(
        tuple(jnp.uint32(k) for k in key), tuple(jnp.array([c], jnp.uint32) for c in counter)
    )
    assert tuple(int(w[0]) for w in words) == expected


def test_float32_draws_are_standard_normal():
    draws = np.asarray(standard_normal(jax.random.key(3), (400, 500)), np.float64).ravel()
    size = draws.size
    assert draws.dtype == np.float64 and np.all(np.isfinite(draws))
    # mean, variance, skewness and excess kurtosis within 4 standard errors of N(0, 1)
    assert abs(draws.mean()) < 4 / np.sqrt(size)
    assert abs(draws.var() - 1) < 4 * np.sqrt(2 / size)
    assert abs(stats.skew(draws)) < 4 * np.sqrt(6 / size)
    assert abs(stats.kurtosis(draws)) < 4 * np.sqrt(24 / size)
    assert stats.kstest(draws, "norm").pvalue > 1e-4
    # tails: P(|z| > 3) = 0.0027 within 4 binomial standard errors
    tail = np.mean(np.abs(draws) > 3)
    p = 2 * stats.norm.sf(3)
    assert abs(tail - p) < 4 * np.sqrt(p * (1 - p) / size)


def test_draws_are_uncorrelated_across_positions_and_keys():
    size = 200_000
    first = np.asarray(standard_normal(jax.random.key(0), (size,)), np.float64)
    second = np.asarray(standard_normal(jax.random.key(1), (size,)), np.float64)
    bound = 4 / np.sqrt(size)
    # neighbours, the two words of one cipher block (positions i and i + size/2), other keys
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < bound
    half = size // 2
    assert abs(np.corrcoef(first[:half], first[half:])[0, 1]) < bound * np.sqrt(2)
    assert abs(np.corrcoef(first, second)[0, 1]) < bound
    # squares too: dependence that leaves the correlation at 0
    assert abs(np.corrcoef(first[:-1] ** 2, first[1:] ** 2)[0, 1]) < bound


def test_same_key_same_draws_and_shapes():
    key = jax.random.key(7)
    draws = standard_normal(key, (3, 5))
    assert draws.shape == (3, 5) and draws.dtype == jnp.float32
    np.testing.assert_array_equal(draws, standard_normal(key, (3, 5)))
    # the first values do not depend on how many are drawn (odd sizes included)
    np.testing.assert_array_equal(standard_normal(key, (7,))[:3], standard_normal(key, (6,))[:3])
    assert standard_normal(key, (0,)).shape == (0,)


def test_draws_work_under_vmap_and_jit():
    keys = jax.random.split(jax.random.key(0), 4)
    batched = jax.jit(jax.vmap(lambda k: standard_normal(k, (10,))))(keys)
    np.testing.assert_array_equal(batched[2], standard_normal(keys[2], (10,)))


def test_float64_draws_use_53_bits():
    with jax.enable_x64(True):
        draws = np.asarray(standard_normal(jax.random.key(5), (100_000,), jnp.float64))
        assert draws.dtype == np.float64
        assert abs(draws.mean()) < 4 / np.sqrt(draws.size)
        assert abs(draws.var() - 1) < 4 * np.sqrt(2 / draws.size)
        assert stats.kstest(draws, "norm").pvalue > 1e-4
        # finer than float32's 2^-24 cells: values are not confined to that grid
        cells = (np.abs(np.asarray(jax.scipy.special.ndtr(draws))) * 2**24) % 1
        assert np.mean(np.abs(cells - 0.5) > 1e-3) > 0.9


def test_other_dtypes_are_refused():
    with pytest.raises(TypeError, match="float32 or float64"):
        standard_normal(jax.random.key(0), (3,), jnp.int32)
