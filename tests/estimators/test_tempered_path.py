"""One tempered path: E_beta[n L_n], WBIC and lambda from the particles of the SMC that gives F."""

import jax
import numpy as np
import pandas as pd
import pytest

from slt.estimators.evidence.compare import _choose
from slt.estimators.evidence.free_energy import free_energy
from slt.estimators.evidence.rlct import _best_fit, rlct_from_draws
from slt.estimators.evidence.wbic import copies_std_error, smc_draws, summarise_draws, wbic_beta

from .evidence_cases import conjugate_regression

MULTIPLIERS = np.array([0.25, 0.5, 1.0, 2.0, 4.0])


@pytest.fixture(scope="module")
def regression_path():
    case = conjugate_regression()
    betas = MULTIPLIERS / np.log(case.problem.n)
    # Over keys 0-75 the 380 t-statistics (E_beta[n L_n] - exact) / se of this run had rms
    # 0.97 and 0.5% beyond 3 (measured when the independence moves of both halves were
    # vmapped, which changed the random stream; key 11 then gave 3.05 at one temperature).
    result = free_energy(case.problem, jax.random.key(0), waypoints=betas, progress=False)
    return case, betas, result


def test_expected_nll_at_five_temperatures_from_one_run(regression_path):
    """Every waypoint is on every copy's ladder; E_beta[n L_n] within 3 se of the closed form."""
    case, betas, result = regression_path
    run = result.run
    np.testing.assert_allclose(run.waypoints, betas)
    for copy in range(run.betas.shape[0]):
        ladder = run.betas[copy][np.isfinite(run.betas[copy])]
        assert all(np.any(np.isclose(ladder, b, rtol=1e-6)) for b in betas)
    draws = smc_draws(run)
    for beta in betas:
        summary = summarise_draws(case.problem, draws.select(draws.betas == beta),
                                  sampler="smc", warn=False)
        assert abs(summary.wbic - case.expected_nll(beta)) < 3 * summary.std_error, beta
    assert abs(result.free_energy + case.log_evidence) < 4 * result.std_error + 0.05


def test_wbic_from_the_path(regression_path):
    case, betas, result = regression_path
    draws = smc_draws(result.run)
    beta = wbic_beta(case.problem.n)
    chosen = draws.select(np.isclose(draws.betas, beta, rtol=1e-12))
    summary = summarise_draws(case.problem, chosen, sampler="smc", warn=False)
    assert summary.num_chains == 4 and summary.sampler == "smc"
    assert abs(summary.wbic - case.expected_nll(beta)) < 3 * summary.std_error


def test_lambda_from_the_path_is_half_d_with_multiplicity_one(regression_path):
    case, betas, result = regression_path
    estimate = rlct_from_draws(case.problem, smc_draws(result.run), sampler="smc")
    assert abs(estimate.rlct - 1.5) < max(4 * estimate.std_error, 0.15 * 1.5)
    assert estimate.multiplicity == 1 and estimate.multiplicity_interval[0] == 1
    assert estimate.std_error <= 0.1 * 1.5 and not estimate.warnings


def test_copies_standard_error_never_below_independent_draws():
    rng = np.random.default_rng(0)
    identical = np.tile(rng.normal(size=200), (4, 1))  # copies agree exactly
    assert copies_std_error(identical) == pytest.approx(identical.std() / np.sqrt(800))
    shifted = identical + np.arange(4)[:, None]
    assert copies_std_error(shifted) == pytest.approx(np.arange(4).std(ddof=1) / 2)


def test_integer_multiplicity_recovered_from_exact_expectations():
    """E_beta = a + lambda/beta - (m - 1)/(beta log(n beta)) with m = 2: the fit picks m = 2
    and lambda exactly; m = 1 data give m = 1. Never a negative or fractional m."""
    n, betas = 1000, np.geomspace(0.25, 4, 9) / np.log(1000)
    for m in (1, 2):
        exact = 1400 + 0.5 / betas - (m - 1) / (betas * np.log(n * betas))
        per_chain = exact + np.random.default_rng(m).normal(0, 1e-4, (4, betas.size))
        best = _best_fit(betas, per_chain.mean(0), np.full(betas.size, 1e-4), per_chain, n, 3)
        assert best["multiplicity"] == m and best["rlct"] == pytest.approx(0.5, abs=1e-3)


def test_choices_report_ties_inside_the_noise():
    table = pd.DataFrame({"wbic": [100.0, 100.5, 110.0], "wbic_se": [0.3, 0.3, 0.3]},
                         index=["a", "b", "c"])
    assert _choose(table, "wbic", True) == "tie: a, b"
    table.loc["b", "wbic"] = 103.0
    assert _choose(table, "wbic", True) == "a"
    assert _choose(pd.DataFrame({"bic": [3.0, 2.0]}, index=["x", "y"]), "bic", True) == "y"
