"""Streaming moments (slt.samplers.moments) against NumPy's two-pass formulas."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt.samplers import moments


def _streamed(x, y, dtype=jnp.float64):
    """The summary of draws x (chains, draws, p) and y (chains, draws, q), one draw at a time
    in a scan, per chain (vmapped), as the chains' runner does it."""
    chains, _, p = x.shape

    def step(summary, draw):
        return moments.update(summary, *draw), None

    summary, _ = jax.lax.scan(
        step, moments.zeros((chains,), p, y.shape[-1], dtype),
        (jnp.asarray(x, dtype).swapaxes(0, 1), jnp.asarray(y, dtype).swapaxes(0, 1)),
    )
    return summary


def _two_pass(x, y):
    """Means and the cross-covariance by NumPy's two-pass formula, in float64."""
    dx, dy = x - x.mean(0), y - y.mean(0)
    return x.mean(0), y.mean(0), dx.T @ dy / (len(x) - 1)


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_streaming_matches_two_pass_numpy_per_chain_and_pooled(offset):
    rng = np.random.default_rng(0)
    x = offset + rng.standard_normal((3, 200, 4)) @ rng.standard_normal((4, 4))
    y = np.concatenate([x[..., :2] ** 2 / (1 + abs(offset)), rng.standard_normal((3, 200, 1))],
                       axis=-1) - offset
    summary = _streamed(x, y)
    for chain in range(3):
        mean_x, mean_y, cov = _two_pass(x[chain], y[chain])
        np.testing.assert_allclose(summary.mean_x[chain], mean_x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(summary.mean_y[chain], mean_y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(moments.covariance(summary)[chain], cov, rtol=1e-8,
                                   atol=1e-10)
    pooled = moments.combine(summary)
    mean_x, mean_y, cov = _two_pass(x.reshape(-1, 4), y.reshape(-1, 3))
    assert pooled.count == 600
    np.testing.assert_allclose(pooled.mean_x, mean_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(moments.covariance(pooled), cov, rtol=1e-8, atol=1e-10)
    var_x, var_y = moments.variances(pooled)
    np.testing.assert_allclose(var_x, np.diag(np.cov(x.reshape(-1, 4).T)), rtol=1e-8)
    np.testing.assert_allclose(var_y, y.reshape(-1, 3).var(0, ddof=1), rtol=1e-8)
    np.testing.assert_allclose(moments.correlation(pooled),
                               np.corrcoef(x.reshape(-1, 4).T, y.reshape(-1, 3).T)[:4, 4:],
                               rtol=1e-8, atol=1e-12)


def test_welford_keeps_the_digits_the_one_pass_formula_loses():
    """Draws with mean 1e4 and sd 1 in float32: the one-pass formula E[xy] - E[x]E[y] is off by
    far more than the variance itself; Welford's update is within 1e-3 of the truth."""
    rng = np.random.default_rng(1)
    x = 1e4 + rng.standard_normal((1, 2000, 2))
    summary = _streamed(x, x, jnp.float32)
    exact = np.cov(x[0].T)
    np.testing.assert_allclose(moments.covariance(summary)[0], exact, rtol=2e-3, atol=2e-3)
    x32 = x[0].astype(np.float32)
    one_pass = (x32.T @ x32) / len(x32) - np.outer(x32.mean(0), x32.mean(0))
    assert np.max(np.abs(one_pass - exact)) > 1.0


def test_kept_out_draws_change_nothing_even_when_not_finite():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 30, 3))
    keep = np.ones((2, 30), bool)
    keep[1, 10:] = False  # the second chain diverged at draw 10
    x_nan = np.where(keep[..., None], x, np.nan)

    def step(summary, draw):
        values, kept = draw
        return moments.update(summary, values, values, kept), None

    summary, _ = jax.lax.scan(step, moments.zeros((2,), 3, 3, jnp.float64),
                              (jnp.asarray(x_nan).swapaxes(0, 1), jnp.asarray(keep).T))
    reference = _streamed(x[1:, :10], x[1:, :10])
    assert summary.count.tolist() == [30, 10]
    for got, expected in zip(summary, reference, strict=True):
        np.testing.assert_allclose(np.asarray(got)[1], np.asarray(expected)[0], rtol=1e-14)


def test_merge_with_an_empty_summary_is_the_identity_and_combine_is_pairwise_exact():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7, 2)) + 3.0
    summary = moments.combine(_streamed(x, x[..., :1]))
    empty = moments.Moments(*(np.zeros_like(field) for field in summary))
    for merged in (moments.merge(summary, empty), moments.merge(empty, summary)):
        for got, expected in zip(merged, summary, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-15)
    mean_x, _, cov = _two_pass(x.reshape(-1, 2), x.reshape(-1, 2)[:, :1])  # 5 chains: odd
    np.testing.assert_allclose(summary.mean_x, mean_x, rtol=1e-14)
    np.testing.assert_allclose(moments.covariance(summary), cov, rtol=1e-12)
