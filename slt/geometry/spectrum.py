"""Numerical rank, log (pseudo-)determinant and conditioning from the eigenvalues of a PSD matrix.

For eigenvalues l_1 <= ... <= l_d of a Fisher matrix and a relative tolerance `rank_tol`:

    rank      = #{i : l_i > rank_tol * l_d}
    log pdet  = sum over those i of log l_i          (0 for the zero matrix)
    log det   = log pdet if rank = d, else -inf
    condition = l_d / l_1 if rank = d, else +inf
    smallest nonzero = the smallest l_i counted by the rank (nan when rank = 0)

The tolerance is relative to the largest eigenvalue, so the rank does not change when the
matrix is rescaled (by 1/sigma^2, or by the number of examples).

The default `DEFAULT_RANK_TOL = 1e-10`: exact Fisher matrices computed in float64 carry
rounding errors of a few 1e-16 relative to their largest eigenvalue, and their exact zero
eigenvalues (symmetry directions, dead or silent units) come out below 5e-16 of it in the
library's networks, d up to 2000; generic points of those networks at the tests' widths
have smallest eigenvalues above 1e-9 of the largest (tests/geometry/test_symmetry.py checks
both sides of this gap). 1e-10 sits in the gap, five orders above rounding. It is a
statement about float64 resolution, not about the model: eigenvalues vanish like a power of
the distance t to a singular set (mu^6 for the slides' mixture), so points within some
small t of it are rank-deficient at any fixed tolerance, and genuinely ill-conditioned
models (tanh networks on 1-D inputs with many units) have eigenvalues spread down to
rounding with no gap at all. Estimated matrices ("monte_carlo", "empirical") have a
statistical rank of their own (at most the number of samples times outputs).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from slt.validation import require_in_interval

__all__ = ["DEFAULT_RANK_TOL", "SUMMARY_FIELDS", "check_rank_tol", "spectrum_summary"]

DEFAULT_RANK_TOL = 1e-10

SUMMARY_FIELDS = (
    "rank",
    "log_det",
    "log_pdet",
    "min_eigenvalue",
    "smallest_nonzero",
    "max_eigenvalue",
    "condition_number",
)


def check_rank_tol(rank_tol: float) -> float:
    """`rank_tol` as a float in (0, 1), or InputError (a ValueError)."""
    return require_in_interval("rank_tol (relative to the largest eigenvalue)", rank_tol, 0.0, 1.0)


def spectrum_summary(eigenvalues, rank_tol: float) -> dict:
    """Rank, log det, log pdet, extreme eigenvalues and condition number (see module docstring).

    Args:
      eigenvalues: ascending eigenvalues, shape (..., d): a numpy array (computed in numpy,
        for host-side results) or a JAX array (works under jit and vmap).
      rank_tol: relative tolerance in (0, 1).

    Returns:
      A dict with the keys of `SUMMARY_FIELDS`, each of shape (...).

    Example:
      >>> spectrum_summary(np.array([0.0, 1.0, 4.0]), 1e-10)["rank"]
      np.int64(2)
    """
    xp = np if isinstance(eigenvalues, np.ndarray) else jnp
    largest = eigenvalues[..., -1]
    above = eigenvalues > rank_tol * xp.maximum(largest, 0.0)[..., None]
    above = above & (largest > 0)[..., None]
    rank = xp.sum(above, axis=-1)
    log_pdet = xp.sum(xp.where(above, xp.log(xp.where(above, eigenvalues, 1.0)), 0.0), axis=-1)
    full = rank == eigenvalues.shape[-1]
    smallest = eigenvalues[..., 0]
    smallest_nonzero = xp.min(xp.where(above, eigenvalues, xp.inf), axis=-1)
    return {
        "rank": rank,
        "log_det": xp.where(full, log_pdet, -xp.inf),
        "log_pdet": log_pdet,
        "min_eigenvalue": smallest,
        "smallest_nonzero": xp.where(rank > 0, smallest_nonzero, xp.nan),
        "max_eigenvalue": largest,
        "condition_number": xp.where(full, largest / xp.where(full, smallest, 1.0), xp.inf),
    }
