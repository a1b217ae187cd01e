"""The singular BIC (slt.estimators.evidence.sbic): the fixed point against hand-solved
quadratics, its defining equations, the BIC limit, numerical stability at n = 1e6, bad input,
and the learning-coefficient tables (slt.truth) it uses."""

import dataclasses
import doctest
import math
import sys
from fractions import Fraction as F

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from slt import models, truth
from slt.estimators.evidence.sbic import (
    SBICResult,
    plug_in_learning_coefficients,
    sbic,
    sbic_gaussian_mixtures,
    sbic_reduced_rank,
)
from slt.results import load
from slt.validation import InputError

# the module (slt.estimators.evidence.sbic is also the name of the function it exports)
sbic_module = sys.modules["slt.estimators.evidence.sbic"]

matplotlib.use("Agg")
NAN = math.nan


def fixed_point_residual(result: SBICResult) -> np.ndarray:
    """log of [Σ_{i≤j} L'(M_i) p_i] L'(M_j) minus log of Σ_{i≤j} L'_ij L'(M_i) p_i, per j,
    recomputed from the result's own tables (0 when the defining equations hold)."""
    log_n = math.log(result.n)
    log_weights = result.sbic + np.log(result.prior)
    residual = []
    for j in range(len(result.names)):
        log_terms = (result.log_likelihoods[j] - result.learning_coefficients[: j + 1, j] * log_n
                     + (result.multiplicities[: j + 1, j] - 1) * math.log(log_n))
        left = result.sbic[j] + logsumexp(log_weights[: j + 1])
        right = logsumexp(log_terms + log_weights[: j + 1])
        residual.append(left - right)
    return np.array(residual)


# ------------------------------------------------------------------- hand-computed fixed points


@pytest.mark.parametrize("loglik_2", [-7.0, -2.0])  # b < 0 and b > 0 in the quadratic
def test_two_models_by_hand(loglik_2):
    n, loglik_1 = 50, -10.0
    L11 = math.exp(loglik_1) * n**-1.0
    L12 = math.exp(loglik_2) * n**-1.5 * math.log(n) ** (2 - 1)  # λ_12 = 1.5, m_12 = 2
    L22 = math.exp(loglik_2) * n**-2.5
    # x (L11 p + x p) = L12 L11 p + L22 x p with p = 1/2:  x² + (L11 - L22) x - L12 L11 = 0
    b, c = L22 - L11, L12 * L11
    x = (b + math.sqrt(b * b + 4 * c)) / 2
    assert (b < 0) == (loglik_2 == -7.0)

    result = sbic([loglik_1, loglik_2], n, [[1.0, 1.5], [NAN, 2.5]], [[1, 2], [NAN, 1]])
    np.testing.assert_allclose(result.sbic, [math.log(L11), math.log(x)], rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.free_energy, -result.sbic, rtol=0, atol=0)
    np.testing.assert_allclose(result.posterior, [L11, x] / np.sum([L11, x]), rtol=1e-12)


def test_three_models_by_hand_with_a_prior():
    n, logliks, p = 120, [-6.0, -3.5, -3.0], np.array([0.5, 0.3, 0.2])
    lam = [[1.0, 1.25, 1.5], [NAN, 2.5, 3.0], [NAN, NAN, 4.0]]
    m = [[1, 2, 1], [NAN, 1, 2], [NAN, NAN, 1]]

    def term(i, j):
        return math.exp(logliks[j]) * n ** -lam[i][j] * math.log(n) ** (m[i][j] - 1)

    x1 = term(0, 0)
    # p2 x² + (x1 p1 - L22 p2) x - L12 x1 p1 = 0
    roots = np.roots([p[1], x1 * p[0] - term(1, 1) * p[1], -term(0, 1) * x1 * p[0]])
    x2 = roots[roots > 0].item()
    # p3 x² + (x1 p1 + x2 p2 - L33 p3) x - (L13 x1 p1 + L23 x2 p2) = 0
    roots = np.roots([p[2], x1 * p[0] + x2 * p[1] - term(2, 2) * p[2],
                      -(term(0, 2) * x1 * p[0] + term(1, 2) * x2 * p[1])])
    x3 = roots[roots > 0].item()

    result = sbic(logliks, n, lam, m, prior=[5, 3, 2], names=["a", "b", "c"])
    np.testing.assert_allclose(result.sbic, np.log([x1, x2, x3]), rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.prior, p, rtol=1e-15)
    expected = np.array([x1, x2, x3]) * p
    np.testing.assert_allclose(result.posterior, expected / expected.sum(), rtol=1e-10)
    assert result.selected == result.names[int(np.argmax(expected))]


def test_root_where_b_vanishes_is_continuous():
    """b_j = 0 exactly: L'(M_j) = sqrt(c_j); the two branches meet it from either side."""
    root = sbic_module._log_positive_root
    log_c = -3.0
    assert root(-1.0, -1.0, log_c) == 0.5 * log_c
    for step in (1e-12, 1e-8):
        assert root(-1.0 + step, -1.0, log_c) == pytest.approx(0.5 * log_c, abs=2 * step)
        assert root(-1.0, -1.0 + step, log_c) == pytest.approx(0.5 * log_c, abs=2 * step)


def test_callable_and_table_agree_and_take_rlct_pairs():
    def exact(i, j):
        return truth.rrr_rlct(5, 4, j + 1, i + 1)

    lam = np.full((4, 4), NAN)
    mult = np.full((4, 4), NAN)
    for j in range(4):
        for i in range(j + 1):
            lam[i, j], mult[i, j] = exact(i, j).as_float, exact(i, j).multiplicity
    logliks = [-900.0, -880.0, -878.5, -878.0]
    from_function = sbic(logliks, 400, exact)
    from_table = sbic(logliks, 400, lam, mult)
    np.testing.assert_array_equal(from_function.sbic, from_table.sbic)
    np.testing.assert_array_equal(from_function.multiplicities, mult)
    floats_only = sbic(logliks, 400, lambda i, j: exact(i, j).as_float)
    assert np.all(np.triu(floats_only.multiplicities) == np.triu(np.ones((4, 4))))


# --------------------------------------------------------------------- the defining equations


@pytest.mark.parametrize("seed", range(6))
def test_fixed_point_satisfies_the_defining_equations(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 7))
    n = int(10 ** rng.uniform(1, 6))
    logliks = np.sort(rng.uniform(-1e4, 0.0, size))
    diagonal = np.cumsum(rng.uniform(0.5, 3.0, size))
    lam = np.triu(rng.uniform(0.2, 1.0, (size, size)) * diagonal[None, :])
    np.fill_diagonal(lam, diagonal)
    mult = np.triu(rng.integers(1, 4, (size, size)).astype(float))
    np.fill_diagonal(mult, 1.0)
    result = sbic(logliks, n, lam, mult, prior=rng.uniform(0.1, 1.0, size))
    assert np.all(np.isfinite(result.sbic))
    # a difference of logs: the two sides agree to 1e-10 relative
    np.testing.assert_allclose(fixed_point_residual(result), 0.0, rtol=0, atol=1e-10)


def log_scale_tolerance(result: SBICResult) -> float:
    """Where |log L'| is 1e6, log L' itself is stored only to ulp(1e6) = 1.2e-10, so the
    defining equations can hold only to a few such ulps in log (relative) terms."""
    return 8 * float(np.spacing(np.max(np.abs(result.sbic))))
    assert result.posterior.sum() == pytest.approx(1.0, abs=1e-14)


# -------------------------------------------------------------------- BIC-type behaviour


def test_constant_columns_give_the_bic_exactly():
    """λ_ij = λ_jj, m = 1: L'_ij = L'_jj, so L'(M_j) = L'_jj and sBIC_j = ℓ_j - λ_jj log n;
    with λ_jj = d_j / 2 that is BIC, model for model, and so is the choice."""
    logliks, n, d = np.array([-500.0, -480.0, -476.0, -474.5]), 300, np.array([2, 5, 8, 11])
    table = plug_in_learning_coefficients(d / 2)
    result = sbic(logliks, n, table, dims=d)
    bic = -logliks + d / 2 * np.log(n)
    np.testing.assert_allclose(result.free_energy, bic, rtol=1e-14)
    np.testing.assert_allclose(result.bic, bic, rtol=1e-14)
    assert result.selected == result.bic_selected == "M2"
    np.testing.assert_allclose(fixed_point_residual(result), 0.0, atol=1e-12)


def test_singular_submodels_lower_the_penalty_within_derived_bounds():
    """λ_ij <= λ_jj and m_ij >= 1 with log n >= 1 make every L'_ij >= L'_jj; L'(M_j) is a
    weighted mean of the L'_ij, so ℓ_j - λ_jj log n <= sBIC_j <= max_i log L'_ij."""
    logliks, n = [-300.0, -285.0, -283.0], 200
    result = sbic_gaussian_mixtures(logliks, n)
    log_n = np.log(n)
    for j in range(3):
        lam, m = result.learning_coefficients[: j + 1, j], result.multiplicities[: j + 1, j]
        terms = logliks[j] - lam * log_n + (m - 1) * np.log(log_n)
        assert terms[-1] <= result.sbic[j] + 1e-12
        assert result.sbic[j] <= terms.max() + 1e-12
    assert result.sbic[0] == logliks[0] - log_n  # λ_11 = d_1 / 2 = 1
    assert np.all(result.free_energy <= result.bic + 1e-12)


def test_plug_in_estimates_reduce_to_the_singular_bic():
    lambda_hats = np.array([1.0, 1.7, 1.9])
    table = plug_in_learning_coefficients(lambda_hats)
    assert np.isnan(table[1, 0]) and np.all(table[:2, 2] == 1.9)
    result = sbic([-400.0, -390.0, -389.5], 200, table)
    np.testing.assert_allclose(result.sbic, result.log_likelihoods - lambda_hats * np.log(200),
                               rtol=1e-14)


# ------------------------------------------------------------------------- numerical stability


def test_stable_at_n_1e6_and_log_likelihoods_of_minus_1e6():
    n, logliks = 1e6, np.array([-12.0, -3.0, -2.0, -1.5])
    small = sbic_gaussian_mixtures(logliks, n)
    large = sbic_gaussian_mixtures(logliks - 1e6, n)
    assert np.all(np.isfinite(large.sbic))
    # the equations are homogeneous of degree 1 in the L'_ij: a shift of ℓ shifts sBIC
    np.testing.assert_allclose(large.sbic + 1e6, small.sbic, rtol=0, atol=1e-8)
    np.testing.assert_allclose(large.posterior, small.posterior, rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(fixed_point_residual(large), 0.0, rtol=0,
                               atol=log_scale_tolerance(large))


def test_gaps_of_thousands_of_nats_do_not_underflow():
    """ℓ rising by 1e4 nats per model: L'_jj dominates every other term by e^(1e4), so
    L'(M_j) = L'_jj to machine precision (exp(-1e4) underflows in linear space)."""
    n, logliks = 10**6, np.array([-1.0e6, -0.99e6, -0.98e6])
    result = sbic_reduced_rank(logliks, n, M=3, N=4)
    diagonal = np.diag(result.learning_coefficients)
    m = np.diag(result.multiplicities)
    expected = logliks - diagonal * np.log(n) + (m - 1) * np.log(np.log(n))
    np.testing.assert_allclose(result.sbic, expected, rtol=1e-12)
    np.testing.assert_allclose(result.posterior, [0, 0, 1], atol=1e-300)
    np.testing.assert_allclose(fixed_point_residual(result), 0.0, rtol=0,
                               atol=log_scale_tolerance(result))


def test_equal_log_likelihoods_at_n_1e6():
    """b_j < 0 by orders of magnitude: the root comes from 2c / (|b| + sqrt(b² + 4c))."""
    result = sbic_gaussian_mixtures(np.full(5, -1e6), 10**6)
    assert np.all(np.isfinite(result.sbic)) and result.selected == "K=1"
    np.testing.assert_allclose(fixed_point_residual(result), 0.0, rtol=0,
                               atol=log_scale_tolerance(result))


# ---------------------------------------------------------------------------------- bad input

TABLE_2 = [[1.0, 1.5], [NAN, 2.5]]


@pytest.mark.parametrize("call, message", [
    (lambda: sbic([-1.0, -0.5, -0.2], 100, TABLE_2), r"shape \(3, 3\)"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, [[1, 1]]), r"multiplicities must have shape"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, prior=[1, 1, 1]), "prior must be 2 numbers"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, names=["a"]), "names must be 2 strings"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, dims=[1]), "dims must be 2"),
    (lambda: sbic([-1.0, NAN], 100, TABLE_2), r"log_likelihoods must be finite.*\[1\]"),
    (lambda: sbic([-np.inf, -0.5], 100, TABLE_2), "log_likelihoods must be finite"),
    (lambda: sbic([], 100, TABLE_2), "non-empty"),
    (lambda: sbic([-1.0, -0.5], 100, [[1.0, -0.5], [NAN, 2.5]]),
     r"learning_coefficients\[0, 1\] = -0.5.*>= 0"),
    (lambda: sbic([-1.0, -0.5], 100, [[1.0, NAN], [NAN, 2.5]]),
     r"learning_coefficients\[0, 1\] = nan"),
    (lambda: sbic([-1.0, -0.5], 100, [[2.5, 1.0], [NAN, 1.5]]), "decreases from 2.5"),
    (lambda: sbic([-1.0, -0.5], 1, TABLE_2), "n must be an integer >= 2"),
    (lambda: sbic([-1.0, -0.5], 100.5, TABLE_2), "n must be an integer"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, [[1, 0], [NAN, 1]]),
     r"multiplicities\[0, 1\] = 0.0.*integers >= 1"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, [[1, 1.5], [NAN, 1]]), "integers >= 1"),
    (lambda: sbic([-1.0, -0.5], 100, lambda i, j: "x"), r"must return a number"),
    (lambda: sbic([-1.0, -0.5], 100, lambda i, j: (1.0, 1) if i else 1.0), "not a mixture"),
    (lambda: sbic([-1.0, -0.5], 100, lambda i, j: (1.0 + j, 1), [[1, 1], [1, 1]]),
     "one way only"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, prior=[1, 0]), "prior must be 2 numbers > 0"),
    (lambda: sbic([-1.0, -0.5], 100, TABLE_2, names=["a", "a"]), "distinct"),
    (lambda: sbic_reduced_rank([-1.0, -0.5, -0.2], 100, M=2, N=5), "exceed min"),
    (lambda: sbic_gaussian_mixtures([-1.0, -0.5], 100, dim=0), "dim must be an integer >= 1"),
    (lambda: sbic_gaussian_mixtures([-1.0, -0.5], 100, weight_concentration=0),
     "weight_concentration must be a finite number > 0"),
    (lambda: plug_in_learning_coefficients([1.0, -0.1]), "lambda_hats must be >= 0"),
])
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_decreasing_log_likelihoods_are_flagged():
    with pytest.warns(UserWarning, match="decrease from 'K=2' to 'K=3' by 2 nats"):
        result = sbic_gaussian_mixtures([-300.0, -280.0, -282.0], 100)
    assert len(result.warnings) == 1 and "more restarts" in result.warnings[0]
    assert "1 diagnostic warning" in repr(result)


# ------------------------------------------------------------------- learning-coefficient tables


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_mixture_bound_on_the_diagonal_is_half_the_dimension(dim):
    for k in range(1, 6):
        d = models.gaussian_mixture(k, dim).dim
        assert truth.gaussian_mixture_rlct_bound(k, k, dim) == truth.regular_rlct(d)


def test_mixture_bound_values():
    # φ = 1 (slt's Dirichlet(1) prior), r = 2: emptying wins, λ_ij = (2i + j - 1)/2
    for j in range(1, 7):
        for i in range(1, j + 1):
            assert truth.gaussian_mixture_rlct_bound(i, j) == (F(2 * i + j - 1, 2), 1)
    # the sBIC package's default φ = (r + 1)/2 = 3/2: ½ (2 + 3/2 · 2)
    assert truth.gaussian_mixture_rlct_bound(1, 3, weight_concentration=1.5).value == F(5, 2)
    # φ >= r: merging wins, ½ (r j + i - 1)
    assert truth.gaussian_mixture_rlct_bound(2, 5, weight_concentration=4).value == F(11, 2)
    # D = 2 (r = 4), φ = 1/2: ½ (5·1 - 1 + ½ · 2)
    assert truth.gaussian_mixture_rlct_bound(1, 3, 2, weight_concentration=F(1, 2)).value == 2.5
    for i, j in [(0, 2), (3, 2)]:
        with pytest.raises(ValueError):
            truth.gaussian_mixture_rlct_bound(i, j)


def test_mixture_bound_lies_between_the_regular_values():
    """λ_ii = d_i/2 <= λ_ij <= d_j/2 (a bound above d_j/2 would be worse than BIC's)."""
    for phi in (0.5, 1, 2, 5):
        for j in range(1, 6):
            for i in range(1, j + 1):
                value = truth.gaussian_mixture_rlct_bound(i, j, weight_concentration=phi).value
                assert F(3 * i - 1, 2) <= value <= F(3 * j - 1, 2)


def test_reduced_rank_table_is_aoyagi_watanabe():
    """Watanabe's WBIC experiment (TRUTH.md): M = N = 6, true rank 3, H = 3 … 6."""
    experiment = truth.watanabe_wbic_experiment()
    result = sbic_reduced_rank(np.linspace(-900, -850, 6), 500, M=6, N=6)
    for H in (3, 4, 5, 6):
        exact = experiment["rlct"][H]
        assert result.learning_coefficients[2, H - 1] == exact.as_float
        assert result.multiplicities[2, H - 1] == exact.multiplicity
    np.testing.assert_array_equal(result.learning_coefficients[[2, 2, 2, 2], [2, 3, 4, 5]],
                                  [13.5, 15, 16, 17])
    np.testing.assert_array_equal(np.diag(result.learning_coefficients), result.dims / 2)
    with_zero = sbic_reduced_rank(np.linspace(-900, -850, 4), 500, M=6, N=6, min_rank=0)
    assert with_zero.names[0] == "rank=0" and with_zero.learning_coefficients[0, 0] == 0
    assert with_zero.learning_coefficients[0, 2] == truth.rrr_rlct(6, 6, 2, 0).as_float


def test_mixture_table_is_the_truth_bound():
    result = sbic_gaussian_mixtures(np.linspace(-500, -480, 4), 300, dim=2,
                                    weight_concentration=0.5)
    for j in range(4):
        for i in range(j + 1):
            bound = truth.gaussian_mixture_rlct_bound(i + 1, j + 1, 2, weight_concentration=0.5)
            assert result.learning_coefficients[i, j] == bound.as_float
    np.testing.assert_array_equal(result.dims,
                                  [models.gaussian_mixture(k, 2).dim for k in range(1, 5)])


# --------------------------------------------------------------------------- result protocol


def test_result_protocol(tmp_path):
    result = sbic_gaussian_mixtures([-657.7, -617.5, -616.1, -615.2], n=300)
    table = result.summary()
    assert list(table.index) == ["K=1", "K=2", "K=3", "K=4"]
    assert list(table.columns) == ["log_likelihood", "lambda", "multiplicity", "free_energy",
                                   "sbic", "d", "bic_free_energy", "posterior"]
    assert "selects 'K=2'" in repr(result) and "free_energy = -sBIC" in repr(result)
    again = load(result.save(tmp_path / "sbic.nc"))
    assert isinstance(again, SBICResult) and repr(again) == repr(result)
    for field in dataclasses.fields(result):
        np.testing.assert_array_equal(getattr(again, field.name), getattr(result, field.name),
                                      err_msg=field.name)
    pd.testing.assert_frame_equal(again.summary(), table, check_exact=True)
    without_d = sbic([-1.0, -0.5], 100, TABLE_2)
    assert "bic_free_energy" not in without_d.summary() and without_d.bic_selected is None
    assert SBICResult.load(without_d.save(tmp_path / "plain.nc")).bic is None
    figure = result.plot()
    assert len(figure.axes) == 2
    plt.close(figure)


def test_docstring_examples():
    outcome = doctest.testmod(sbic_module, optionflags=doctest.ELLIPSIS)
    assert outcome.failed == 0 and outcome.attempted >= 15
