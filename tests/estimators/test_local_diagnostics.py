"""Every named warning of a local run fires on a case built to earn it and stays silent where the
run is right; the exact cross-check agrees with a good run and refuses a hot one.

One problem throughout: Gaussian linear regression (d = 3, n = 2000, unit noise), whose local
posterior at the MLE is exactly Gaussian with precision n beta X'X / n + gamma I (about n beta
= 263 per direction), so what a step size does to it is known: SGLD at eps has the
per-direction inflation 1 / (1 - eps h / 4) (`configurational_temperature`'s docstring).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt import RunPlan
from slt.samplers import SGLD

N = 2000
SHORT = dict(num_chains=4, num_warmup=200, num_samples=400, progress=False)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 3))
    y = x @ np.array([1.0, -0.5, 0.3]) + rng.standard_normal(N)
    mle = {"w": jnp.asarray(np.linalg.lstsq(x, y, rcond=None)[0])}
    problem = slt.Problem.from_predict(lambda p, x: x @ p["w"], mle, {"x": x, "y": y},
                                       "gaussian")
    return problem, mle


GOOD = SGLD(step_size=2e-4)
DEFAULT = slt.LocalPosterior()  # eps n beta h / 4 = 0.013: discretisation and minibatch noise ~3%


def _names(problem, params, key=0, *, sampler=GOOD, posterior=DEFAULT, **plan):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc(problem, params, jax.random.key(key), sampler=sampler,
                         posterior=posterior, plan=RunPlan(**{**SHORT, **plan}))
    return result, set(result.warning_names)


def test_a_good_run_is_silent_and_every_warning_is_its_own_category(regression):
    problem, mle = regression
    with warnings.catch_warnings():
        warnings.simplefilter("error", slt.LocalRunWarning)
        result = slt.llc(problem, mle, jax.random.key(1), sampler=GOOD,
                         plan=RunPlan(num_samples=2000, num_warmup=500, progress=False))
    assert not result.warnings and result.warning_names == ()
    assert abs(result.temperature - 1) < 0.05 + result.temperature_std_error
    # a step five times larger is hot, and says so (minibatch noise: lambda_hat 15% high)
    with pytest.warns(slt.HotChains, match="^HotChains: the chains run hot"):
        slt.llc(problem, mle, jax.random.key(1), sampler=SGLD(step_size=1e-3),
                plan=RunPlan(num_samples=2000, num_warmup=500, progress=False))


def test_a_point_off_the_minimum_is_below_minimum_and_the_minima_are_not(regression):
    problem, mle = regression
    truth = {"w": jnp.array([1.0, -0.5, 0.3])}  # the population minimum: a sample's noise away
    off = {"w": mle["w"] + 0.1}  # training stopped early: 16 standard deviations of gradient
    results = {name: _names(problem, params) for name, params in
               (("mle", mle), ("truth", truth), ("off", off))}
    assert "BelowMinimum" in results["off"][1]
    assert results["off"][0].gradient_z > 5 and results["off"][0].llc_mean < 0
    # the shortfall predicted from the gradient is what the run lost against the MLE's
    lost = results["mle"][0].llc_mean - results["off"][0].llc_mean
    assert abs(results["off"][0].shortfall - lost) < 0.25 * lost
    for name in ("mle", "truth"):
        assert "BelowMinimum" not in results[name][1], name
    assert abs(results["mle"][0].gradient_z) < 3 and results["mle"][0].shortfall < 1e-6


def test_a_single_stuck_chain_is_named(regression):
    """One chain that stopped moving among chains that move (an exact sampler's chain whose
    step accepts nothing) earns ChainsDidNotMove naming it; the run itself does not."""
    from dataclasses import replace

    from slt.estimators.local.diagnostics import diagnose

    problem, mle = regression
    result, names = _names(problem, mle)
    assert "ChainsDidNotMove" not in names
    kept = result.nbeta * (result.loss_trace - result.center_loss_trace)  # no divergence
    frozen = np.array(result.distance_trace, copy=True)
    frozen[2] = frozen[2, 0]
    found = diagnose(replace(result, distance_trace=frozen), kept, GOOD)
    messages = [message for category, message in found
                if category is slt.estimators.local.diagnostics.ChainsDidNotMove]
    assert len(messages) == 1 and "chain(s) 2 of 4 did not move" in messages[0]


def test_hot_cold_unmixed_and_motionless_chains_are_named(regression):
    problem, mle = regression
    nbeta = N / np.log(N)
    # eps h / 4 = 1 / 4 in every direction: T = 4 / 3, lambda_hat a third too high
    hot, hot_names = _names(problem, mle, sampler=SGLD(step_size=1 / nbeta, batch_size=N))
    assert "HotChains" in hot_names and hot.temperature > 1.2
    # chains at w* with a step that needs ~1e4 steps to spread: cold
    cold, cold_names = _names(problem, mle, sampler=SGLD(step_size=1e-3 / nbeta),
                              start="center")
    assert "ColdChains" in cold_names and cold.temperature < 0.5
    # the same step from dispersed starts: the chains keep their own starts' estimates
    _, unmixed_names = _names(problem, mle, sampler=SGLD(step_size=1e-4 / nbeta), num_warmup=0)
    assert "ChainsDisagree" in unmixed_names
    still, still_names = _names(problem, mle, sampler=SGLD(step_size=1e-30))
    assert still_names == {"ChainsDidNotMove"}
    centred, _ = _names(problem, mle, sampler=SGLD(step_size=1e-30), start="center")
    assert abs(centred.llc_mean) < 1e-10 and "ChainsDidNotMove" in centred.warning_names


def test_chains_not_spread_along_a_flat_direction_are_named_and_gamma_is_a_remedy(regression):
    """A weight the loss never sees (u): the local posterior holds it only by gamma, with
    width 1 / sqrt(gamma); SGLD at eps diffuses that far in about 1 / (gamma eps) steps."""
    problem, mle = regression
    flat = slt.Problem.from_predict(lambda p, x: x @ p["w"], {**mle, "u": jnp.zeros(1)},
                                    {"x": problem.data["x"], "y": problem.data["y"]},
                                    "gaussian")
    params = {**mle, "u": jnp.zeros(1)}
    # gamma = 1: 600 steps of 2e-4 reach a variance of about 0.12 of the posterior's 1
    result, names = _names(flat, params)
    assert "NotSpread" in names and result.virial_temperature < 0.8
    assert "HotChains" not in names and "ColdChains" not in names  # locally in equilibrium
    assert any(m.startswith("NotSpread: the chains have not spread") for m in result.warnings)
    # gamma = 100: width 0.1, crossed in about 50 steps; the curved directions need it too
    result, names = _names(flat, params, posterior=slt.LocalPosterior(gamma=100.0))
    assert "NotSpread" not in names
    assert abs(result.virial_temperature - 1) < 0.05 + 3 * result.virial_temperature_std_error


def test_short_runs_say_so(regression):
    problem, mle = regression
    _, few = _names(problem, mle, num_samples=2)
    assert "TooFewDraws" in few
    short, short_names = _names(problem, mle, num_chains=2, num_samples=20, num_warmup=100)
    assert "LargeStandardError" in short_names and short.std_error > 0.1 * short.llc_mean
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel = slt.loss_kernel(problem, mle, jax.random.key(0), np.arange(3),
                                 sampler=SGLD(step_size=1e-3),
                                 plan=RunPlan(**{**SHORT, "observe_every": 1000}))
    assert any(message.startswith("TooFewDraws: R-hat of the") for message in kernel.warnings)


def test_the_exact_cross_check_agrees_with_a_good_run_and_not_with_a_hot_one(regression):
    problem, mle = regression
    nbeta = N / np.log(N)
    plan = RunPlan(num_warmup=500, num_samples=1500, progress=False)
    good, _ = _names(problem, mle, key=2, num_samples=1500, num_warmup=500)
    check = slt.llc_check(problem, mle, jax.random.key(3), good, plan=plan)
    assert check.agree and abs(check.z) <= 3 and check.reference.sampler == "HMC"
    assert list(check.summary().index) == ["estimate", "reference"]
    hot, _ = _names(problem, mle, key=2, sampler=SGLD(step_size=1 / nbeta, batch_size=N),
                    num_samples=1500, num_warmup=500)
    with pytest.warns(slt.DisagreesWithExact):
        refused = slt.llc_check(problem, mle, jax.random.key(3), hot, plan=plan)
    assert not refused.agree and refused.z > 3
    with pytest.raises(slt.validation.InputError, match="gamma"):
        slt.llc_check(problem, mle, jax.random.key(3), good,
                      posterior=slt.LocalPosterior(gamma=5.0), plan=plan)
