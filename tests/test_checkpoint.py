"""Checkpoints: a run killed mid-way resumes from its file to the uninterrupted result, bitwise.

Each estimator runs in a child process (`run_cases.py`, its checkpoint writes slowed down so
that the signal lands mid-run) while this process computes the uninterrupted reference with
the same key; the child is signalled once its checkpoint holds two units, and the run is then
resumed here from the file it left.
"""

import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from run_cases import HOLD_AT, RUNS, assert_bitwise_equal, minimum, run_llc

from slt import TemperedSGLD
from slt.samplers.checkpoint import CheckpointError, Interrupted

RUN_CASES = Path(__file__).with_name("run_cases.py")
KEY = jax.random.key(0)


def _meta(path: Path) -> dict:
    with np.load(path) as archive:
        return json.loads(str(archive["meta"]))


def _wait_for_units(process, path: Path, units: int, stderr, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and _meta(path)["units_done"] >= units):
        if process.poll() is not None or time.monotonic() > deadline:
            stderr.seek(0)
            pytest.fail(f"the child ended or stalled before {units} units:\n{stderr.read()}")
        time.sleep(0.02)


@pytest.mark.heavy
@pytest.mark.parametrize(
    "name, signum",
    [("llc", signal.SIGINT),
     # NUTS's unit loop is the one every sampler runs (slt.samplers.runner): its kill case
     # (13 s) runs with the slow suite; the fast suite keeps SMC's and SGLD's
     pytest.param("wbic", signal.SIGTERM, marks=pytest.mark.slow),
     ("free_energy", signal.SIGTERM), ("llc", signal.SIGKILL)],
    ids=["llc-SIGINT", "wbic-SIGTERM", "free_energy-SIGTERM", "llc-SIGKILL"],
)
def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path, saves, name, signum):
    path = tmp_path / "run.npz"
    with open(tmp_path / "stderr", "w+") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(RUN_CASES), name, str(path)], stdout=subprocess.DEVNULL,
            stderr=stderr, text=True,
        )
        try:
            reference = RUNS[name](KEY)  # while the child starts up
            _wait_for_units(child, path, HOLD_AT, stderr)
            child.send_signal(signum)
            assert child.wait(timeout=120) != 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        stderr.seek(0)
        message = stderr.read()
    if signum != signal.SIGKILL:  # the finished units are saved, then Interrupted
        assert "Interrupted" in message and f"{signum.name} received: progress saved" in message
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz", "stderr"]
    meta = _meta(path)
    assert not meta["complete"] and meta["units_done"] >= 2
    resumed = RUNS[name](KEY, checkpoint=path)
    assert saves.units[0] == meta["units_done"] + 1  # continued, not started again
    assert_bitwise_equal(reference, resumed)
    assert _meta(path)["complete"]


def test_a_complete_checkpoint_returns_its_result_without_sampling(tmp_path):
    path = tmp_path / "llc.npz"
    first = run_llc(KEY, checkpoint=path)
    written = path.stat().st_mtime_ns
    again = run_llc(KEY, checkpoint=path)
    assert_bitwise_equal(first, again)
    assert again.run_time == first.run_time and path.stat().st_mtime_ns == written


def test_a_checkpoint_of_another_run_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "llc.npz"
    run_llc(KEY, checkpoint=path)
    content = path.read_bytes()
    with pytest.raises(CheckpointError, match=r"different run \(it differs in: key, part_keys\)"):
        run_llc(jax.random.key(1), checkpoint=path)
    with pytest.raises(CheckpointError, match="differs in: num_steps, step_size"):
        run_llc(KEY, checkpoint=path, step_size=1e-3, num_samples=100)
    with pytest.raises(CheckpointError, match="differs in: .*sampler"):
        RUNS["wbic"](KEY, checkpoint=path)
    assert path.read_bytes() == content
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable slt checkpoint"):
        run_llc(KEY, checkpoint=path)


@pytest.mark.filterwarnings("ignore:R-hat")
def test_sgld_wbic_stops_on_a_keyboard_interrupt_keeps_finished_chunks_and_resumes(tmp_path,
                                                                                    saves):
    """In process: the checkpoint reaches `run_chains` through the "sgld" sampler of wbic; the
    library leaves the signal handlers alone."""
    run = functools.partial(
        RUNS["wbic"], sampler=TemperedSGLD, init=minimum(), step_size=1e-3, batch_size=10
    )
    reference = run(KEY)
    path = tmp_path / "sgld.npz"
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    saves.interrupt_at = 2  # Ctrl-C while the third chunk is being saved
    with pytest.raises(Interrupted) as raised:
        run(KEY, checkpoint=path)
    assert isinstance(raised.value, KeyboardInterrupt) and raised.value.path == path
    assert raised.value.signal == signal.SIGINT and saves.units == [1, 2]
    assert _meta(path)["units_done"] == 2  # the interrupted chunk is lost, the others kept
    assert {number: signal.getsignal(number) for number in before} == before
    saves.interrupt_at = None
    resumed = run(KEY, checkpoint=path)
    assert saves.units[2:] == list(range(3, 11))
    assert_bitwise_equal(reference, resumed)


def test_an_adaptive_run_resumes_to_the_same_length_and_numbers(tmp_path, saves):
    """RunPlan's "auto" lengths are decided from the recorded traces alone
    (`slt.samplers.run_length`), so a run interrupted and resumed stops where the uninterrupted
    one did, with the same draws; and the same key gives the same numbers."""
    run = functools.partial(run_llc, num_warmup="auto", num_samples="auto", max_steps=3000,
                            chunk_size=100)
    reference = run(KEY)
    steps = reference.num_warmup + reference.num_samples
    assert reference.num_warmup % 100 == 0 and reference.num_samples >= 400
    assert reference.gradients == 2 * 10 * -(-steps // 100) * 100 and reference.stop_reason
    path = tmp_path / "auto.npz"
    saves.interrupt_at = 2
    with pytest.raises(Interrupted):
        run(KEY, checkpoint=path)
    saves.interrupt_at = None
    assert_bitwise_equal(reference, run(KEY, checkpoint=path))
    assert_bitwise_equal(reference, run(KEY))
