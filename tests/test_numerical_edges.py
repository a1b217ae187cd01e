"""Numerical edge cases: near-singular curvature, large n, float32 with x64 off and on, very flat
and very sharp posteriors. Known answers come from the conjugate linear regression of TRUTH.md.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt import FitResult, Problem, models
from slt.geometry.spectrum import spectrum_summary

KEY = jax.random.key(0)


def _regression_data(n, noise_scale=1.0, seed=0):
    """float32 inputs and outputs (so float32 and float64 problems see the same numbers)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0]) + noise_scale * rng.normal(size=n)).astype(np.float32)
    return x, y


def _fit_at(problem, params):
    """A MAP `FitResult` at known `params` (the tests know the optimum; no search needed)."""
    loglik = float(jnp.sum(problem.loglik(params, problem.data)))
    log_prior = float(problem.log_prior(params))
    return FitResult(
        params=params, values=problem.constrain(params), loglik=loglik, log_prior=log_prior,
        log_joint=loglik + log_prior, objective="map", grad_norm=0.0, num_restarts=1,
        num_agree=1, agree_tol=1e-3, restart_objectives=np.array([loglik + log_prior]),
    )


def _exact_map(problem, x, y, noise_scale, prior_precision):
    """The closed-form MAP of conjugate regression (w | y is Gaussian), in the problem's dtype."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    precision = x.T @ x / noise_scale**2 + prior_precision * np.eye(2)
    return {"w": jnp.asarray(np.linalg.solve(precision, x.T @ y / noise_scale**2), problem.dtype)}


def _exact_log_evidence(x, y, noise_scale, prior_precision):
    return slt.truth.linear_regression_log_evidence(
        x.astype(np.float64), y.astype(np.float64), noise_scale, prior_precision
    )


@pytest.mark.parametrize(
    "noise_scale, prior_precision, n",
    [
        (1.0, 1.0, 200_000),  # large n: n L_n ~ 3e5, summed without overflow or cancellation
        (1e-3, 1.0, 50),  # very sharp posterior: Hessian eigenvalues ~ 5e7
        (1.0, 1e-10, 50),  # very flat prior: -½ d log(1/a) ~ -23 nats of Occam factor
    ],
    ids=["large-n", "sharp", "flat"],
)
def test_laplace_is_exact_for_conjugate_regression_from_a_float32_problem(
    noise_scale, prior_precision, n
):
    """Laplace is exact here; it differentiates in float64 even when the problem is float32."""
    x, y = _regression_data(n, noise_scale)
    spec = models.linear_regression(2, noise_scale=noise_scale, prior_precision=prior_precision)
    problem = spec.problem({"x": x, "y": y}, x64=False)
    assert problem.dtype == jnp.float32
    fit = _fit_at(problem, _exact_map(problem, x, y, noise_scale, prior_precision))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the flat prior is flagged: it supplies no curvature
        result = slt.laplace(problem, fit)
    exact = _exact_log_evidence(x, y, noise_scale, prior_precision)
    # the only error is the float32 rounding of the MAP, second order in it: ~ n * 1e-14
    np.testing.assert_allclose(result.log_evidence, exact, rtol=1e-9)
    assert result.rank == 2


def test_float32_n_l_n_at_large_n_is_accurate_to_float32_resolution():
    """n L_n summed in float32 over 2e5 examples: within 1e-6 relative of float64 (no
    overflow, no catastrophic cancellation), as the README states."""
    x, y = _regression_data(200_000)
    spec = models.linear_regression(2)
    values = {"w": jnp.array([1.0, -1.0])}
    nll32 = -float(jnp.sum(spec.problem({"x": x, "y": y}, x64=False).loglik(
        {"w": values["w"].astype(jnp.float32)}, {"x": x, "y": y})))
    p64 = spec.problem({"x": x, "y": y}, x64=True)
    nll64 = -float(jnp.sum(p64.loglik(values, p64.data)))
    assert np.isfinite(nll32) and abs(nll32 - nll64) < 1e-6 * nll64


def test_float32_losses_of_a_million_examples_sum_to_within_a_few_ulps():
    """L_n(w*) as llc computes it in float32 (`init_loss`: the mean of the per-example losses
    at w*, the reference of every chain) at n = 1e6, against the exact sum (math.fsum in
    float64) of the same float32 per-example losses: XLA's reductions are blocked, so the
    summation adds at most a few units in the last place of the result (measured: 0.4 ulp
    of n L_n = 1.4e6); a running sum in float32 errs by about 2900 ulps on such losses
    (measured with NumPy's sequential cumsum)."""
    import math

    x, y = _regression_data(1_000_000)
    problem = models.linear_regression(2).problem({"x": x, "y": y}, x64=False)
    w = {"w": jnp.array([1.0, -1.0], jnp.float32)}
    losses = -np.asarray(problem.loglik(w, problem.data), np.float64)
    exact = math.fsum(losses) / losses.size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc(problem, w, jax.random.key(0),
                         sampler=slt.samplers.SGLD(step_size=1e-8),
                         plan=slt.RunPlan(num_chains=1, num_samples=20, num_warmup=0,
                                          progress=False))
    ulp = float(np.spacing(np.float32(exact)))
    assert abs(result.init_loss - exact) <= 4 * ulp
    assert abs(float(problem.loss(w)) - exact) <= 4 * ulp


@pytest.fixture(scope="module")
def float32_case():
    x, y = _regression_data(400)
    return models.linear_regression(2), x, y


def test_float32_sampling_with_x64_on(float32_case):
    """Problem(x64=False) samples in float32 although 64-bit JAX is on (conftest)."""
    spec, x, y = float32_case
    problem = spec.problem({"x": x, "y": y}, x64=False)
    fit = slt.fit_map(problem, KEY, slt.MAPFit(num_restarts=1, adam_steps=0, lbfgs_steps=3),
                      init=_exact_map(problem, x, y, 1.0, 1.0))
    assert fit.params["w"].dtype == jnp.float32
    assert problem.loglik(fit.params, problem.data).dtype == jnp.float32
    result = slt.llc(
        problem, fit.params, KEY, sampler=slt.samplers.SGLD(step_size=1e-4, batch_size=64),
        plan=slt.RunPlan(num_chains=2, num_samples=200, num_warmup=50, progress=False),
    )
    assert result.loss_trace.dtype == np.float32
    # d/2 = 1; a loose check that float32 sampling is not garbage (se measured ~0.1)
    assert np.isfinite(result.llc_mean)
    assert abs(result.llc_mean - 1.0) < 5 * result.std_error + 0.5


def test_x64_off_samples_in_float32_and_keeps_geometry_in_float64(float32_case):
    spec, x, y = float32_case
    with jax.enable_x64(False):
        problem = spec.problem({"x": x, "y": y})
        assert problem.dtype == jnp.float32
        fit = _fit_at(problem, _exact_map(problem, x, y, 1.0, 1.0))
        laplace = slt.laplace(problem, fit)
        result = slt.llc(
            problem, fit.params, KEY, sampler=slt.samplers.SGLD(step_size=1e-4, batch_size=64),
            plan=slt.RunPlan(num_chains=2, num_samples=50, num_warmup=0, progress=False),
        )
        # the slides' mixture at mu = 0: pi is unidentifiable, an exactly zero eigenvalue
        fisher = slt.fisher_information(
            models.fixed_component_mixture(), {"pi": 0.5, "mu": 0.0, "sigma": 1.0}
        )
        near = slt.fisher_information(
            models.fixed_component_mixture(), {"pi": 0.5, "mu": 1e-2, "sigma": 1.0}
        )
    np.testing.assert_allclose(laplace.log_evidence, _exact_log_evidence(x, y, 1.0, 1.0),
                               rtol=1e-9)
    assert np.isfinite(result.llc_mean)
    assert fisher.matrix.dtype == np.float64 and fisher.rank == 2
    # at mu = 1e-2 the smallest eigenvalue is ~mu^6 / 2 = 5e-13 of the largest: float64
    # resolves it (float32 could not), yet it lies below the default floor 1e-10
    assert near.eigenvalues[0] > 0 and near.rank == 2
    assert slt.fisher_information(
        models.fixed_component_mixture(), {"pi": 0.5, "mu": 1e-2, "sigma": 1.0},
        request=slt.FisherRequest(rank_tol=1e-14),
    ).rank == 3


def test_eigenvalue_floors_are_relative_to_the_largest():
    """The rank does not change when a matrix is rescaled by any power of ten."""
    eigenvalues = np.array([1e-16, 1e-6, 1.0])
    for scale in (1e-200, 1e-8, 1.0, 1e8, 1e200):
        summary = spectrum_summary(eigenvalues * scale, 1e-10)
        assert summary["rank"] == 2 and summary["log_det"] == -np.inf
        expected = np.log(1e-6) + 2 * np.log(scale)
        np.testing.assert_allclose(summary["log_pdet"], expected, rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
def test_laplace_flags_a_near_singular_hessian_at_any_scale(scale):
    """Curvature 1e-14 relative to the largest, in float64: below the floor at every scale, so
    Laplace is flagged (with a warning), its value finite over the kept directions."""
    curvature = scale * jnp.array([1.0, 1e-14])

    def nll(params, batch):
        return 0.5 * jnp.sum(curvature * params["w"] ** 2) + 0.0 * batch["y"]

    def log_prior(params):
        return -0.5 * 1e-30 * jnp.sum(params["w"] ** 2)

    problem = Problem.from_loss(nll, {"w": jnp.zeros(2)}, {"y": np.zeros(1)}, log_prior=log_prior)
    fit = _fit_at(problem, {"w": jnp.zeros(2)})
    with pytest.warns(UserWarning, match="numerically singular"):
        result = slt.laplace(problem, fit)
    assert result.singular and result.rank == 1 and np.isfinite(result.log_evidence)


def test_a_singular_design_and_d_above_n_give_a_flagged_laplace_result():
    """A constant design, or more parameters than examples: the prior fixes the directions the
    data leave open, so the evidence is defined; Laplace returns it finite (exact, for this
    conjugate model), flagged and warned."""
    rng = np.random.default_rng(0)
    designs = {"constant design": np.ones((15, 2)), "d > n": rng.normal(size=(4, 6))}
    for label, x in designs.items():
        y = rng.normal(size=x.shape[0])
        problem = models.linear_regression(x.shape[1]).problem({"x": x, "y": y})
        exact_map = np.linalg.solve(x.T @ x + np.eye(x.shape[1]), x.T @ y)  # noise 1, prior N(0, 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = slt.laplace(problem, _fit_at(problem, {"w": jnp.asarray(exact_map)}))
        exact = slt.truth.linear_regression_log_evidence(x, y, 1.0, 1.0)
        np.testing.assert_allclose(result.log_evidence, exact, rtol=1e-10, err_msg=label)
        assert result.singular and result.data_rank < problem.dim, label
        assert any("data determine only" in str(w.message) for w in caught), label
