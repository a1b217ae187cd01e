"""The blocked Gibbs reference for lambda_hat on reduced-rank regression
(benchmarks/rrr_gibbs.py), checked outside itself: its loss against `Problem.loss`, its two
Gaussian conditionals against differences of the potential that `Problem.loss` gives, and its
expectation on the two-parameter case M = N = H = 1 (w = (a, b), L_n depends on a b) against
quadrature."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import slt
from benchmarks import rrr_gibbs
from slt import models, truth

NBETA, GAMMA = 12.0, 1.0


def _data(rng, center, n):
    """n examples of y = B A x + eps (unit noise, x ~ N(0, I)) at center = {"W1": A, "W2": B}."""
    x = rng.normal(size=(n, center["W1"].shape[1]))
    return {"x": x, "y": x @ (center["W2"] @ center["W1"]).T
            + rng.normal(size=(n, center["W2"].shape[0]))}


@pytest.fixture(scope="module")
def tiny():
    """(M, H, N) = (3, 2, 4), non-square so that a transposed block would show, n = 20."""
    rng = np.random.default_rng(2)
    center = {"W1": rng.normal(size=(2, 3)), "W2": rng.normal(size=(4, 2))}
    data = _data(rng, center, 20)
    problem = models.reduced_rank_regression(3, 2, 4).problem(data)
    return problem, rrr_gibbs.Statistics.of(data, 1.0), center


def _potential(problem, center, a, b):
    """U = n beta L_n + (gamma / 2) |w - w*|^2, L_n from slt's `Problem.loss`."""
    distance = np.sum((a - center["W1"]) ** 2) + np.sum((b - center["W2"]) ** 2)
    return NBETA * float(problem.loss({"W1": a, "W2": b})) + GAMMA / 2 * distance


def test_the_quadratic_loss_is_problem_loss(tiny):
    problem, stats, _ = tiny
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.normal(size=(2, 3)), rng.normal(size=(4, 2))
        assert stats.loss(a, b) == pytest.approx(float(problem.loss({"W1": a, "W2": b})),
                                                 rel=1e-12, abs=1e-10)


def test_the_conditionals_are_the_potential_s_quadratic_forms(tiny):
    """A Gaussian conditional with precision P and mean m is right when
    U(x1) - U(x2) = (x1 - m)^T P (x1 - m) / 2 - (x2 - m)^T P (x2 - m) / 2 for any x1, x2."""
    problem, stats, center = tiny
    rng = np.random.default_rng(1)
    b = center["W2"] + rng.normal(size=(4, 2))
    precision, mean = rrr_gibbs.a_conditional(stats, b, center["W1"], NBETA, GAMMA)
    a1, a2 = mean + rng.normal(size=(2, 2, 3))
    quadratic = [(x - mean).ravel() @ precision @ (x - mean).ravel() / 2 for x in (a1, a2)]
    assert (_potential(problem, center, a1, b) - _potential(problem, center, a2, b)
            == pytest.approx(quadratic[0] - quadratic[1], rel=1e-10))
    a = center["W1"] + rng.normal(size=(2, 3))
    precision, mean = rrr_gibbs.b_conditional(stats, a, center["W2"], NBETA, GAMMA)
    b1, b2 = mean + rng.normal(size=(2, 4, 2))
    quadratic = [np.sum(((x - mean) @ precision) * (x - mean)) / 2 for x in (b1, b2)]
    assert (_potential(problem, center, a, b1) - _potential(problem, center, a, b2)
            == pytest.approx(quadratic[0] - quadratic[1], rel=1e-10))


def test_a_gaussian_draw_has_the_inverse_precision_as_covariance():
    """Each entry of the sample covariance of 40 000 draws within 4 of its standard errors,
    sqrt((S_ii S_jj + S_ij^2) / count) for a Gaussian."""
    rng = np.random.default_rng(5)
    root = rng.normal(size=(3, 3))
    precision = root @ root.T + np.eye(3)
    count, mean = 40_000, np.array([1.0, -2.0, 0.5])
    draws, trace = rrr_gibbs.gaussian_draw(rng, np.tile(mean, (count, 1)), precision)
    covariance = np.linalg.inv(precision)
    assert trace == pytest.approx(np.trace(covariance), rel=1e-12)
    diagonal = np.diag(covariance)
    std_error = np.sqrt((np.outer(diagonal, diagonal) + covariance**2) / count)
    assert np.all(np.abs(np.cov(draws.T) - covariance) < 4 * std_error)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * np.sqrt(diagonal / count))


def _grid_expectation(stats, center, half_width=6.0, points=601):
    """E[n beta (L_n - L_n(w*))] for M = N = H = 1 by the trapezoid rule on a 2-d grid."""
    a, b = np.meshgrid(*(np.linspace(c - half_width, c + half_width, points)
                         for c in (center["W1"].item(), center["W2"].item())), indexing="ij")
    excess = NBETA * (stats.loss(a[..., None, None], b[..., None, None])
                      - stats.loss(center["W1"], center["W2"]))
    log_weight = -excess - GAMMA / 2 * ((a - center["W1"].item()) ** 2
                                        + (b - center["W2"].item()) ** 2)
    weight = np.exp(log_weight - log_weight.max())
    return float(np.sum(weight * excess) / np.sum(weight))


@pytest.mark.parametrize("w_star", [(0.0, 0.0), (1.0, 0.5)], ids=["singular", "regular"])
def test_the_gibbs_expectation_matches_quadrature(w_star):
    """w* = 0 (the normal crossing (1, 1): `slt.truth.normal_crossing_expected_llc`) and a
    regular w* (a b = 0.5, a 2-d grid), n = 50: within 4 standard errors, both estimators."""
    center = {"W1": np.array([[w_star[0]]]), "W2": np.array([[w_star[1]]])}
    stats = rrr_gibbs.Statistics.of(_data(np.random.default_rng(3), center, 50), 1.0)
    if w_star == (0.0, 0.0):
        exact = truth.normal_crossing_expected_llc(NBETA, 1, second_moment=stats.sxx.item() / 50,
                                                   cross_moment=stats.syx.item() / 50)
        assert exact == pytest.approx(_grid_expectation(stats, center), rel=1e-6)
    else:
        exact = _grid_expectation(stats, center)
    result = rrr_gibbs.gibbs_llc(stats, center, nbeta=NBETA, gamma=GAMMA, num_chains=8,
                                 num_warmup=200, num_samples=2000, seed=4)
    assert abs(result.mean - exact) < 4 * result.std_error
    assert abs(result.plain_mean - exact) < 4 * result.plain_std_error
    assert result.rhat < 1.01


@pytest.mark.slow  # 8 s of CPU for MALA's 84 000 steps
def test_the_gibbs_expectation_matches_mala_where_h_is_2(tiny):
    """Where the blocks are matrices (the quadrature case has 1 x 1 blocks): slt's MALA on the
    same local posterior, within 4 combined standard errors (measured: Gibbs 2.7985 ± 0.0057,
    MALA 2.764 ± 0.033)."""
    problem, stats, center = tiny
    gibbs = rrr_gibbs.gibbs_llc(stats, center, nbeta=NBETA, gamma=GAMMA, num_chains=8,
                                num_warmup=200, num_samples=5000, seed=6)
    mala = slt.llc(problem, center, jax.random.key(7),
                   posterior=slt.LocalPosterior(gamma=GAMMA, nbeta=NBETA),
                   sampler=slt.samplers.MALA(),
                   plan=slt.RunPlan(num_chains=4, num_warmup=1000, num_samples=20_000,
                                    progress=False))
    assert gibbs.rhat < 1.01 and mala.rhat < 1.01
    assert abs(gibbs.mean - mala.llc_mean) < 4 * np.hypot(gibbs.std_error, mala.std_error)
