"""benchmarks/llc_not_spread.py's share of curved directions at a deep linear network's w0,
checked outside itself: against the rank of the Hessian (by JAX autodiff) of the squared loss
on noise-free data, which at w0 is J^T (X^T X / n) J exactly (no residual term), and against
the count H M + N r - H r of reduced-rank regression with B of full column rank."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.llc_not_spread import curved_share
from slt import models


def _product(weights):
    """W_L ... W_1."""
    product = weights[0]
    for weight in weights[1:]:
        product = weight @ product
    return product


@pytest.mark.parametrize(("widths", "rank"), [([3, 2, 4], 1), ([3, 4, 2, 3], 1)])
def test_curved_share_is_the_hessian_rank(widths, rank):
    values = models.random_low_rank(jax.random.key(3), widths, rank)
    weights = [values[f"W{layer + 1}"] for layer in range(len(widths) - 1)]
    flat, unravel = jax.flatten_util.ravel_pytree(weights)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(200, widths[0])))
    y = x @ _product(weights).T  # noise-free: no residual curvature at w0

    def loss(w):
        return 0.5 * jnp.mean(jnp.sum((y - x @ _product(unravel(w)).T) ** 2, axis=1))

    eigenvalues = np.linalg.eigvalsh(np.asarray(jax.jit(jax.hessian(loss))(flat)))
    curved = np.sum(eigenvalues > 1e-8 * eigenvalues.max())
    assert curved_share(values) == pytest.approx(curved / flat.size, abs=1e-12)


def test_curved_share_counts_reduced_rank_regression():
    M, H, N, r = 5, 3, 6, 2
    values = models.random_low_rank(jax.random.key(1), [M, H, N], r)
    assert curved_share(values) == pytest.approx((H * M + N * r - H * r) / (H * (M + N)))
