"""BIC and Laplace against exact evidences; Laplace's singularity flags."""

import warnings

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import slt
from slt.estimators import bic, laplace

from .evidence_cases import conjugate_regression, product_model, regression_fit

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def regression_fits():
    case = conjugate_regression()
    return case, regression_fit(prior=True), regression_fit(prior=False)


def test_laplace_is_exact_on_conjugate_regression(regression_fits):
    case, map_fit, _ = regression_fits
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a regular model raises no diagnostic
        result = laplace(case.problem, map_fit)
    assert result.log_evidence == pytest.approx(case.log_evidence, rel=1e-6)
    assert result.free_energy == -result.log_evidence
    assert not result.singular and result.rank == result.data_rank == 3
    assert np.all(result.eigenvalues > 0) and result.newton_decrement < 1e-10


def test_bic_is_within_d_of_the_free_energy(regression_fits):
    case, _, mle_fit = regression_fits
    result = bic(case.problem, mle_fit)
    d, n = 3, case.problem.n
    assert result.dim == d and result.objective == "mle"
    assert result.free_energy == pytest.approx(result.nll + 0.5 * d * np.log(n))
    assert result.bic == pytest.approx(2 * result.free_energy)
    assert result.nll == pytest.approx(-mle_fit.loglik)
    assert abs(result.free_energy - (-case.log_evidence)) < d
    assert "BICResult" in repr(result) and len(result.summary()) == 1


def test_laplace_flags_the_product_model_as_singular():
    case = product_model()
    fit = slt.fit_map(case.problem, jax.random.key(0))
    with pytest.warns(UserWarning, match="singular"):
        result = laplace(case.problem, fit)
    assert result.singular and result.rank == 2 and result.data_rank == 1
    # the prior supplies half the curvature along the valley ab = const
    assert result.prior_share[-1] > 1 / np.sqrt(case.problem.n)
    assert np.isfinite(result.log_evidence) and "SINGULAR" in repr(result)


def test_numerically_singular_hessian_is_flagged_not_infinite():
    # w[1] enters neither the likelihood nor the prior's curvature: an exact null direction
    data = {"x": np.linspace(-1, 1, 50), "y": np.linspace(-0.5, 0.5, 50)}

    def nll(params, batch):
        return 0.5 * (batch["y"] - params["w"][0] * batch["x"]) ** 2 + 0.5 * np.log(2 * np.pi)

    def log_prior(params):
        return -0.5 * params["w"][0] ** 2 - 0.5 * np.log(2 * np.pi)

    problem = slt.Problem.from_loss(nll, {"w": jnp.zeros(2)}, data, log_prior=log_prior)
    fit = slt.fit_map(problem, jax.random.key(0), slt.MAPFit(num_restarts=2))
    with pytest.warns(UserWarning, match="numerically singular"):
        result = laplace(problem, fit)
    assert result.singular and result.rank == 1 and result.dim == 2
    assert np.isfinite(result.log_evidence) and np.isfinite(result.log_det_hessian)
    assert result.smallest_eigenvalues[0] == pytest.approx(0.0, abs=1e-8)


def test_num_modes_adds_log_modes(regression_fits):
    case, map_fit, _ = regression_fits
    one, six = laplace(case.problem, map_fit), laplace(case.problem, map_fit, num_modes=6)
    assert six.log_evidence - one.log_evidence == pytest.approx(np.log(6))


def test_bad_input(regression_fits):
    case, map_fit, mle_fit = regression_fits
    with pytest.raises(ValueError, match="MAP"):
        laplace(case.problem, mle_fit)
    with pytest.raises(ValueError, match="num_modes"):
        laplace(case.problem, map_fit, num_modes=0)
    with pytest.raises(ValueError, match="FitResult"):
        bic(case.problem, {"w": 0})
    flat = slt.Problem.from_loss(
        lambda p, b: (b["y"] - p["w"]) ** 2, {"w": jnp.zeros(())}, {"y": np.ones(5)}
    )
    with pytest.raises(ValueError, match="proper prior"):
        laplace(flat, slt.fit_map(flat, jax.random.key(0), slt.MAPFit(num_restarts=2)))


def test_plots_return_figures(regression_fits):
    case, map_fit, mle_fit = regression_fits
    assert laplace(case.problem, map_fit).plot() is not None
    assert bic(case.problem, mle_fit).plot() is not None
