"""SGHMC's kernel (`slt.samplers.sghmc`) and value (`slt.samplers.SGHMC`) against exact answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from slt.samplers import SGHMC
from slt.samplers.sghmc import sghmc
from slt.validation import InputError
from tests.samplers.gaussian_runs import positions_on_a_gaussian


def test_sghmc_samples_a_gaussian_exactly():
    """Full-gradient SGHMC (BAOAB) on N(m, diag(s^2)): its positions are distributed exactly
    as the target at any stable step (module doc), here eps K = 0.2 and 0.0125 for the two
    coordinates, where the momentum form of Chen et al. would be 5.6% and 0.3% wide. Mean and
    variance within 4 standard errors of 64 independent chains (the spread of their
    per-chain statistics: no autocorrelation model needed), the variance's error bar tight
    enough to see a 3% bias."""
    mean, scale = np.array([1.0, -2.0]), np.array([0.5, 2.0])
    num_chains = 64
    positions = positions_on_a_gaussian(sghmc(0.1), mean, scale, 0.05, num_chains=num_chains,
                                        burn_in=2_000, num_steps=20_000,
                                        key=jax.random.key(0))
    per_chain_var, per_chain_mean = positions.var(axis=1), positions.mean(axis=1)
    variance_se = per_chain_var.std(axis=0, ddof=1) / np.sqrt(num_chains)
    mean_se = per_chain_mean.std(axis=0, ddof=1) / np.sqrt(num_chains)
    assert np.all(np.abs(per_chain_var.mean(0) - scale**2) < 4 * variance_se)
    assert np.all(np.abs(per_chain_mean.mean(0) - mean) < 4 * mean_se)
    assert np.all(4 * variance_se < 0.03 * scale**2)


def test_the_momentum_form_would_be_wide_where_baoab_is_exact():
    """The reason for BAOAB, by the exact stationary covariance of both linear chains on
    U = K w^2 / 2 (discrete Lyapunov equations): at eps K = 0.26, a = 0.1 the momentum form
    v' = (1 - a) v - eps K w + sqrt(2 a eps) xi, w' = w + v' has Var(w) = 1.073 / K, BAOAB
    exactly 1 / K."""
    eps, curvature, a = 0.26, 1.0, 0.1
    momentum_form = np.array([[1 - eps * curvature, 1 - a], [-eps * curvature, 1 - a]])
    wide = scipy.linalg.solve_discrete_lyapunov(momentum_form, np.full((2, 2), 2 * a * eps))
    h = np.sqrt(eps)
    kick = np.array([[1, 0], [-h / 2 * curvature, 1]])
    drift = np.array([[1, h / 2], [0, 1]])
    baoab = kick @ drift @ np.diag([1, np.exp(-a)]) @ drift @ kick
    noise = kick @ drift @ np.array([[0.0], [np.sqrt(-np.expm1(-2 * a))]])
    exact = scipy.linalg.solve_discrete_lyapunov(baoab, noise @ noise.T)
    assert wide[0, 0] == pytest.approx(1 / (1 - eps / (2 * (2 - a))), rel=1e-9)
    assert exact[0, 0] == pytest.approx(1 / curvature, rel=1e-12)


def test_a_mask_holds_the_other_coordinates_and_their_momentum():
    def log_density(w):
        return -0.5 * jnp.sum((w - 1.0) ** 2), None

    algorithm = sghmc(0.2)
    mask = jnp.array([True, False, True])
    state = algorithm.init(jnp.zeros(3))
    for k in range(5):
        state, info = algorithm.step(jax.random.key(k), state, log_density, 0.1, mask)
    assert state.position[1] == 0.0 and state.momentum[1] == 0.0
    assert np.all(np.asarray(state.position)[[0, 2]] != 0.0)
    assert info.gradient[1] == 0.0


@pytest.mark.parametrize("friction", [0.0, -0.1, 1.5, float("nan"), "0.1"])
def test_friction_outside_zero_one_is_refused(friction):
    with pytest.raises(InputError, match="friction"):
        SGHMC(friction=friction)


def test_sghmc_value_reads_its_defaults():
    sampler = SGHMC()
    assert (sampler.friction, sampler.batch_size, sampler.control_variates,
            sampler.measure_every) == (0.1, 256, True, 10)
    assert sampler.calibration is not None and SGHMC(step_size=1e-4).calibration is None
    with pytest.raises(InputError, match="batch_size"):
        SGHMC(batch_size=0)


def test_control_variates_are_unbiased_and_exact_at_the_centre(regression):
    """The control-variate gradient on a minibatch is -n beta (grad L_b(w) - grad L_b(w*) +
    grad L_n(w*)) - gamma (w - w*): at w* it is the full-data gradient whatever the batch,
    and averaged over the disjoint batches that tile the data it is the full-data gradient
    at any w."""
    from slt.estimators.local.center import measure_center
    from slt.samplers.local_chains import _local_log_target, _with_control_variates

    problem = regression[0]
    plain = _local_log_target(problem, include_prior=False)
    relative = _with_control_variates(plain, problem)
    center = jnp.array([0.9, -1.1, 0.4])
    center_gradient = measure_center(problem, problem.unravel(center)).gradient
    gamma, nbeta = 1.0, 250.0

    def gradient(target, flat, batch, *extra):
        return jax.grad(lambda w: target(w, batch, *extra, gamma, nbeta, center)[0])(flat)

    full = problem.data
    batches = [problem.take(jnp.arange(k, k + 250), full) for k in range(0, 2000, 250)]
    at_center = gradient(plain, center, full)
    for batch in batches[:2]:
        np.testing.assert_allclose(gradient(relative, center, batch, center_gradient),
                                   at_center, rtol=1e-10, atol=1e-9)
    elsewhere = center + jnp.array([0.05, -0.02, 0.1])
    mean = np.mean([gradient(relative, elsewhere, batch, center_gradient)
                    for batch in batches], axis=0)
    np.testing.assert_allclose(mean, gradient(plain, elsewhere, full), rtol=1e-10, atol=1e-9)


def test_sghmc_chains_resume_from_a_checkpoint_bitwise(regression, tmp_path, saves):
    """The momentum is part of the saved state: a run stopped after one chunk resumes to the
    bitwise same trace."""
    from dataclasses import replace

    from slt import RunPlan
    from slt.estimators.local.center import measure_center
    from slt.samplers.checkpoint import Interrupted
    from slt.samplers.local_chains import ChainTargets, run_chains

    problem, key = regression[0], jax.random.key(1)
    center = {"w": jnp.array([1.0, -1.0, 0.5])}
    targets = ChainTargets(np.array([1e-3]), np.array([1.0]), np.array([250.0]),
                           center_gradient=measure_center(problem, center).gradient[None])
    plan = RunPlan(num_chains=2, num_warmup=0, num_samples=30, chunk_size=10, progress=False)

    def run(**options):
        return run_chains(problem, center, key, targets, sampler=SGHMC(step_size=1e-3),
                          plan=replace(plan, **options))

    whole = run()
    saves.interrupt_at = 1
    with pytest.raises(Interrupted):
        run(checkpoint=tmp_path / "run.npz")
    saves.interrupt_at = None
    resumed = run(checkpoint=tmp_path / "run.npz")
    np.testing.assert_array_equal(resumed.loss, whole.loss)
    np.testing.assert_array_equal(resumed.final_position, whole.final_position)
    assert np.all(np.isnan(whole.log_acceptance))  # a momentum step has no MALA acceptance
    assert np.isfinite(whole.gradient_product[:, ::10]).all()  # the temperature is measured


def test_control_variates_need_the_gradient_at_the_centre(regression):
    """SGHMC's control variates take grad L_n(w*) from the targets (`ChainTargets.
    center_gradient`, as `measure_center` finds it): without it, or with a gradient of
    another shape, the run is refused with the field named."""
    from slt import RunPlan
    from slt.samplers.local_chains import ChainTargets, run_chains

    problem, key = regression[0], jax.random.key(1)
    center = {"w": jnp.array([1.0, -1.0, 0.5])}
    plan = RunPlan(num_chains=1, num_warmup=0, num_samples=2, progress=False)
    for gradient in (None, np.zeros(3)):
        targets = ChainTargets(np.array([1e-3]), np.array([1.0]), np.array([250.0]),
                               center_gradient=gradient)
        with pytest.raises(ValueError, match="center_gradient"):
            run_chains(problem, center, key, targets, sampler=SGHMC(step_size=1e-3), plan=plan)
