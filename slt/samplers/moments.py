"""Streaming means, variances and co-moments of two vector observables (Welford; Chan et al.).

A `Moments` summarises draws (x_t, y_t), t = 1..k, of two observables x in R^p and y in R^q
(per-example losses of two sets of examples, or one set twice) without storing them:

    count     k
    mean_x    (1/k) sum_t x_t                                  (p,)
    mean_y    (1/k) sum_t y_t                                  (q,)
    m2_x      sum_t (x_t - mean_x)^2, elementwise               (p,)
    m2_y      sum_t (y_t - mean_y)^2                            (q,)
    comoment  sum_t (x_t - mean_x)(y_t - mean_y)^T              (p, q)

so Cov(x_a, y_b) = comoment[a, b] / (k - 1) (`covariance`), in O(p q) memory whatever the
number of draws. Leading axes (one `Moments` per chain) are allowed everywhere.

Update by one draw (Welford 1962, in the co-moment form of Pebay 2008, eq. 3.12):

    k' = k + 1,   d_x = x - mean_x,   d_y = y - mean_y,
    mean_x' = mean_x + d_x / k',      mean_y' = mean_y + d_y / k',
    m2_x' = m2_x + d_x * (x - mean_x'),
    comoment' = comoment + d_x (y - mean_y')^T      [= comoment + (k / k') d_x d_y^T].

It only ever adds products of deviations from the running means: the textbook form
sum x y^T - k mean_x mean_y^T subtracts two numbers of size k |mean|^2 to get one of size
k sd^2, and loses log10(|mean|^2 / sd^2) digits (all of them in float32 once
|mean| / sd > 3e3; tests/samplers/test_moments.py).

Merge of two summaries A and B of disjoint draws (Chan, Golub & LeVeque 1979, eq. 2.1; exact
in exact arithmetic, so merging per-chain summaries gives the summary of all draws):

    k = k_A + k_B,   delta_x = mean_x^B - mean_x^A,   delta_y = mean_y^B - mean_y^A,
    mean_x = mean_x^A + delta_x k_B / k,
    m2_x = m2_x^A + m2_x^B + delta_x^2 k_A k_B / k,
    comoment = comoment^A + comoment^B + delta_x delta_y^T k_A k_B / k.

`update` runs on device, inside the chains' scan (`slt.samplers.local_chains`); `merge` uses
arithmetic only, so it works on JAX and NumPy arrays alike; `combine` merges the per-chain
summaries on the host in float64, pairwise (a balanced tree: rounding error grows with
log C, not C); `covariance`, `variances` and `correlation` read a summary on the host.

References: B. P. Welford, Technometrics 4 (1962) 419; T. F. Chan, G. H. Golub, R. J. LeVeque,
"Updating formulae and a pairwise algorithm for computing sample variances", Stanford
CS-TR-79-773 (1979); P. Pebay, "Formulas for robust, one-pass parallel computation of
covariances and arbitrary-order statistical moments", Sandia SAND2008-6212 (2008).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

__all__ = [
    "Moments", "combine", "correlation", "covariance", "merge", "update", "variances", "zeros",
]


class Moments(NamedTuple):
    """Streaming summary of draws of (x, y); see the module doc. Every field may carry leading
    axes (one summary per chain); `count` has only those."""

    count: np.ndarray
    mean_x: np.ndarray
    mean_y: np.ndarray
    m2_x: np.ndarray
    m2_y: np.ndarray
    comoment: np.ndarray


def zeros(batch: tuple[int, ...], p: int, q: int, dtype) -> Moments:
    """The summary of no draws, for `batch` independent summaries (e.g. (num_chains,))."""
    return Moments(
        count=jnp.zeros(batch, dtype), mean_x=jnp.zeros((*batch, p), dtype),
        mean_y=jnp.zeros((*batch, q), dtype), m2_x=jnp.zeros((*batch, p), dtype),
        m2_y=jnp.zeros((*batch, q), dtype), comoment=jnp.zeros((*batch, p, q), dtype),
    )


def update(moments: Moments, x, y, keep=True) -> Moments:
    """Add the draw (x, y) (Welford; module doc); where `keep` is False (per leading index, e.g.
    a diverged chain) the summary is returned unchanged, whatever x and y hold (NaN included).

    Example:
      >>> m = zeros((), 2, 1, jnp.float64)
      >>> for x in ([1.0, 2.0], [3.0, 2.0], [5.0, 5.0]):
      ...     m = update(m, jnp.array(x), jnp.array(x[:1]))
      >>> covariance(m)            # Cov(x, x_0): [Var x_0, Cov(x_1, x_0)]
      array([[4.],
             [3.]])
    """
    keep = jnp.asarray(keep)
    count = moments.count + keep
    x = jnp.where(keep[..., None], x, moments.mean_x)  # a kept-out draw adds nothing (d = 0)
    y = jnp.where(keep[..., None], y, moments.mean_y)
    scale = 1 / jnp.maximum(count, 1)[..., None]
    dx, dy = x - moments.mean_x, y - moments.mean_y
    mean_x, mean_y = moments.mean_x + dx * scale, moments.mean_y + dy * scale
    return Moments(
        count=count,
        mean_x=mean_x,
        mean_y=mean_y,
        m2_x=moments.m2_x + dx * (x - mean_x),
        m2_y=moments.m2_y + dy * (y - mean_y),
        comoment=moments.comoment + dx[..., :, None] * (y - mean_y)[..., None, :],
    )


def merge(a: Moments, b: Moments) -> Moments:
    """The summary of the draws of `a` and `b` together (Chan et al.; module doc). Either may
    be empty (count 0)."""
    count = a.count + b.count
    share_b = b.count / (count + (count == 0))  # k_B / k, 0 when both are empty
    weight = a.count * share_b                   # k_A k_B / k
    dx, dy = b.mean_x - a.mean_x, b.mean_y - a.mean_y
    share_b, weight = share_b[..., None], weight[..., None]
    return Moments(
        count=count,
        mean_x=a.mean_x + dx * share_b,
        mean_y=a.mean_y + dy * share_b,
        m2_x=a.m2_x + b.m2_x + dx * dx * weight,
        m2_y=a.m2_y + b.m2_y + dy * dy * weight,
        comoment=a.comoment + b.comoment + dx[..., :, None] * (dy * weight)[..., None, :],
    )


def combine(moments: Moments, axis: int = 0) -> Moments:
    """Merge the summaries along axis `axis` pairwise (a balanced tree) into one, on the host
    in float64 (NumPy arrays out).

    Example:
      >>> chains = zeros((3,), 1, 1, jnp.float64)
      >>> chains = update(chains, jnp.array([[0.0], [1.0], [2.0]]), jnp.zeros((3, 1)))
      >>> pooled = combine(chains)
      >>> float(pooled.count), float(pooled.mean_x[0]), float(pooled.m2_x[0])
      (3.0, 1.0, 2.0)
    """
    fields = [np.moveaxis(np.asarray(field, np.float64), axis, 0) for field in moments]
    parts = [Moments(*(field[index] for field in fields)) for index in range(len(fields[0]))]
    while len(parts) > 1:
        merged = [merge(a, b) for a, b in zip(parts[0::2], parts[1::2], strict=False)]
        parts = merged + parts[len(merged) * 2:]
    return parts[0]


def covariance(moments: Moments, ddof: int = 1) -> np.ndarray:
    """Cov(x_a, y_b) = comoment / (k - ddof), shape (..., p, q); NaN where k <= ddof."""
    return np.asarray(moments.comoment) / _positive_or_nan(moments.count - ddof)[..., None, None]


def variances(moments: Moments, ddof: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(Var x, Var y) = (m2_x, m2_y) / (k - ddof); NaN where k <= ddof."""
    denominator = _positive_or_nan(moments.count - ddof)[..., None]
    return np.asarray(moments.m2_x) / denominator, np.asarray(moments.m2_y) / denominator


def correlation(moments: Moments) -> np.ndarray:
    """Corr(x_a, y_b) = comoment / sqrt(m2_x m2_y^T); NaN where a variance is 0."""
    scale = np.asarray(moments.m2_x)[..., :, None] * np.asarray(moments.m2_y)[..., None, :]
    return np.asarray(moments.comoment) / np.sqrt(_positive_or_nan(scale))


def _positive_or_nan(values) -> np.ndarray:
    """`values` as a float64 NumPy array, every entry <= 0 replaced by NaN."""
    values = np.asarray(values, np.float64)
    return np.where(values > 0, values, np.nan)
