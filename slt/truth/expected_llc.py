"""Exact expectations of the LLC estimate λ̂ at finite ``nβ``: no sampling error.

`normal_crossing_expected_llc` (the equal-power normal crossing, by one-dimensional
quadrature), `crossing_expected_llc` (the crossing with powers (1, p), by one-dimensional
quadrature over a conditionally Gaussian coordinate) and `linear_regression_expected_llc`
(linear regression, whose local posterior is Gaussian, in closed form) return what `slt.llc`
estimates, ``nβ (E[L_n(w)] - L_n(w*))`` under the localised tempered posterior, as references
for the samplers' tests and benchmarks. Conventions: `slt.truth`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special

from slt.truth._checks import _as_int, _design, _finite, _positive, _vector

__all__ = ["crossing_expected_llc", "linear_regression_expected_llc",
           "normal_crossing_expected_llc"]


def linear_regression_expected_llc(X, y, noise_scale, center, *, nbeta, gamma=1.0,
                                   mask=None) -> float:
    """Exact expectation of λ̂ for linear regression with known noise, at finite ``nβ``.

    ``L_n(w) = ‖y - Xw‖² / (2 n s²) + ½ log 2πs²`` is quadratic, so the local posterior that
    `slt.llc` samples (``include_prior=False``) around ``w*`` = ``center``,
    ``∝ exp(-nβ L_n(w) - (γ/2)‖w - w*‖²)`` over the coordinates ``mask`` selects (the others
    held at ``w*``), is Gaussian: with ``H = X_Sᵀ X_S / (n s²)``, ``r = y - X w*`` and the
    minimiser ``ŵ = w*_S + H⁻¹ X_Sᵀ r / (n s²)`` of the restricted loss, its precision is
    ``P = nβ H + γ I`` and its mean ``m = P⁻¹ (nβ H ŵ + γ w*_S)``, so::

        λ̂ = nβ (E[L_n(w)] - L_n(w*))
          = (nβ / 2) [tr(H P⁻¹) + (m - ŵ)ᵀ H (m - ŵ) - (w*_S - ŵ)ᵀ H (w*_S - ŵ)].

    At the maximum-likelihood ``w* = ŵ`` this is ``(nβ / 2) tr(H (nβ H + γ I)⁻¹)``, just
    below d / 2 (the regular λ).

    Args:
      X: design matrix, shape (n, d).
      y: targets, shape (n,).
      noise_scale: s > 0.
      center: ``w*``, shape (d,).
      nbeta: ``nβ > 0``.
      gamma: ``γ >= 0`` (``H`` must then be invertible on the selected coordinates).
      mask: booleans of shape (d,) (the weight-refined λ̂) or None (every weight).

    Returns:
      The exact ``E[λ̂]`` as a Python float.

    Example:
      >>> X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]; y = [1.0, 2.0, 2.5]
      >>> w_hat = [0.8333333333333334, 1.8333333333333335]                 # least squares
      >>> round(linear_regression_expected_llc(X, y, 1.0, w_hat, nbeta=1e6), 4)  # ~ d / 2
      1.0
    """
    X, y = _design(X, y)
    s = _positive("noise_scale", noise_scale)
    nbeta = _positive("nbeta", nbeta)
    gamma = _finite("gamma", gamma, nonnegative=True)
    center = _vector("center", center)
    if center.size != X.shape[1]:
        raise ValueError(f"center has {center.size} entries; X has {X.shape[1]} columns")
    selected = np.ones(X.shape[1], bool) if mask is None else np.asarray(mask, bool)
    n = X.shape[0]
    design = X[:, selected]
    curvature = design.T @ design / (n * s * s)
    start = center[selected]
    minimiser = start + np.linalg.solve(curvature, design.T @ (y - X @ center) / (n * s * s))
    precision = nbeta * curvature + gamma * np.eye(selected.sum())
    mean = np.linalg.solve(precision, nbeta * curvature @ minimiser + gamma * start)
    spread = np.trace(np.linalg.solve(precision, curvature))
    shift, offset = mean - minimiser, start - minimiser
    return float(nbeta / 2 * (spread + shift @ curvature @ shift - offset @ curvature @ offset))


def normal_crossing_expected_llc(
    nbeta, power, *, second_moment=1.0, cross_moment=0.0, gamma=1.0
) -> float:
    """Exact expectation of λ̂ on the equal-power normal crossing, at finite ``nβ``.

    The model ``y = x (w1 w2)^p + ε`` (unit noise) at ``w* = w0 = 0``, with data entering
    only through ``a = Σ x_i² / n`` (``second_moment``) and ``b = Σ x_i y_i / n``
    (``cross_moment``): ``L_n(w) - L_n(0) = a z^(2p) / 2 - b z^p`` with ``z = w1 w2``.
    The local posterior ``∝ exp(-t (L_n(w) - L_n(0)) - (γ/2)‖w‖²)``, ``t = nβ``, is what
    `slt.llc` samples (``include_prior=False``), and this function returns the quantity it
    estimates::

        λ̂ = t (E[L_n(w)] - L_n(0)) = ∫ E(z) e^(-E(z)) K0(γ|z|) dz / ∫ e^(-E(z)) K0(γ|z|) dz,

    ``E(z) = t (a z^(2p) / 2 - b z^p)``, because ``z = w1 w2`` with ``w ~ N(0, I/γ)`` has
    density ``γ K0(γ|z|) / π``. Both integrals are one-dimensional (adaptive quadrature,
    relative accuracy about 1e-8): no sampling error.

    λ = 1/(2p) with multiplicity 2, and λ̂ approaches it only like
    ``λ - 1 / (log t + (log(2/γ) - γ_E - λ ψ(λ)) / λ)`` (ψ the digamma function, γ_E Euler's
    constant; from the logarithm of K0 at 0): 37% below λ for p = 2 at n = 5000,
    β = 1/log n, γ = 1, on the population values ``a = 1, b = 0``.

    Args:
      nbeta: t = nβ > 0.
      power: p, a positive integer (the powers are (p, p)).
      second_moment: a > 0; 1 is the population value (``E[x²]``).
      cross_moment: b, any finite number; 0 is the population value.
      gamma: the localization strength γ > 0.

    Returns:
      The exact ``t (E[L_n(w)] - L_n(0))`` as a Python float.

    Example:
      >>> round(normal_crossing_expected_llc(5000 / math.log(5000), 2), 3)
      0.156

    References:
      Lau, Furman, Wang, Murfet, Wei, The local learning coefficient, AISTATS 2025 (the
      estimand); Watanabe (2009) for λ and m of the normal crossing.
    """
    t = _positive("nbeta", nbeta)
    p = _as_int("power", power, minimum=1)
    a = _positive("second_moment", second_moment)
    b = _finite("cross_moment", cross_moment)
    g = _positive("gamma", gamma)

    def energy(z):
        return t * (a * z ** (2 * p) / 2 - b * z**p)

    # Where the posterior of z lives: the quartic (p = 2) or quadratic (p = 1) well of width
    # t^(-1/(2p)), shifted by the data term to at most (2|b|/a)^(1/p); the integrand is
    # negligible beyond 40 such widths.
    width = max((t * a) ** (-1 / (2 * p)), (2 * abs(b) / a) ** (1 / p))
    # exp(-E) is scaled by its largest value, reached where u = z^p solves a u = b.
    root = (abs(b) / a) ** (1 / p)
    shift = min(energy(z) for z in (0.0, root, -root))

    def moment(weight):
        return sum(
            integrate.quad(
                lambda z, s=sign: weight(s * z) * math.exp(shift - energy(s * z))
                * special.k0(g * z),
                0.0, 40.0 * width, points=[width], limit=500, epsabs=0.0, epsrel=1e-10,
            )[0]
            for sign in (1.0, -1.0)
        )

    return float(moment(energy) / moment(lambda z: 1.0))


def crossing_expected_llc(nbeta, powers, *, second_moment=1.0, cross_moment=0.0,
                          gamma=1.0) -> float:
    """Exact expectation of λ̂ on the normal crossing with powers (1, p), at finite ``nβ``.

    The model ``y = x w1 w2^p + ε`` (unit noise; `slt.models.normal_crossing((1, p))`) at
    ``w* = w0 = 0``, with data entering through ``a = Σ x_i² / n`` (``second_moment``) and
    ``b = Σ x_i y_i / n`` (``cross_moment``): ``L_n(w) - L_n(0) = a c² w1² / 2 - b c w1`` with
    ``c = w2^p``. Given w2 this is quadratic in w1, so under the local posterior
    ``∝ exp(-t (L_n(w) - L_n(0)) - (γ/2)‖w‖²)`` (``t = nβ``, what `slt.llc` samples with
    ``include_prior=False``) w1 is Gaussian given w2, with precision ``A = t a c² + γ`` and
    mean ``μ = t b c / A``; integrating it out leaves one dimension::

        λ̂ = ∫ m(w2) e(w2) dw2 / ∫ m(w2) dw2,
        m(w2) = exp(-γ w2² / 2 + A μ² / 2) / √A,
        e(w2) = t a c² (μ² + 1/A) / 2 - t b c μ      (= E[t (L_n(w) - L_n(0)) | w2]),

    by adaptive quadrature (relative accuracy about 1e-9): no sampling error. For p = 1 it is
    `normal_crossing_expected_llc` with power 1 by another route (tested to agree). λ is
    1/(2p) (multiplicity 1 for p > 1): at n = 5000, β = 1/log n, γ = 1 on the population
    values a = 1, b = 0, λ̂'s expectation is 0.3735 for (1, 1) (25% below λ = 1/2), 0.2160
    for (1, 2) (14% below 1/4) and 0.1454 for (1, 3) (13% below 1/6).

    Args:
      nbeta, second_moment, cross_moment, gamma: as for `normal_crossing_expected_llc`.
      powers: (1, p) or (p, 1), p a positive integer.

    Returns:
      The exact ``t (E[L_n(w)] - L_n(0))``, a Python float.

    Raises:
      ValueError: powers other than (1, p) or (p, 1) (equal powers p > 1:
        `normal_crossing_expected_llc`).

    Example:
      >>> round(crossing_expected_llc(5000 / math.log(5000), (1, 2)), 4)
      0.216
    """
    t = _positive("nbeta", nbeta)
    pair = tuple(_as_int("every power", k, minimum=1) for k in np.ravel(powers))
    if len(pair) != 2 or min(pair) != 1:
        raise ValueError(f"powers must be (1, p) or (p, 1), p >= 1; got {powers!r} (equal "
                         "powers p > 1: normal_crossing_expected_llc)")
    p = max(pair)
    a = _positive("second_moment", second_moment)
    b = _finite("cross_moment", cross_moment)
    g = _positive("gamma", gamma)

    def parts(w2):
        """(log m(w2), e(w2)) of the docstring."""
        c = w2**p
        precision = t * a * c * c + g
        mean = t * b * c / precision
        log_weight = -g * w2 * w2 / 2 + precision * mean * mean / 2 - math.log(precision) / 2
        return log_weight, t * a * c * c * (mean * mean + 1 / precision) / 2 - t * b * c * mean

    # w2's posterior: the prior's width 1 / sqrt(gamma), narrowed where t a c^2 passes gamma
    # (|w2| ~ (gamma / (t a))^(1/(2p))); the data term moves it by at most a few such widths.
    inner = (g / (t * a)) ** (1 / (2 * p))
    bound = 12 / math.sqrt(g) + 4 * (abs(b) / a) ** (1 / p)
    grid = np.linspace(-bound, bound, 4001)
    shift = max(parts(w2)[0] for w2 in grid)

    def moment(with_energy: bool) -> float:
        def integrand(w2):
            log_weight, energy = parts(w2)
            return math.exp(log_weight - shift) * (energy if with_energy else 1.0)

        return sum(integrate.quad(integrand, low, high, points=[math.copysign(inner, high + low)],
                                  limit=500, epsabs=0.0, epsrel=1e-10)[0]
                   for low, high in ((-bound, 0.0), (0.0, bound)))

    return float(moment(True) / moment(False))
