"""Exact learning coefficients λ and their multiplicities m, as :class:`RLCT` values.

Regular models, normal crossings and sums of monomials, reduced-rank regression (Aoyagi &
Watanabe 2005), deep linear networks (Aoyagi 2024) and one of their layers with the others
held fixed, one-hidden-layer tanh networks at f = 0, the two-component mixture and the product
model, an upper bound for Gaussian mixtures (the singular BIC's table), and the constants and
λ of Watanabe's WBIC experiment. Values are exact :class:`fractions.Fraction`; conventions
and references: `slt.truth`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from slt.truth._checks import _as_int, _as_int_list, _positive_rational

__all__ = [
    "RLCT",
    "regular_rlct",
    "normal_crossing_rlct",
    "additive_rlct",
    "rrr_rlct",
    "dln_rlct",
    "dln_layer_rlct",
    "tanh_rlct",
    "two_component_mixture_rlct",
    "product_model_rlct",
    "watanabe_wbic_experiment",
    "gaussian_mixture_rlct_bound",
]


class RLCT(NamedTuple):
    """A learning coefficient λ (exact) and its multiplicity m.

    The pair enters the free energy as ``F_n = n L_n(w0) + λ log n - (m-1) log log n
    + O_p(1)``.

    Attributes:
      value: the learning coefficient λ, an exact :class:`fractions.Fraction`.
      multiplicity: the multiplicity m >= 1.

    Example:
      >>> rrr_rlct(6, 6, 4, 3)
      λ = 15 (multiplicity 2)
      >>> rrr_rlct(6, 6, 3, 3).as_float
      13.5
    """

    value: Fraction
    multiplicity: int

    @property
    def as_float(self) -> float:
        """λ as a Python float."""
        return float(self.value)

    def __str__(self) -> str:
        return f"λ = {self.value} (multiplicity {self.multiplicity})"

    def __repr__(self) -> str:
        return self.__str__()


def regular_rlct(d: int) -> RLCT:
    """Learning coefficient of a regular model with d parameters.

    When the Fisher information at the true parameter is positive definite,
    ``λ = d/2`` and ``m = 1``; the free energy expansion is then the BIC,
    ``F_n = n L_n(w0) + (d/2) log n + O_p(1)``.

    Args:
      d: number of (identifiable) parameters, d >= 1.

    Returns:
      ``RLCT(Fraction(d, 2), 1)``.

    Example:
      >>> regular_rlct(3)
      λ = 3/2 (multiplicity 1)

    References:
      Watanabe (2009); Schwarz, "Estimating the dimension of a model", Ann.
      Statist. 6:461–464, 1978.
    """
    d = _as_int("d", d, minimum=1)
    return RLCT(Fraction(d, 2), 1)


def normal_crossing_rlct(powers, prior_powers=None) -> RLCT:
    """Learning coefficient of a normal-crossing (monomial) singularity.

    For ``K(w) = prod_j w_j^{2 k_j}`` near ``w = 0`` and a prior density
    ``φ(w) ∝ prod_j |w_j|^{h_j}`` (``h_j = 0``: positive at 0)::

        λ = min_{j : k_j > 0} (h_j + 1) / (2 k_j),    m = #{j attaining the minimum}.

    Coordinates with ``k_j = 0`` do not enter. A model with this K is
    ``y = x · prod_j w_j^{k_j} + ε`` with ``x, ε ~ N(0, 1)`` and truth ``w = 0``
    (then ``K(w) = prod_j w_j^{2k_j} / 2``; the constant does not change λ).

    Args:
      powers: the k_j, non-negative integers, at least one positive.
      prior_powers: the h_j, non-negative integers of the same length; default all 0.

    Returns:
      The :class:`RLCT`.

    Example:
      >>> normal_crossing_rlct([1, 1])
      λ = 1/2 (multiplicity 2)
      >>> normal_crossing_rlct([1, 2])
      λ = 1/4 (multiplicity 1)

    References:
      Watanabe (2009), the learning coefficient of a normal-crossing K from the poles of
      its zeta function; devinterp's normal-crossing tests use the same table.
    """
    k = _as_int_list("powers", powers, minimum=0)
    if not k or max(k) == 0:
        raise ValueError(f"powers must contain at least one positive integer, got {powers!r}")
    if prior_powers is None:
        h = [0] * len(k)
    else:
        h = _as_int_list("prior_powers", prior_powers, minimum=0)
        if len(h) != len(k):
            raise ValueError(
                f"prior_powers must have the same length as powers ({len(k)}), got {len(h)}"
            )
    candidates = [Fraction(hj + 1, 2 * kj) for kj, hj in zip(k, h, strict=True) if kj > 0]
    value = min(candidates)
    return RLCT(value, candidates.count(value))


def additive_rlct(powers) -> RLCT:
    """Learning coefficient of a sum of independent monomials.

    For ``K(w) = sum_i c_i w_i^{2 k_i}`` with ``c_i > 0``, each ``w_i`` its own
    coordinate and a prior positive at 0, the integral factorises::

        λ = sum_i 1 / (2 k_i),    m = 1.

    Args:
      powers: the k_i, positive integers (a coordinate with k_i = 0 would be a
        constant, not part of K).

    Returns:
      The :class:`RLCT`.

    Example:
      >>> additive_rlct([2, 1])     # K = w1^4 + w2^2
      λ = 3/4 (multiplicity 1)

    References:
      Watanabe (2009); devinterp PR #113 (quasi-homogeneous potentials) uses
      ``K = ½ Σ w_i^{p_i}`` with ``p_i = 2 k_i``.
    """
    k = _as_int_list("powers", powers, minimum=1)
    if not k:
        raise ValueError("powers must contain at least one positive integer, got an empty sequence")
    return RLCT(sum((Fraction(1, 2 * ki) for ki in k), Fraction(0)), 1)


def rrr_rlct(M: int, N: int, H: int, r: int) -> RLCT:
    """Learning coefficient of reduced-rank regression (Aoyagi & Watanabe 2005).

    Model ``y = B A x + ε`` with ``A ∈ R^{H×M}``, ``B ∈ R^{N×H}`` (M inputs, N outputs,
    H hidden), a true product of rank r, and a prior positive at the truth:

    * Case 1, ``N + r <= M + H``, ``M + r <= N + H`` and ``H + r <= M + N``::

          λ = [2(H+r)(M+N) - (M-N)^2 - (H+r)^2 + s] / 8,

      with ``s = 1, m = 2`` if ``M + H + N + r`` is odd and ``s = 0, m = 1`` if even;
    * Case 2, ``M + H < N + r``: ``λ = (HM - Hr + Nr)/2``, ``m = 1``;
    * Case 3, ``N + H < M + r``: ``λ = (HN - Hr + Mr)/2``, ``m = 1``;
    * Case 4, ``M + N < H + r``: ``λ = MN/2``, ``m = 1``.

    Cases 2–4 exclude each other (any two would force r > min(M, N)).

    Args:
      M: input dimension, >= 1.
      N: output dimension, >= 1.
      H: hidden width (inner rank bound), >= 1.
      r: rank of the true ``B0 A0``, ``0 <= r <= min(M, N, H)``.

    Returns:
      The :class:`RLCT`.

    Example:
      >>> rrr_rlct(6, 6, 3, 3)        # Watanabe's WBIC experiment, H = 3
      λ = 27/2 (multiplicity 1)
      >>> rrr_rlct(5, 5, 3, 0)
      λ = 13/2 (multiplicity 2)

    References:
      Aoyagi & Watanabe, Neural Networks 18:924–933, 2005.
    """
    M = _as_int("M", M, minimum=1)
    N = _as_int("N", N, minimum=1)
    H = _as_int("H", H, minimum=1)
    r = _as_int("r", r, minimum=0)
    if r > min(M, N, H):
        raise ValueError(f"r must be <= min(M, N, H) = {min(M, N, H)}, got {r}")
    if N + r <= M + H and M + r <= N + H and H + r <= M + N:
        odd = (M + H + N + r) % 2
        value = Fraction(2 * (H + r) * (M + N) - (M - N) ** 2 - (H + r) ** 2 + odd, 8)
        return RLCT(value, 2 if odd else 1)
    if M + H < N + r:
        return RLCT(Fraction(H * M - H * r + N * r, 2), 1)
    if N + H < M + r:
        return RLCT(Fraction(H * N - H * r + M * r, 2), 1)
    return RLCT(Fraction(M * N, 2), 1)  # M + N < H + r


def dln_rlct(widths: Sequence[int], r: int) -> RLCT:
    """Learning coefficient of a deep linear network (Aoyagi 2024).

    Model ``f(x) = W_L ⋯ W_1 x`` with widths ``H_1`` (input), ..., ``H_{L+1}`` (output),
    a true product of rank r, and a prior positive at the truth. With
    ``Δ_i = H_i - r``, sort the Δ ascending; for ``k = 2, 3, ...`` let Σ be the k
    smallest, ``ℓ = k - 1``, ``S = Σ_{σ∈Σ} Δ_σ``, and stop at the first k with

    (a) ``max_Σ Δ < min_{not Σ} Δ``, (b) ``S >= ℓ · max_Σ Δ``,
    (c) ``S < ℓ · min_{not Σ} Δ``

    ((a) and (c) hold vacuously when Σ is everything). With
    ``a = S - ℓ(⌈S/ℓ⌉ - 1) ∈ {1, ..., ℓ}``::

        λ = [-r^2 + r(H_1 + H_{L+1})]/2 + a(ℓ-a)/(4ℓ) - [ℓ(ℓ-1)/4](S/ℓ)^2
            + ½ Σ_{σ<σ' in Σ} Δ_σ Δ_σ',
        m = a(ℓ - a) + 1.

    At depth 2 (``widths = [M, H, N]``) this equals :func:`rrr_rlct` ``(M, N, H, r)``,
    multiplicity included (checked exhaustively for M, H, N <= 10 in the tests). The
    multiplicity formula is the one of E. Lau's reference implementation
    (``dln.py::true_dln_learning_coefficient`` in github.com/edmundlth/validating_lambdahat,
    MIT), which this function reproduces exactly, including its choice of Σ among tied Δ.
    A single layer (two widths) gives the regular value ``H_1 H_2 / 2``.

    Args:
      widths: ``[H_1, ..., H_{L+1}]``, at least two positive integers.
      r: rank of the true product, ``0 <= r <= min(widths)``.

    Returns:
      The :class:`RLCT`.

    Raises:
      ValueError: bad widths or r.

    Example:
      >>> dln_rlct([10, 10, 10, 10], 0)
      λ = 67/2 (multiplicity 3)
      >>> dln_rlct([5, 3, 3, 5], 1)
      λ = 13/2 (multiplicity 1)

    References:
      Aoyagi, Neural Networks 172:106132, 2024 (SSRN 4404877); used as
      the ground truth by Lau et al., "The local learning coefficient", AISTATS 2025.
    """
    H = _as_int_list("widths", widths, minimum=1)
    if len(H) < 2:
        raise ValueError(f"widths must list at least an input and an output width, got {widths!r}")
    r = _as_int("r", r, minimum=0)
    if r > min(H):
        raise ValueError(f"r must be <= min(widths) = {min(H)}, got {r}")
    deltas = sorted(h - r for h in H)
    for k in range(2, len(deltas) + 1):
        chosen, rest = deltas[:k], deltas[k:]
        ell, S = k - 1, sum(chosen)
        if rest and not chosen[-1] < rest[0]:  # (a)
            continue
        if not S >= ell * chosen[-1]:  # (b)
            continue
        if rest and not S < ell * rest[0]:  # (c)
            continue
        a = S - ell * (-(-S // ell) - 1)  # -(-S // ell) is ⌈S/ℓ⌉ in exact integers
        pair_sum = (S * S - sum(d * d for d in chosen)) // 2  # Σ_{σ<σ'} Δ_σ Δ_σ'
        value = (
            Fraction(-r * r + r * (H[0] + H[-1]), 2)
            + Fraction(a * (ell - a), 4 * ell)
            - Fraction(ell * (ell - 1), 4) * Fraction(S, ell) ** 2
            + Fraction(pair_sum, 2)
        )
        return RLCT(value, a * (ell - a) + 1)
    # Aoyagi (2024) proves that some prefix qualifies; reaching this line is a bug.
    raise RuntimeError(f"no admissible subset for widths={H}, r={r}")  # pragma: no cover


def dln_layer_rlct(layers: Sequence, index: int, *, tol: float | None = None) -> RLCT:
    """Learning coefficient of one layer of a deep linear network, the others held fixed.

    With every layer but ``W = layers[index]`` fixed, ``f(x) = C W D x`` with
    ``C = W_L ⋯ W_{index+2}`` and ``D = W_index ⋯ W_1`` (identities where empty) is linear in
    W: a regular model in the ``rank(C) rank(D)`` directions of W that change ``C W D``
    (the map ``W -> C W D`` is ``Dᵀ ⊗ C``), flat in the others, so (inputs of full-rank
    covariance)::

        λ = rank(C) rank(D) / 2,   m = 1.

    This is the exact value of the weight-refined LLC of that layer (`slt.llc` with
    ``restrict_to`` the layer, `slt.llc_table`) at a w* that minimises L_n over the layer,
    e.g. any critical point of L_n such as a trained network: the restricted L_n is a
    quadratic in W, so the local posterior is Gaussian in the identifiable directions.

    Args:
      layers: the weight matrices ``[W_1, ..., W_L]`` (W_l of shape (H_{l+1}, H_l)).
      index: which layer (0-based; negative counts from the end).
      tol: the singular-value threshold of the ranks (numpy's ``matrix_rank`` default when
        None).

    Returns:
      The :class:`RLCT`.

    Raises:
      ValueError: layers not 2-D matrices that chain (H_{l+1}, H_l), or index out of range.

    Example:
      >>> import numpy as np
      >>> layers = [np.eye(4, 5), np.eye(2, 4), np.eye(4, 2), np.eye(3, 4)]
      >>> [dln_layer_rlct(layers, i).value for i in range(4)]   # the width-2 bottleneck
      [Fraction(5, 1), Fraction(4, 1), Fraction(3, 1), Fraction(3, 1)]
    """
    matrices = [np.asarray(layer, dtype=np.float64) for layer in layers]
    for position, matrix in enumerate(matrices):
        if matrix.ndim != 2:
            raise ValueError(f"layers[{position}] must be a matrix, got shape {matrix.shape}")
        if position and matrix.shape[1] != matrices[position - 1].shape[0]:
            raise ValueError(
                f"layers[{position}] has {matrix.shape[1]} columns but layers[{position - 1}] "
                f"has {matrices[position - 1].shape[0]} rows: they do not chain"
            )
    count = len(matrices)
    position = _as_int("index", index)
    if not -count <= position < count:
        raise ValueError(f"index must pick one of the {count} layers, got {index}")
    position %= count

    def rank_of_product(selected, size):
        product = np.eye(size)
        for matrix in selected:
            product = matrix @ product
        return int(np.linalg.matrix_rank(product, tol=tol))

    below = rank_of_product(matrices[:position], matrices[0].shape[1])
    above = rank_of_product(matrices[position + 1:], matrices[position].shape[0])
    return RLCT(Fraction(above * below, 2), 1)


def tanh_rlct(H: int) -> RLCT:
    """Learning coefficient of a one-hidden-layer tanh network with true function 0.

    Model ``f(x) = Σ_{h=1}^H a_h tanh(b_h x)``, scalar input and output, no biases,
    Gaussian noise, truth ``f ≡ 0``, prior positive at 0 (Aoyagi & Watanabe 2005)::

        λ = (H + i^2 + i) / (4i + 2),    i = ⌊√H⌋,
        m = 2 if i^2 = H else 1.

    ``λ = min_{j >= 0} (H + j^2 + j)/(4j + 2)``, and two consecutive j tie exactly when
    ``j^2 = H`` (the difference of consecutive terms has the sign of ``j^2 - H``), which
    is where the multiplicity 2 comes from. The multiplicity is as quoted by the
    reference code of Wei, Murfet et al. (``truem``, dataset "tanh") citing this paper;
    it was not checked against the primary source (in Japanese), except at H = 1, where
    ``a tanh(bx) ≈ abx`` is the product model with λ = 1/2, m = 2.

    Args:
      H: number of hidden units, >= 1.

    Returns:
      The :class:`RLCT`.

    Example:
      >>> tanh_rlct(5)
      λ = 11/10 (multiplicity 1)
      >>> tanh_rlct(4)
      λ = 1 (multiplicity 2)

    References:
      Aoyagi & Watanabe, "Resolution of singularities and the generalization error with
      Bayesian estimation for layered neural network", IEICE Trans. (in Japanese), 2005.
    """
    H = _as_int("H", H, minimum=1)
    i = math.isqrt(H)
    return RLCT(Fraction(H + i * i + i, 4 * i + 2), 2 if i * i == H else 1)


def two_component_mixture_rlct() -> RLCT:
    """Learning coefficient of ``(1-a) N(0,1) + a N(b,1)`` at the truth ``N(0,1)``.

    The true set is ``{a = 0} ∪ {b = 0}`` and
    ``K(a, b) = (a^2/2)(e^{b^2} - 1) ≈ a^2 b^2 / 2`` near the origin: the normal
    crossing ``(1, 1)``, so ``λ = 1/2`` and ``m = 2`` for any prior positive at
    ``(0, 0)`` (e.g. ``a ~ U(0,1)``, ``b ~ N(0, σ²)``). BIC's d/2 would say 1.

    Returns:
      ``RLCT(Fraction(1, 2), 2)``.

    Example:
      >>> two_component_mixture_rlct()
      λ = 1/2 (multiplicity 2)

    References:
      Watanabe (2009) (mixtures as singular models); see
      :func:`two_component_mixture_log_evidence` for the exact evidence.
    """
    return RLCT(Fraction(1, 2), 2)


def product_model_rlct(true_product_is_zero: bool) -> RLCT:
    """Learning coefficient of the product model ``y = a b x + ε``.

    Reduced-rank regression with ``M = N = H = 1``: if the true product ``ab`` is 0,
    ``K ∝ a^2 b^2`` (normal crossing (1,1)): ``λ = 1/2``, ``m = 2``; if ``ab ≠ 0`` the
    true set is the smooth hyperbola ``ab = c``: ``λ = 1/2``, ``m = 1``.
    BIC's d/2 would say 1 in both cases.

    Args:
      true_product_is_zero: whether the true ``a0 b0`` is 0.

    Returns:
      The :class:`RLCT`.

    Example:
      >>> product_model_rlct(True)
      λ = 1/2 (multiplicity 2)

    References:
      Aoyagi & Watanabe (2005) with M = N = H = 1; see :func:`product_model_log_evidence`.
    """
    if not isinstance(true_product_is_zero, (bool, np.bool_)):
        raise ValueError(f"true_product_is_zero must be a bool, got {true_product_is_zero!r}")
    return RLCT(Fraction(1, 2), 2 if true_product_is_zero else 1)


def watanabe_wbic_experiment() -> dict:
    """The constants and exact λ of Watanabe's WBIC reduced-rank experiment.

    Reduced-rank regression ``Y = B A X + noise`` (Watanabe 2013, §6, and his published
    program): M = N = 6, candidate H = 1..6, true rank 3, inputs ``x ~ N(0, 3² I)``,
    noise sd 0.1, prior ``N(0, 10²)`` on every entry of A and B, true entries
    ``0.2 · N(0, 1)``, n = 500, inverse temperature ``β = 1/log n``. λ comes from
    :func:`rrr_rlct` with r = 3; H < 3 cannot represent a rank-3 truth (unrealizable,
    ``None``). WBIC should select H = 3.

    Returns:
      A dict with keys ``M``, ``N``, ``true_rank``, ``x_scale``, ``noise_scale``,
      ``prior_scale``, ``true_entry_scale``, ``n``, ``beta``, ``candidate_H``
      (tuple 1..6), ``rlct`` (``{H: RLCT or None}``) and ``expected_H`` (3).

    Example:
      >>> watanabe_wbic_experiment()["rlct"][4]
      λ = 15 (multiplicity 2)

    References:
      Watanabe, JMLR 14:867–897, 2013.
    """
    M = N = 6
    true_rank = 3
    n = 500
    candidates = tuple(range(1, 7))
    return {
        "M": M,
        "N": N,
        "true_rank": true_rank,
        "x_scale": 3.0,
        "noise_scale": 0.1,
        "prior_scale": 10.0,
        "true_entry_scale": 0.2,
        "n": n,
        "beta": 1.0 / math.log(n),
        "candidate_H": candidates,
        "rlct": {H: (rrr_rlct(M, N, H, true_rank) if H >= true_rank else None) for H in candidates},
        "expected_H": true_rank,
    }


# ---------------------------------------------------------------------------------------
# Learning coefficients of nested families for the singular BIC (slt.estimators.evidence.sbic)
# ---------------------------------------------------------------------------------------


def gaussian_mixture_rlct_bound(
    true_components: int, fitted_components: int, dim: int = 1, *, weight_concentration=1
) -> RLCT:
    """Upper bound on λ of a Gaussian mixture with j components at a generic i-component truth.

    Model: ``p(y | w) = Σ_{k≤j} a_k N(y; μ_k, diag(σ_k²))`` in ``D = dim`` dimensions, every
    component with its own means and its own (diagonal) scales, so ``r = 2D`` parameters per
    component and ``d_j = (r + 1) j - 1`` in all; weights ``a ~ Dirichlet(φ, …, φ)`` with
    ``φ = weight_concentration``, and a prior on means and scales that is positive at the
    truth. This is the model of :func:`slt.models.gaussian_mixture` (``shared_scale=False``),
    whose default prior has ``φ = 1``. With the truth a generic point of the i-component
    mixtures (distinct components, positive weights), ``i <= j``::

        λ_ij <= ½ min{ (r + 1) i - 1 + φ (j - i),  r j + i - 1 }
              = ½ [ d_i + min(φ, r) (j - i) ],                          m = 1.

    Each of the ``j - i`` surplus components is absorbed in one of two ways, and each way
    bounds λ: *emptied* (weight ``a → 0``: ``K ≈ a²``, prior ``∝ a^{φ-1}``, so ``φ/2`` per
    component, its r parameters free), or *merged* with a true component (its r parameters
    pinned, its share of the weight free: ``r/2`` per component). A mixture of the two ways
    is linear in the split, so the better of the pure ways is the bound. At ``i = j`` it is
    ``d_j / 2``, the exact value (a generic mixture is a regular point, m = 1).

    Provenance: this is the bound Drton & Plummer (2017, §6.2) use for univariate Gaussian
    mixtures with unequal variances (r = 2), as implemented in their sBIC R package
    (``R/MixtureModels.R``, ``learnCoef``; its Gaussian-mixture vignette calls it eq. (6.11)
    and uses φ = 1 for the galaxies data; the package's default is φ = (r + 1)/2). The two
    deformations are those of Yamazaki & Watanabe (2003), whose bound is the emptying one at
    φ = 1; Rousseau & Mengersen (2011) show the same φ-versus-r/2 dichotomy for the
    posterior. For ``dim = 1`` the model is exactly D&P's; for ``dim > 1`` (diagonal
    covariances) the same two deformations give the bound with ``r = 2D`` (not stated by
    D&P). It is an upper bound: the exact λ of mixtures with separate variances is not
    known (D&P §6.2); that of mixtures with one common, known variance is (Aoyagi 2010).

    Args:
      true_components: i >= 1, the number of components of the truth.
      fitted_components: j >= i, the number of components of the fitted model.
      dim: D >= 1, the dimension of the observations.
      weight_concentration: φ > 0, the Dirichlet parameter of the weights' prior (int,
        Fraction or float; a float is read as the decimal it prints as).

    Returns:
      The bound as an :class:`RLCT` with multiplicity 1.

    Raises:
      ValueError: a count that is not an integer in range, ``true_components >
        fitted_components``, or φ not a positive finite number.

    Example:
      >>> gaussian_mixture_rlct_bound(2, 2)             # d/2 of a 2-component 1-D mixture
      λ = 5/2 (multiplicity 1)
      >>> gaussian_mixture_rlct_bound(1, 3)             # ½ (2 + 1 · 2)
      λ = 2 (multiplicity 1)
      >>> gaussian_mixture_rlct_bound(1, 3, weight_concentration=3)   # merging wins: ½ (2·3)
      λ = 3 (multiplicity 1)

    References:
      Drton & Plummer, "A Bayesian information criterion for singular models", JRSS-B
      79:323–380, 2017.
      Yamazaki & Watanabe, "Singularities in mixture models and upper bounds of stochastic
      complexity", Neural Networks 16:1029–1038, 2003.
      Rousseau & Mengersen, "Asymptotic behaviour of the posterior distribution in
      overfitted mixture models", JRSS-B 73:689–710, 2011.
      Aoyagi, "A Bayesian learning coefficient of generalization error and Vandermonde
      matrix-type singularities", Comm. Statist. Theory Methods 39:2667–2687, 2010.
    """
    i = _as_int("true_components", true_components, minimum=1)
    j = _as_int("fitted_components", fitted_components, minimum=1)
    D = _as_int("dim", dim, minimum=1)
    phi = _positive_rational("weight_concentration", weight_concentration)
    if i > j:
        raise ValueError(f"true_components must be <= fitted_components, got {i} > {j}")
    r = 2 * D
    return RLCT(Fraction((r + 1) * i - 1) / 2 + min(phi, Fraction(r)) * (j - i) / 2, 1)
