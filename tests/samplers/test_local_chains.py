import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from slt import LocalPosterior, Problem, RunPlan, compile_cache
from slt.samplers import SGLD, local_chains
from slt.samplers.local_chains import ChainTargets, run_chains


def _targets(step_size, gamma, nbeta, parts=1, **options):
    """`ChainTargets` of `parts` parts, each value shared by all of them or given per part."""
    per_part = (np.broadcast_to(np.asarray(value, float), (parts,))
                for value in (step_size, gamma, nbeta))
    return ChainTargets(*per_part, **options)


def _plan(num_steps, num_chains=1, **options):
    """A run of `num_steps` steps of `num_chains` chains per part (no warmup, no progress)."""
    return RunPlan(num_chains=num_chains, num_warmup=0, num_samples=num_steps, progress=False,
                   **options)


def _index_problem(n=40):
    """A loss that reveals the minibatch: the per-example NLL is the example's index."""
    return Problem.from_loss(
        lambda p, b: b["y"] + 0.0 * p["w"], {"w": jnp.zeros(())}, {"y": jnp.arange(n, dtype=float)}
    )


def test_chains_draw_shuffled_epochs_without_replacement(key):
    problem = _index_problem(40)
    trace = run_chains(
        problem,
        {"w": jnp.zeros(())},
        key,
        _targets(step_size=1e-3, gamma=0.0, nbeta=1.0),
        sampler=SGLD(batch_size=10, mala_every=0),
        plan=_plan(12, num_chains=3, chunk_size=5),
    )
    # each epoch is 4 batches of 10 covering every index once: the epoch mean is mean(0..39)
    epochs = trace.loss[:, :12].reshape(3, 3, 4).mean(axis=2)
    np.testing.assert_allclose(epochs, 19.5, rtol=1e-12)
    # the paired loss at the centre is the mean over the same minibatch (from cached values)
    np.testing.assert_allclose(trace.center_loss, trace.loss, rtol=1e-12)
    assert trace.center_full_loss == pytest.approx(19.5, rel=1e-12)  # L_n(center), full data
    # chains and epochs get different orders
    assert not np.allclose(trace.loss[0], trace.loss[1])
    assert not np.allclose(trace.loss[0, :4], trace.loss[0, 4:8])


def test_a_centre_with_a_non_finite_loss_is_refused(key):
    problem = Problem.from_loss(
        lambda p, b: -jnp.log(p["w"] + b["y"]), {"w": jnp.ones(())}, {"y": jnp.zeros(20)}
    )
    with pytest.raises(ValueError, match="L_n is not finite at the centre"):
        run_chains(problem, {"w": -jnp.ones(())}, key, _targets(1e-3, 0.0, 1.0),
                   sampler=SGLD(batch_size=10), plan=_plan(5))


def test_one_compilation_per_configuration(key):
    problem = _index_problem(40)
    center = {"w": jnp.zeros(())}
    sampler = SGLD(batch_size=10, mala_every=3)
    plan = _plan(30, num_chains=2, chunk_size=10)
    before = local_chains.compile_count()
    first = run_chains(problem, center, key, _targets(1e-3, 1.0, 2.0), sampler=sampler,
                       plan=plan)
    assert local_chains.compile_count() == before + 1  # three chunks, one program
    second = run_chains(problem, center, key, _targets(1e-2, 5.0, 7.0), sampler=sampler,
                        plan=plan)
    assert local_chains.compile_count() == before + 1  # new values, no recompilation
    assert first.compile_time > 0 and second.compile_time == 0.0
    run_chains(
        problem,
        center,
        key,
        _targets(1e-3, 1.0, 2.0),
        sampler=SGLD(batch_size=20, mala_every=3),
        plan=plan,
    )
    assert local_chains.compile_count() == before + 2  # a new configuration compiles once


def test_one_program_serves_every_run_length_and_a_run_stops_at_its_end(key):
    """The run's length is a runtime value: runs of 7, 25 and 30 steps (chunks of 10) share
    one program, and the last chunk runs only the steps before the end, so a run's final
    position is that of its last step: the 25-step run ends where step 25 of a 26-step run
    starts (same key, same draws), not where the 30-step run ends."""
    problem = _index_problem(40)
    center = {"w": jnp.zeros(())}
    sampler = SGLD(batch_size=10, mala_every=3)
    targets = _targets(1e-3, 1.0, 2.0)
    before = local_chains.compile_count()
    runs = {steps: run_chains(problem, center, key, targets, sampler=sampler,
                              plan=_plan(steps, num_chains=2, chunk_size=10))
            for steps in (7, 25, 30)}
    assert local_chains.compile_count() == before + 1
    assert [run.loss.shape[1] for run in runs.values()] == [7, 25, 30]
    np.testing.assert_array_equal(runs[25].loss, runs[30].loss[:, :25])
    np.testing.assert_array_equal(runs[7].loss, runs[30].loss[:, :7])
    # SGLD records the distance from the centre (0) where a step starts: step 25 of a longer
    # run starts where the 25-step run ended
    longer = run_chains(problem, center, key, targets, sampler=sampler,
                        plan=_plan(26, num_chains=2, chunk_size=10))
    np.testing.assert_allclose(np.abs(runs[25].final_position[:, 0]), longer.distance[:, 25],
                               rtol=1e-12)
    assert not np.allclose(runs[25].final_position, runs[30].final_position)


def test_divergence_stops_and_flags_the_chain(key):
    problem = Problem.from_loss(
        lambda p, b: 0.5 * (b["y"] - p["w"]) ** 4, {"w": jnp.zeros(())}, {"y": jnp.zeros(50)}
    )
    trace = run_chains(
        problem,
        {"w": jnp.zeros(())},
        key,
        _targets(step_size=[1e-4, 5.0], gamma=0.0, nbeta=50.0, parts=2),  # a chain each
        sampler=SGLD(batch_size=50, mala_every=0),
        plan=_plan(200),
    )
    assert trace.diverged_at[0] == -1 and trace.diverged_at[1] >= 0
    stopped = trace.diverged_at[1]
    assert np.all(np.isnan(trace.loss[1, stopped:])) and np.all(np.isfinite(trace.loss[0]))


def _quadratic_problem(curvature, dim, n=100):
    """L(w) = curvature |w|^2 / 2 for every example: no minibatch noise, a Gaussian target."""
    return Problem.from_loss(
        lambda p, b: 0.5 * curvature * jnp.sum(p["w"] ** 2) + 0.0 * b["y"],
        {"w": jnp.zeros(dim)},
        {"y": jnp.zeros(n)},
    )


def test_extrapolation_combines_twin_chains(key):
    problem = _quadratic_problem(1.0, 3)
    center = {"w": jnp.zeros(3)}
    plan = _plan(40, num_chains=2, chunk_size=15)
    # two parts of two chains: chains 0, 1 at eps / 2, chains 2, 3 at eps
    twins = run_chains(problem, center, key, _targets([0.01, 0.02], 0.5, 20.0, parts=2),
                       sampler=SGLD(batch_size=10, mala_every=4), plan=plan)
    combined = run_chains(problem, center, key, _targets(0.02, 0.5, 20.0),
                          sampler=SGLD(batch_size=10, mala_every=4, extrapolate=True),
                          plan=plan)
    np.testing.assert_array_equal(combined.loss, 2 * twins.loss[:2] - twins.loss[2:])
    np.testing.assert_array_equal(combined.center_loss,
                                  2 * twins.center_loss[:2] - twins.center_loss[2:])
    np.testing.assert_array_equal(combined.log_acceptance, twins.log_acceptance[2:])
    np.testing.assert_array_equal(combined.laplacian, twins.laplacian[2:])
    np.testing.assert_array_equal(combined.distance, twins.distance[:2])
    np.testing.assert_array_equal(combined.virial, twins.virial[:2])
    np.testing.assert_array_equal(combined.final_position, twins.final_position[:2])


def test_a_twin_pair_diverges_when_either_twin_does():
    trace = local_chains.ChainTrace(
        *(np.zeros((4, 3)) for _ in range(7)), center_full_loss=0.0,
        diverged_at=np.array([-1, 7, 5, -1], np.int32),
        final_position=np.zeros((4, 1)), compile_time=0.0, run_time=0.0,
    )
    np.testing.assert_array_equal(local_chains._combine_twins(trace).diverged_at, [5, 7])


def test_extrapolation_removes_the_step_size_bias_on_a_gaussian(key):
    """Langevin with step eps on N(0, 1/h) per coordinate is stationary at variance
    1 / (h (1 - eps h / 4)), so lambda_hat = E[h |w|^2 / 2] = (d / 2) / (1 - eps h / 4) exactly;
    the twin combination gives (d / 2) (2 / (1 - eps h / 8) - 1 / (1 - eps h / 4)). Both checked
    within 4 standard errors; the plain estimate is 14% high, the extrapolated one 1% low."""
    from slt import llc

    dim, nbeta, eps_h = 20, 50.0, 0.5
    problem = _quadratic_problem(1.0, dim)
    posterior = LocalPosterior(gamma=0.0, nbeta=nbeta)
    sampler = SGLD(step_size=eps_h / nbeta, batch_size=100, mala_every=0)
    plan = RunPlan(num_chains=4, num_samples=3000, num_warmup=200, progress=False)
    plain = llc(problem, {"w": jnp.zeros(dim)}, key, posterior=posterior, sampler=sampler,
                plan=plan)
    twins = llc(problem, {"w": jnp.zeros(dim)}, key, posterior=posterior,
                sampler=replace(sampler, extrapolate=True), plan=plan)
    half = dim / 2
    exact_plain = half / (1 - eps_h / 4)
    exact_twins = half * (2 / (1 - eps_h / 8) - 1 / (1 - eps_h / 4))
    assert abs(plain.llc_mean - exact_plain) < 4 * plain.std_error
    assert abs(twins.llc_mean - exact_twins) < 4 * twins.std_error
    assert twins.extrapolated and not plain.extrapolated
    # the bias is real: the plain estimate is far outside the extrapolated one's error bars
    assert plain.llc_mean - half > 8 * plain.std_error


SHARDED_RUN = """
import jax
from slt import RunPlan, models, llc_trajectory
from slt.samplers import SGLD
spec = models.reduced_rank_regression(3, 2, 3)
truth = models.random_low_rank(jax.random.key(0), [3, 2, 3], 1)
problem = spec.problem(spec.simulate(jax.random.key(1), truth, 500))
center = problem.unconstrain(truth)
later = jax.tree.map(lambda w: 1.01 * w, center)
# two checkpoints x two chains: four chains in one program, split over the devices
trajectory = llc_trajectory(problem, [center, later], jax.random.key(3),
                            sampler=SGLD(step_size=1e-5, batch_size=64),
                            plan=RunPlan(num_chains=2, num_samples=300, num_warmup=50,
                                         progress=False))
numbers = {"devices": jax.device_count(), "processes": jax.process_count(),
           "per_chain": [r.llc_per_chain.tolist() for r in trajectory.results]}
"""
SHARDING_SCRIPT = """
import json, sys
import jax
process_id, processes, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
jax.config.update("jax_enable_x64", True)
if processes > 1:  # multi-controller JAX: one process per device, Gloo collectives on CPU
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes=processes,
                               process_id=process_id)
""" + SHARDED_RUN + """
if jax.process_index() == 0:
    print(json.dumps(numbers))
"""


def _run_sharded(devices_per_process, processes=1):
    """SHARDING_SCRIPT in `processes` local processes (jax.distributed when more than one),
    each with `devices_per_process` CPU devices; what process 0 printed."""
    environment = os.environ | {
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
                     f"--xla_force_host_platform_device_count={devices_per_process}",
        "JAX_PLATFORMS": "cpu",
    }
    with socket.socket() as probe:  # a free port for the coordinator
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    launched = [
        subprocess.Popen(
            [sys.executable, "-c", SHARDING_SCRIPT, str(rank), str(processes), str(port)],
            env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for rank in range(processes)
    ]
    outputs = [process.communicate(timeout=300) for process in launched]
    for process, (_, errors) in zip(launched, outputs, strict=True):
        assert process.returncode == 0, errors[-3000:]
    return json.loads(outputs[0][0].strip().splitlines()[-1])


@pytest.mark.slow  # make test's 10 minutes: run with -m slow
def test_sharded_chains_give_the_same_numbers():
    """Chains sharded over 2 devices give the numbers of 1 device (to rounding: the per-device
    batch of chains differs), and over 2 processes (multi-controller JAX, `jax.distributed`,
    one device each) bitwise the numbers of 1 process with 2 devices: the same program, the
    same chains on each device."""
    namespace = {}
    exec(SHARDED_RUN, namespace)  # noqa: S102 - this process: one CPU device
    one, two = namespace["numbers"], _run_sharded(2)
    distributed = _run_sharded(1, processes=2)
    assert (one["devices"], two["devices"], distributed["devices"]) == (1, 2, 2)
    assert distributed["processes"] == 2
    assert distributed["per_chain"] == two["per_chain"]
    np.testing.assert_allclose(two["per_chain"], one["per_chain"], rtol=1e-10)


def test_the_chunk_program_takes_the_data_as_an_argument(key):
    """The data reach the compiled program as an argument, not as constants compiled into it:
    its argument buffers hold them, so compile time and memory do not grow with n."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5000, 20)).astype(np.float32)

    def nll(params, batch):
        return 0.5 * (batch["y"] - batch["x"] @ params["w"]) ** 2

    problem = Problem.from_loss(nll, {"w": jnp.zeros(20)}, {"x": x, "y": x.sum(1)})
    run_chains(problem, {"w": jnp.zeros(20)}, key, _targets(1e-6, 1.0, 1.0),
               sampler=SGLD(batch_size=100, mala_every=2), plan=_plan(4, num_chains=2))
    compiled = next(reversed(compile_cache._PROGRAMS[problem].values()))
    assert compiled.memory_analysis().argument_size_in_bytes >= x.nbytes


def _exponential_problem(n=6):
    """l_i(w) = c_i exp(w) with c_i > 0: on the full batch L_b(w_t) = mean(c) exp(w_t), so
    every draw's per-example losses c_i L_b(w_t) / mean(c) can be read off the loss trace."""
    scales = np.linspace(0.5, 2.0, n)
    problem = Problem.from_loss(lambda p, b: b["c"] * jnp.exp(p["w"]), {"w": jnp.zeros(())},
                                {"c": scales})
    return problem, scales


OBSERVED_TARGETS = _targets(step_size=0.05, gamma=1.0, nbeta=4.0)
OBSERVED_SAMPLER = SGLD(batch_size=6, mala_every=0)


def _observed_plan(num_warmup, **options):
    """3 chains, 45 steps in chunks of 10, observed from `num_warmup` on."""
    return RunPlan(num_chains=3, num_warmup=num_warmup, num_samples=45 - num_warmup,
                   chunk_size=10, progress=False, **options)


def test_observed_moments_are_those_of_the_draws_after_warmup(key):
    """The streamed moments equal NumPy's over the draws the schedule selects (steps 7, 10, ...,
    43 of 45: from the end of the warmup, every 3rd, none from the last chunk's steps past the
    run), with a second example set read out through a matrix, block by block (one per chunk
    of 10 steps) and merged; observing does not change the chains."""
    from slt.samplers import moments
    from slt.samplers.local_chains import Observables

    problem, scales = _exponential_problem()
    center = {"w": jnp.zeros(())}
    other = {"c": np.array([3.0, 0.25])}
    readout = np.array([[1.0, -1.0], [0.5, 0.5], [0.0, 2.0]])
    observables = Observables(problem.take(jnp.array([0, 5, 2])), other, y_readout=readout,
                              every=3)
    plan = _observed_plan(7)  # observed from the end of the warmup, step 7
    plain = run_chains(problem, center, key, OBSERVED_TARGETS, sampler=OBSERVED_SAMPLER,
                       plan=plan)
    trace = run_chains(problem, center, key, OBSERVED_TARGETS, sampler=OBSERVED_SAMPLER,
                       plan=plan, observables=observables)
    for name in ("loss", "center_loss", "distance", "final_position"):
        np.testing.assert_array_equal(getattr(trace, name), getattr(plain, name))
    assert plain.moments is None
    exp_w = trace.loss[:, 7:45:3] / scales.mean()  # (chain, draw)
    x = exp_w[..., None] * scales[[0, 5, 2]]
    y = (exp_w[..., None] * other["c"]) @ readout.T
    steps = np.arange(7, 45, 3)
    np.testing.assert_array_equal(trace.moments.count, np.broadcast_to(
        np.bincount(steps // 10), (3, 5)))  # 1, 4, 3, 3, 2 draws in the five chunks
    block = steps // 10 == 1  # steps 10, 13, 16, 19
    np.testing.assert_allclose(trace.moments.mean_x[:, 1], x[:, block].mean(1), rtol=1e-12)
    np.testing.assert_allclose(moments.covariance(trace.moments)[:, 1], np.stack(
        [np.cov(x[c, block].T, y[c, block].T)[:3, 3:] for c in range(3)]), rtol=1e-9,
        atol=1e-14)
    summary = moments.combine(trace.moments, axis=1)
    np.testing.assert_array_equal(summary.count, [13, 13, 13])
    later = run_chains(problem, center, key, OBSERVED_TARGETS, sampler=OBSERVED_SAMPLER,
                       plan=_observed_plan(12), observables=observables)
    np.testing.assert_array_equal(later.moments.count, np.broadcast_to(  # no block of chunk 0
        np.bincount(np.arange(12, 45, 3) // 10)[1:], (3, 4)))
    for chain in range(3):
        np.testing.assert_allclose(summary.mean_x[chain], x[chain].mean(0), rtol=1e-12)
        np.testing.assert_allclose(summary.mean_y[chain], y[chain].mean(0), rtol=1e-12)
        np.testing.assert_allclose(
            moments.covariance(summary)[chain],
            np.cov(x[chain].T, y[chain].T)[:3, 3:], rtol=1e-9, atol=1e-14)
    with pytest.raises(ValueError, match="extrapolate=False"):
        run_chains(problem, center, key, OBSERVED_TARGETS,
                   sampler=replace(OBSERVED_SAMPLER, extrapolate=True), plan=plan,
                   observables=observables)


def test_observed_moments_resume_from_a_checkpoint_bitwise(key, tmp_path, saves):
    """A run stopped after two chunks resumes from its checkpoint to the bitwise same
    summaries (they are part of the saved records)."""
    from slt.samplers.checkpoint import Interrupted
    from slt.samplers.local_chains import Observables

    problem, _ = _exponential_problem()
    center, path = {"w": jnp.zeros(())}, tmp_path / "run.npz"
    observables = Observables(problem.take(jnp.arange(4)), every=2)
    plan = _observed_plan(5)

    def run(**options):
        return run_chains(problem, center, key, OBSERVED_TARGETS, sampler=OBSERVED_SAMPLER,
                          plan=replace(plan, **options), observables=observables)

    whole = run()
    saves.interrupt_at = 2
    with pytest.raises(Interrupted):
        run(checkpoint=path)
    saves.interrupt_at = None
    resumed = run(checkpoint=path)
    for got, expected in zip(resumed.moments, whole.moments, strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(resumed.loss, whole.loss)
