"""lambda_hat along training (`llc_trajectory`): one program for every checkpoint, the exact
value where the checkpoints reach the minimum, save / load / resume, refusals."""

import warnings

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import slt
from slt import LocalPosterior, RunPlan, models
from slt.samplers import SGLD, local_chains

matplotlib.use("Agg")

NUM_CHECKPOINTS = 20


@pytest.fixture(scope="module")
def training_run():
    """Linear regression (d = 3, lambda = 3/2) trained by gradient descent from 0: 20
    checkpoints, the last ten at the minimum of L_n to 1e-12 (where lambda_hat = d / 2)."""
    spec = models.linear_regression(3)
    values = {"w": jnp.array([1.0, -1.0, 0.5])}
    problem = spec.problem(spec.simulate(jax.random.key(0), values, 2000))
    gradient = jax.jit(jax.grad(lambda params: problem.loss(params)))
    params, checkpoints = {"w": jnp.zeros(3)}, []
    for step in range(NUM_CHECKPOINTS * 20):
        if step % 20 == 0:
            checkpoints.append(params)
        params = jax.tree.map(lambda w, g: w - 0.2 * g, params, gradient(params))
    return problem, checkpoints


def _run(problem, checkpoints, *, checkpoint=None, max_chains=None, **options):
    """The trajectory of `checkpoints` taken every 20 training steps (`checkpoint`: the
    plan's progress file; `max_chains`: the plan's; `options`: llc_trajectory's own
    keywords)."""
    plan = RunPlan(num_chains=2, num_samples=500, num_warmup=200, checkpoint=checkpoint,
                   progress=False, max_chains=max_chains)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # early checkpoints are no minima: llc says so
        return slt.llc_trajectory(problem, dict(zip(20 * np.arange(len(checkpoints)),
                                                    checkpoints, strict=True)),
                                  jax.random.key(1), sampler=SGLD(step_size=2e-4), plan=plan,
                                  **options)


def test_twenty_checkpoints_compile_once_and_reach_the_exact_value(training_run, tmp_path):
    problem, checkpoints = training_run
    before = local_chains.compile_count()
    trajectory = _run(problem, checkpoints, max_chains=16)  # 8 a run: 3, the last padded
    assert local_chains.compile_count() == before + 1
    assert len(trajectory) == NUM_CHECKPOINTS and trajectory.checkpoints_per_run == 8
    np.testing.assert_allclose(trajectory.losses,
                               [float(problem.loss(c)) for c in checkpoints], rtol=1e-12)
    # gradient descent: L_n never rises, up to rounding once it has converged (an ulp)
    assert np.all(np.diff(trajectory.losses) <= 2 * np.finfo(float).eps * trajectory.losses[1:])
    at_minimum = trajectory.llc_means[-10:]
    se = trajectory.std_errors[-10:]
    assert np.all(np.abs(at_minimum - 1.5) <= 4 * se + 0.05 * 1.5), at_minimum
    pooled = np.average(at_minimum, weights=se**-2)  # ten independent estimates of 3/2
    assert abs(pooled - 1.5) <= 4 * np.sqrt(1 / np.sum(se**-2)) + 0.05 * 1.5
    # before the minimum the draws fall below L_n(w_t): the checkpoint is flagged
    assert trajectory[0].fraction_below_init > 0.9 and trajectory[0].warnings
    summary = trajectory.summary()
    assert list(summary.index) == list(20 * np.arange(NUM_CHECKPOINTS))
    loaded = slt.LLCTrajectory.load(trajectory.save(tmp_path / "trajectory.nc"))
    np.testing.assert_array_equal(loaded.llc_means, trajectory.llc_means)
    assert trajectory.plot(reference=np.full(NUM_CHECKPOINTS, 1.5)).axes


def test_a_checkpointed_trajectory_is_rebuilt_from_its_files(training_run, tmp_path):
    problem, checkpoints = training_run
    path = tmp_path / "progress.npz"
    first = _run(problem, checkpoints[:6], max_chains=8, checkpoint=path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress-run1.npz", "progress.npz"]
    again = _run(problem, checkpoints[:6], max_chains=8, checkpoint=path)
    np.testing.assert_array_equal(again.llc_means, first.llc_means)
    assert again.compile_time == 0.0  # nothing sampled: the finished runs were read back


@pytest.mark.parametrize(
    "arguments, message",
    [
        (lambda c: {"checkpoints": []}, "non-empty sequence"),
        (lambda c: {"checkpoints": [{"w": jnp.zeros(2)}]}, r"checkpoints\[0\]"),
        # the training steps are the mapping's keys: one that is not a finite number
        (lambda c: {"checkpoints": {0: c[0], float("nan"): c[1]}}, "one per checkpoint"),
        (lambda c: {"calibrate_at": 3}, "calibrate_at must index"),
        (lambda c: {"parts": {}}, "parts is empty"),
        (lambda c: {"parts": {"w0": {"w": np.array([True, False, False])}},
                    "posterior": LocalPosterior(restrict_to={"w": True})}, "restricts every part"),
        (lambda c: {"parts": {"none": {"w": False}}}, "part 'none'"),
        (lambda c: {"posterior": LocalPosterior(restrict_to={"w": False})},
         "selects no weight"),
    ],
)
def test_bad_arguments_are_named(training_run, arguments, message):
    problem, checkpoints = training_run
    arguments = {"checkpoints": checkpoints[:3]} | arguments(checkpoints)
    with pytest.raises(slt.InputError, match=message):
        slt.llc_trajectory(problem, arguments.pop("checkpoints"), jax.random.key(0),
                           **arguments)


@pytest.fixture(scope="module")
def eight_weights():
    """Linear regression with 8 weights, one part each, and 10 checkpoints of gradient
    descent from 0."""
    spec = models.linear_regression(8)
    values = {"w": jnp.linspace(-1.0, 1.0, 8)}
    problem = spec.problem(spec.simulate(jax.random.key(3), values, 500))
    gradient = jax.jit(jax.grad(lambda params: problem.loss(params)))
    params, checkpoints = {"w": jnp.zeros(8)}, []
    for step in range(200):
        if step % 20 == 0:
            checkpoints.append(params)
        params = jax.tree.map(lambda w, g: w - 0.3 * g, params, gradient(params))
    parts = {f"w{i}": {"w": np.arange(8) == i} for i in range(8)}
    return problem, checkpoints, parts


def test_eight_parts_by_ten_checkpoints_compile_once_and_equal_separate_calls(eight_weights):
    problem, checkpoints, parts = eight_weights
    plan = RunPlan(num_chains=2, num_warmup=100, num_samples=200, progress=False)
    sampler = SGLD(step_size=2e-3, mala_every=0)  # no MALA / temperature: a smaller program
    key = jax.random.key(4)
    before = local_chains.compile_count()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        along = slt.llc_trajectory(problem, checkpoints, key, parts, sampler=sampler,
                                   plan=plan)
        assert local_chains.compile_count() == before + 1  # 8 parts x 10 checkpoints, one run
        # each (checkpoint, part) is llc of that part alone at fold_in(key, checkpoint): the
        # same random numbers, the same draws up to the rounding of programs vmapped over
        # 160 chains rather than 2 (XLA sums in another order: 1 ulp)
        for t, name in [(4, "w5")]:
            alone = slt.llc(problem, checkpoints[t], jax.random.fold_in(key, t),
                            posterior=LocalPosterior(restrict_to=parts[name]),
                            sampler=sampler, plan=plan)
            np.testing.assert_allclose(along[name][t].loss_trace, alone.loss_trace,
                                       rtol=1e-12)
        # ... and does not depend on how the checkpoints are batched into runs
        batched = slt.llc_trajectory(problem, checkpoints, key, parts, sampler=sampler,
                                     plan=RunPlan(num_chains=2, num_warmup=100,
                                                  num_samples=200, progress=False,
                                                  max_chains=3 * 8 * 2))
    assert batched["w3"].checkpoints_per_run == 3
    np.testing.assert_allclose(batched.llc_means, along.llc_means, rtol=1e-12)
    assert along.llc_means.shape == (10, 8) and along.parts == tuple(parts)
    assert list(along.summary().index.names) == ["part", "step"]
    settings = along.settings()
    assert list(settings.index) == list(parts) and np.all(settings["step_size"] == 2e-3)
    assert along.plot().axes


def test_each_part_is_calibrated_once_by_one_program(eight_weights, tmp_path):
    problem, checkpoints, parts = eight_weights
    few = {name: parts[name] for name in ("w0", "w7")}
    sweep = slt.samplers.Calibration(step_sizes=(1e-3, 3e-3), gammas=(1.0, 100.0),
                                     num_warmup=100, num_samples=200, chains_per_candidate=2)
    sampler = SGLD(step_size=sweep, mala_every=0)  # the sweep measures its own
    key = jax.random.key(5)
    before = local_chains.compile_count()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        along = slt.llc_trajectory(problem, checkpoints[-2:], key, few, sampler=sampler,
                                   plan=RunPlan(num_chains=2, num_warmup=100,
                                                num_samples=200, progress=False))
        compiled = local_chains.compile_count() - before
        calibration_key = jax.random.split(key)[0]
        expected = [slt.llc_calibrate(problem, checkpoints[-1], calibration_key,
                                      posterior=LocalPosterior(restrict_to=few[name]),
                                      sampler=sampler, progress=False) for name in few]
    assert compiled == 2  # one sweep program for both parts, one for the trajectory
    settings = along.settings()
    for name, found in zip(few, expected, strict=True):
        assert (settings.loc[name, "step_size"], settings.loc[name, "gamma"]) == (
            found.step_size, found.gamma)
        assert along[name][0].gamma == found.gamma  # the chosen gamma is the one run
    loaded = slt.PartsTrajectory.load(along.save(tmp_path / "parts.nc"))
    np.testing.assert_array_equal(loaded.llc_means, along.llc_means)
    assert loaded.parts == along.parts
