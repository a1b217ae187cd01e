"""Batch-means standard errors of the observed estimators (`block_std_error`) against the exact
standard error of autocorrelated draws.

An AR(1) process x_t = rho x_{t-1} + sqrt(1 - rho^2) e_t (stationary variance 1) has, for the
mean of N draws, Var = (1 + rho) / (1 - rho) / N to O(1/N^2); its lag-one covariance
Cov(x_t, x_{t+1}) = rho. Blocks of 500 draws at rho = 0.9 (integrated autocorrelation time 19)
are nearly independent, so the batch-means standard error of the mean matches the exact one
within its own sampling error (about 1 / sqrt(2 (B - 1)) relative, B blocks), where the
naive sd / sqrt(N) is 4.4 times too small. The same for a covariance (x_t with x_{t+1}), whose
exact standard error is measured over many independent replicate runs.
"""

import jax.numpy as jnp
import numpy as np

from slt.estimators.local.observed import block_std_error
from slt.samplers import moments

RHO, CHAINS, BLOCKS, LENGTH = 0.9, 4, 12, 500


def _ar1(rng, size):
    """(size..., CHAINS * BLOCKS * LENGTH + 1) stationary AR(1) draws."""
    steps = CHAINS * BLOCKS * LENGTH + 1
    noise = rng.standard_normal((*size, steps)) * np.sqrt(1 - RHO**2)
    x = np.empty_like(noise)
    x[..., 0] = rng.standard_normal(size)
    for t in range(1, steps):
        x[..., t] = RHO * x[..., t - 1] + noise[..., t]
    return x


def _blocks(x, y):
    """The per-(chain, block) summaries of draws x, y (one observable each)."""
    shape = (CHAINS, BLOCKS, LENGTH, 1)
    x, y = x[: CHAINS * BLOCKS * LENGTH].reshape(shape), y[: CHAINS * BLOCKS * LENGTH].reshape(
        shape)
    summary = moments.zeros((CHAINS, BLOCKS), 1, 1, jnp.float64)
    return moments.Moments(
        count=summary.count + LENGTH, mean_x=x.mean(2), mean_y=y.mean(2),
        m2_x=((x - x.mean(2, keepdims=True)) ** 2).sum(2),
        m2_y=((y - y.mean(2, keepdims=True)) ** 2).sum(2),
        comoment=np.einsum("cbti,cbtj->cbij", x - x.mean(2, keepdims=True),
                           y - y.mean(2, keepdims=True)))


def test_batch_means_match_the_exact_standard_error_of_autocorrelated_draws():
    rng = np.random.default_rng(0)
    runs = _ar1(rng, (40,))
    draws = CHAINS * BLOCKS * LENGTH
    exact_mean_se = np.sqrt((1 + RHO) / (1 - RHO) / draws)
    mean_se, covariance_se, covariances = [], [], []
    for x in runs:
        blocks = _blocks(x[:-1], x[1:])
        mean_se.append(block_std_error(blocks, lambda m: m.mean_x)[0])
        covariance_se.append(block_std_error(blocks, moments.covariance)[0, 0])
        covariances.append(moments.covariance(moments.combine(moments.combine(blocks, 1)))[0, 0])
    # each run's se is within its own sampling error of the exact one (48 blocks: ~10%)
    relative = 1 / np.sqrt(2 * (CHAINS * BLOCKS - 1))
    assert np.all(np.abs(np.array(mean_se) / exact_mean_se - 1) < 4 * relative)
    assert abs(np.mean(mean_se) / exact_mean_se - 1) < 4 * relative / np.sqrt(len(runs))
    # the covariance's: against the spread of the 40 runs' estimates (its own error ~11%)
    spread = np.std(covariances, ddof=1)
    assert abs(np.mean(covariance_se) / spread - 1) < 4 / np.sqrt(2 * (len(runs) - 1))
    assert abs(np.mean(covariances) - RHO) < 4 * spread / np.sqrt(len(runs))


def test_blocks_of_fewer_than_two_draws_are_left_out_and_two_blocks_are_needed():
    # one chain's draws 0, 1 | 2 | 3, 4, 5 in three blocks: the one-draw block {2} is left out,
    # the others weighted 2/5 and 3/5
    one = moments.Moments(
        count=np.array([[2.0, 1.0, 3.0]]), mean_x=np.array([[[0.5], [2.0], [4.0]]]),
        mean_y=np.zeros((1, 3, 1)), m2_x=np.array([[[0.5], [0.0], [2.0]]]),
        m2_y=np.zeros((1, 3, 1)), comoment=np.zeros((1, 3, 1, 1)))
    weights, means = np.array([0.4, 0.6]), np.array([0.5, 4.0])
    expected = np.sqrt(2 * np.sum(weights**2 * (means - weights @ means) ** 2))
    np.testing.assert_allclose(block_std_error(one, lambda m: m.mean_x), [expected])
    single = moments.Moments(*(field[:, :1] for field in one))
    assert np.isnan(block_std_error(single, lambda m: m.mean_x)).all()
