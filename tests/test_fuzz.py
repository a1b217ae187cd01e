"""Property test: malformed input never crashes, hangs or returns an unflagged NaN.

Hypothesis feeds malformed arrays (NaN / inf, wrong ndim, empty, huge values, wrong dtype) and
malformed settings (zero, negative, NaN, inf, fractional, of the wrong type) to Problem
construction, the fit and the estimators, with tiny settings. Each call must either raise one
of the documented exceptions (ValueError, which includes `slt.validation.InputError`, or
FloatingPointError) or return a result whose numbers are finite or flagged by a warning.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import slt
from slt import models

DOCUMENTED = (ValueError, FloatingPointError)
SPEC = models.linear_regression(2)
MIXTURE = models.fixed_component_mixture()
FUZZ = settings(
    max_examples=6, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

special_floats = st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0, 1e-300])
dtypes = st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128, np.str_])


@st.composite
def malformed_array(draw, good_shape):
    """An array near `good_shape`: its shape perturbed, its dtype changed, a value poisoned."""
    shape = draw(st.sampled_from([good_shape, good_shape[:1], (0, *good_shape[1:]),
                                  (*good_shape, 1), (), (good_shape[0] + 1, *good_shape[1:])]))
    dtype = draw(dtypes)
    values = draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    if values.size and draw(st.booleans()):
        values.flat[draw(st.integers(0, values.size - 1))] = draw(special_floats)
    with np.errstate(invalid="ignore", over="ignore"):
        return values.astype(dtype) if dtype is not np.str_ else values.astype(str)


bad_numbers = st.one_of(
    special_floats, st.integers(-3, 3), st.floats(-2, 2), st.booleans(),
    st.sampled_from(["auto", "fast", None, [1e-4]]),
)


def sometimes_bad(valid):
    """Mostly `valid`, a quarter of the time a bad number: so that some examples pass every
    check and run (a run costs a compilation), and the others probe one bad argument."""
    return st.one_of(valid, valid, valid, bad_numbers)


def sometimes_malformed(good_shape):
    good = hnp.arrays(np.float64, good_shape, elements=st.floats(-1.5, 1.5))
    return st.one_of(good, good, malformed_array(good_shape))


def _checked(call):
    """Run `call`; return its result, or None when it raised a documented exception."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return call(), caught
        except DOCUMENTED:
            return None, caught


@pytest.fixture(scope="module")
def case():
    data = SPEC.simulate(jax.random.key(0), {"w": jnp.array([1.0, -1.0])}, 16)
    problem = SPEC.problem(data)
    return problem, {"w": jnp.array([1.0, -1.0])}, {k: np.asarray(v) for k, v in data.items()}


@FUZZ
@given(x=malformed_array((16, 2)), y=malformed_array((16,)))
def test_problem_from_malformed_arrays_raises_or_is_finite_at_its_initial_point(x, y):
    problem, _ = _checked(lambda: SPEC.problem({"x": x, "y": y}))
    if problem is not None:
        assert np.isfinite(float(problem.log_joint(problem.init(jax.random.key(0)))))


@FUZZ
@given(
    w=sometimes_malformed((2,)), num_restarts=sometimes_bad(st.just(2)),
    learning_rate=sometimes_bad(st.sampled_from([0.01, 0.1])),
)
def test_fit_bic_and_laplace_from_malformed_starts(case, w, num_restarts, learning_rate):
    problem, _, _ = case
    fit, _ = _checked(lambda: slt.fit_map(  # a bad value is refused where it is built
        problem, jax.random.key(0), slt.MAPFit(num_restarts=num_restarts,
                                               learning_rate=learning_rate, adam_steps=5,
                                               lbfgs_steps=5),
        init={"w": w},
    ))
    if fit is not None:
        assert np.isfinite(fit.log_joint)
        laplace, caught = _checked(lambda: slt.laplace(problem, fit))
        assert laplace is not None
        assert np.isfinite(laplace.log_evidence) and (not laplace.singular or caught)
        assert np.isfinite(slt.bic(problem, fit).free_energy)


@FUZZ
@given(
    w=sometimes_malformed((2,)), step_size=sometimes_bad(st.sampled_from([1e-4, 1e-2, 10.0])),
    gamma=sometimes_bad(st.sampled_from([0.0, 1.0, 1e6])),
    nbeta=sometimes_bad(st.sampled_from([None, 1e-3, 1e8])), num_chains=sometimes_bad(st.just(2)),
)
def test_llc_with_malformed_settings(case, w, step_size, gamma, nbeta, num_chains):
    problem, _, _ = case
    result, caught = _checked(lambda: slt.llc(  # a bad value is refused where it is built
        problem, {"w": w}, jax.random.key(0),
        posterior=slt.LocalPosterior(gamma=gamma, nbeta=nbeta),
        sampler=slt.samplers.SGLD(step_size=step_size, batch_size=8),
        plan=slt.RunPlan(num_chains=num_chains, num_samples=8, num_warmup=0, progress=False),
    ))
    if result is not None:
        assert step_size != "auto"  # the calibration cannot pass with 8 draws
        assert np.isfinite(result.llc_mean) or (caught and result.warnings)


@FUZZ
@given(
    beta=sometimes_bad(st.sampled_from([None, 1e-6, 1e3])), num_chains=sometimes_bad(st.just(2)),
    num_samples=sometimes_bad(st.just(8)),
)
def test_wbic_with_malformed_settings(case, beta, num_chains, num_samples):
    problem, w, _ = case
    result, caught = _checked(lambda: slt.wbic(
        problem, jax.random.key(0), beta=beta, init=w, progress=False,
        sampler=slt.NUTS(num_chains=num_chains, num_warmup=5, num_samples=num_samples),
    ))
    if result is not None:
        assert np.isfinite(result.wbic) and np.isfinite(result.std_error)


@FUZZ
@given(
    num_particles=sometimes_bad(st.just(16)), target_ess=sometimes_bad(st.just(0.5)),
    num_copies=sometimes_bad(st.just(2)),
)
def test_free_energy_with_malformed_settings(case, num_particles, target_ess, num_copies):
    problem, _, _ = case
    result, _ = _checked(lambda: slt.free_energy(
        problem, jax.random.key(0), slt.Tempering(
            num_particles=num_particles, target_ess=target_ess, num_copies=num_copies,
            num_mcmc_steps=1, num_leapfrog=1), progress=False,
    ))
    if result is not None:
        assert np.isfinite(result.free_energy) and np.isfinite(result.std_error)


@FUZZ
@given(
    pi=sometimes_bad(st.floats(0, 1)), mu=sometimes_bad(st.floats(-1e3, 1e3)),
    sigma=sometimes_bad(st.floats(1e-3, 1e3)), rank_tol=sometimes_bad(st.just(1e-10)),
)
def test_fisher_at_malformed_points(pi, mu, sigma, rank_tol):
    point = {"pi": pi, "mu": mu, "sigma": sigma}
    result, _ = _checked(lambda: slt.fisher_information(
        MIXTURE, point, request=slt.FisherRequest(rank_tol=rank_tol)))
    if result is not None:
        assert np.all(np.isfinite(result.matrix)) and 0 <= result.rank <= result.dim
