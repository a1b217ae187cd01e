"""The reference free energy against exact and quadrature log evidences (TRUTH.md)."""

import jax
import matplotlib
import numpy as np
import pytest

from slt.estimators import free_energy
from slt.estimators.evidence.free_energy import thermodynamic_integral
from slt.samplers import Tempering, tempering

from .evidence_cases import (
    conjugate_regression,
    poisson_intercept,
    product_model,
    two_component_mixture,
)

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def regression_free_energy():
    case = conjugate_regression()
    return case, free_energy(case.problem, jax.random.key(0), Tempering(), progress=False)


def test_conjugate_regression_within_three_se_and_a_third_of_a_nat(regression_free_energy):
    case, result = regression_free_energy
    exact = -case.log_evidence
    assert abs(result.free_energy - exact) < 3 * result.std_error
    assert abs(result.free_energy - exact) < 0.3
    # TI over the same ladder agrees too
    assert abs(result.ti[0] - exact) < max(3 * result.ti[1], 0.1)
    assert result.std_error < 0.1 and result.num_copies == 4 and not result.warnings
    # d = 3: the default moves include independence proposals, and most are accepted
    assert np.nanmin(result.run.independence_acceptance) > 0.3
    assert np.nanmin(result.run.num_moves[:, 1:]) >= 4


def test_hmc_moves_alone_are_exact_too():
    case = conjugate_regression()
    result = free_energy(case.problem, jax.random.key(1), Tempering(kernel="hmc"), progress=False)
    exact = -case.log_evidence
    assert abs(result.free_energy - exact) < 3 * result.std_error
    assert np.all(np.isnan(result.run.independence_acceptance))
    assert np.nanmin(result.run.num_moves[:, 1:]) >= 2 and not result.warnings


def test_the_ladder_runs_from_the_prior_to_the_posterior(regression_free_energy):
    _, result = regression_free_energy
    run = result.run
    for betas in run.betas:
        betas = betas[np.isfinite(betas)]
        assert betas[0] == 0.0 and betas[-1] == 1.0 and np.all(np.diff(betas) > 0)
    assert np.all(run.num_stages > 10)
    np.testing.assert_allclose(-run.log_evidence, result.per_copy)
    assert result.log_evidence == -result.free_energy
    assert result.to_xarray()["beta"].dims == ("copy", "stage")
    assert len(result.summary()) == 1 and "FreeEnergyResult" in repr(result)
    assert result.plot() is not None


def test_same_key_same_result_and_no_recompilation(regression_free_energy):
    case, result = regression_free_energy
    traces = tempering._TRACE_COUNT[0]
    again = free_energy(case.problem, jax.random.key(0), Tempering(), progress=False)
    assert tempering._TRACE_COUNT[0] == traces and again.run.compile_time == 0.0
    np.testing.assert_array_equal(again.per_copy, result.per_copy)


@pytest.mark.slow  # 26 s; the fast suite checks the product model's log Z by nested sampling
def test_product_model_within_a_third_of_a_nat_of_quadrature():
    case = product_model()
    result = free_energy(case.problem, jax.random.key(1), Tempering(), progress=False)
    assert abs(result.free_energy + case.log_evidence) < 0.3
    assert abs(result.free_energy + case.log_evidence) < 4 * result.std_error + 0.05


@pytest.mark.slow  # 25 s of make test's 10 minutes; the fast suite checks the tempered path
# on a bimodal posterior against its exact log Z (test_evidence_draws: the fallback)
def test_two_component_mixture_within_a_third_of_a_nat_of_quadrature():
    case = two_component_mixture()
    result = free_energy(case.problem, jax.random.key(2), Tempering(num_particles=500),
                         progress=False)
    assert abs(result.free_energy + case.log_evidence) < 0.3
    assert abs(result.free_energy + case.log_evidence) < 4 * result.std_error + 0.05


def test_thermodynamic_integral_is_exact_for_cubics():
    # f(beta) = 1 + 2 beta - 3 beta^2 + beta^3, V = -f'; the corrected trapezoid is exact
    betas = np.array([0.0, 0.1, 0.35, 0.6, 1.0, np.nan])
    f = 1 + 2 * betas - 3 * betas**2 + betas**3
    v = -(2 - 6 * betas + 3 * betas**2)
    assert thermodynamic_integral(betas, f, v) == pytest.approx(1 + 1 - 1 + 0.25, rel=1e-12)


@pytest.mark.slow  # make test's 10 minutes: run with -m slow
def test_ti_agrees_with_smc_and_quadrature_under_a_diffuse_prior():
    # n L_n is heavy-tailed under the N(0, 10^2) prior of a Poisson log-rate: the trapezoid
    # over the first stages used to give TI = -5e12; those stages now come from the SMC
    # increments and the quadrature covers the rest
    case = poisson_intercept()
    result = free_energy(case.problem, jax.random.key(2), Tempering(), progress=False)
    exact = -case.log_evidence
    for estimate, se in (result.smc, result.ti):
        assert abs(estimate - exact) < max(4 * se, 0.05)
    assert not result.warnings


def test_thermodynamic_integral_takes_unresolved_intervals_from_the_smc_path():
    betas = np.array([0.0, 1e-6, 0.5, 1.0])
    f, v = np.array([1e15, 20.0, 11.0, 10.0]), np.array([1e40, 3.0, 2.0, 1.0])
    path = np.array([0.0, -7.0, -14.0, -20.0])
    # the first interval (h^2 V = 1e28) comes from the path; the rest by the quadrature
    rest = 0.5 * 0.5 * (20 + 11) - 0.25 / 12 * (3 - 2) + 0.5 * 0.5 * (11 + 10) - 0.25 / 12 * 1
    assert thermodynamic_integral(betas, f, v, path) == pytest.approx(7.0 + rest)
    assert abs(thermodynamic_integral(betas, f, v)) > 1e20  # the quadrature alone


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="method must be one of 'auto', 'draws', 'smc', "
                                         "'importance', 'ti', 'nested'"):
        free_energy(problem, jax.random.key(0), method="bridge")
    with pytest.raises(ValueError, match="num_copies"):
        free_energy(problem, jax.random.key(0), Tempering(num_copies=1))
    with pytest.raises(ValueError, match="target_ess"):
        free_energy(problem, jax.random.key(0), Tempering(target_ess=1.0))
    with pytest.raises(ValueError, match="sampler must be a NestedSampling value"):
        free_energy(problem, jax.random.key(0), Tempering(), method="nested")
