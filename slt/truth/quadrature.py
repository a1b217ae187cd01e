"""One-dimensional log-integrals by adaptive quadrature, without overflow or lost peaks.

`_log_integral` computes ``log ∫_lo^hi exp(log_f(t)) dt`` (QUADPACK through SciPy) around a
located peak (`_locate_peak`) with breakpoints at every scale of it (`_breakpoints`). The exact
evidences of singular models in `slt.truth.evidences` reduce to such integrals (nested, for
the mixture).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import integrate, optimize

# Relative accuracy asked of every QUADPACK call below. 1e-12 is about 5000 float64
# epsilons: tight enough that nested integrals stay near 1e-11, loose enough that
# QUADPACK's roundoff detection does not fire on smooth integrands.
_QUAD_EPSREL = 1e-12
# A returned error estimate above this (relative) is reported as a warning.
_QUAD_WARN_REL = 1e-8


def _log_integral(
    log_f: Callable,
    lo: float,
    hi: float,
    *,
    grid_size: int,
    vectorized: bool,
) -> float:
    """``log ∫_lo^hi exp(log_f(t)) dt`` without overflow or lost peaks.

    1. Evaluate ``log_f`` on a uniform grid and refine its argmax t* with a bounded
       Brent search between the grid neighbours; c = log_f(t*) is the shift.
    2. Add breakpoints at ``t* ± (hi - lo) 2^{-j}``, j = 1, 2, ..., on each side, down to
       the first distance at which ``log_f`` is within 1 of c. Every sub-interval then
       spans at most one doubling of the distance to the peak, so QUADPACK sees the peak
       at every scale, however narrow it is.
    3. Integrate ``exp(log_f - c)`` with ``scipy.integrate.quad`` (QAGP). If the
       integrand reveals a value above c + 1 (a peak the grid missed), shift to it,
       add breakpoints around it, and integrate again (at most 3 times).

    ``log_f`` must accept a float (and a 1-D array when ``vectorized``).
    """
    peak_at, peak = _locate_peak(log_f, lo, hi, grid_size=grid_size, vectorized=vectorized)
    points = set(_breakpoints(log_f, lo, hi, peak_at, peak))
    for _ in range(3):
        seen = [peak, peak_at]

        def integrand(t, shift=peak, seen=seen):
            value = float(log_f(t))
            if value > seen[0]:
                seen[0], seen[1] = value, t
            return math.exp(value - shift)

        ordered = sorted(points)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            total, error = integrate.quad(
                integrand,
                lo,
                hi,
                points=ordered or None,
                epsabs=0.0,
                epsrel=_QUAD_EPSREL,
                limit=max(200, 4 * len(ordered)),
            )
        if seen[0] <= peak + 1.0:
            break
        peak, peak_at = seen[0], seen[1]
        points.update(_breakpoints(log_f, lo, hi, peak_at, peak))
    if not (total > 0.0 and math.isfinite(total)):
        raise FloatingPointError(f"quadrature failed (integral {total!r})")
    if error > _QUAD_WARN_REL * total:
        warnings.warn(
            f"quadrature error estimate {error / total:.1e} (relative) exceeds "
            f"{_QUAD_WARN_REL:.0e}",
            RuntimeWarning,
            stacklevel=3,
        )
    return peak + math.log(total)


def _locate_peak(log_f: Callable, lo: float, hi: float, *, grid_size: int,
                 vectorized: bool) -> tuple[float, float]:
    """(t*, log_f(t*)): the argmax of ``log_f`` on a uniform grid of [lo, hi], refined by a
    bounded Brent search between the grid neighbours (step 1 of `_log_integral`)."""
    span = hi - lo
    grid = np.linspace(lo, hi, grid_size)
    if vectorized:
        values = np.asarray(log_f(grid), dtype=np.float64)
    else:
        values = np.array([log_f(t) for t in grid], dtype=np.float64)
    if np.any(np.isnan(values)):
        raise FloatingPointError("log integrand is NaN on the quadrature grid")
    k = int(np.argmax(values))
    peak_at, peak = float(grid[k]), float(values[k])
    if peak == -np.inf:
        raise FloatingPointError("integrand vanishes on the whole quadrature grid")
    left, right = grid[max(k - 1, 0)], grid[min(k + 1, grid_size - 1)]
    search = optimize.minimize_scalar(
        lambda t: -float(log_f(t)),
        bounds=(left, right),
        method="bounded",
        options={"xatol": 1e-12 * span},
    )
    if np.isfinite(search.fun) and -search.fun > peak:
        peak_at, peak = float(search.x), float(-search.fun)
    return peak_at, peak


def _breakpoints(log_f: Callable, lo: float, hi: float, center: float,
                 height: float) -> list[float]:
    """Breakpoints for a peak of ``log_f`` (value `height`) at `center`: the centre, then
    ``center ± (hi - lo) 2^{-j}``, j = 1, 2, ..., on each side, down to the first distance at
    which ``log_f`` is within 1 of `height` (step 2 of `_log_integral`); those inside (lo, hi)
    only."""
    span = hi - lo
    points = [center] if lo < center < hi else []
    for side in (-1.0, 1.0):
        distance = span
        # 2^-60 of the span is below float64 resolution of any point in [lo, hi].
        for _ in range(60):
            distance *= 0.5
            t = center + side * distance
            if not lo < t < hi:
                continue
            points.append(t)
            if float(log_f(t)) > height - 1.0:
                break
    return points
