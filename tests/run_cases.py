"""Tiny runs of the sampling estimators, shared by test_checkpoint.py and test_reproducibility.py.

One small regular problem (linear regression with two parameters, n = 40, standard normal
prior) and, in `RUNS`, a short checkpointable run of `slt.llc`, `slt.wbic` (NUTS) and
`slt.free_energy` on it, each `run(key, checkpoint=None)`. The problem is built once per
process, so that the estimators' compiled programs are shared between the tests.

Run as a script, `python tests/run_cases.py NAME CHECKPOINT` performs run NAME with key 0 and
that checkpoint in float64 (SIGTERM raising a KeyboardInterrupt, as in the `slt` command),
each checkpoint write delayed by `SAVE_DELAY` seconds, and the process waiting (up to
`HOLD_SECONDS`) once `HOLD_AT` units are saved, so that a test signals it mid-run however late
the test gets there. The delays change when things happen, never what is computed.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
import sys
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

import slt

SAVE_DELAY = 0.25
HOLD_AT = 2  # units saved when the child waits for the test's signal
HOLD_SECONDS = 300.0
NUM_EXAMPLES = 40


@functools.cache
def problem() -> slt.Problem:
    """y = 0.5 + x + N(0, 1) noise at 40 inputs on [-1, 1]; w ~ N(0, I_2)."""
    x = np.linspace(-1.0, 1.0, NUM_EXAMPLES)
    y = 0.5 + x + np.random.default_rng(0).normal(size=NUM_EXAMPLES)

    def nll(params, batch):
        w = params["w"]
        return 0.5 * (batch["y"] - w[0] - w[1] * batch["x"]) ** 2 + 0.5 * jnp.log(2 * jnp.pi)

    def log_prior(params):
        return jnp.sum(jax.scipy.stats.norm.logpdf(params["w"]))

    return slt.Problem.from_loss(nll, {"w": jnp.zeros(2)}, {"x": x, "y": y}, log_prior=log_prior)


def minimum() -> dict:
    """The least-squares (maximum-likelihood) parameters: w* for the LLC."""
    data = problem().data
    design = np.stack([np.ones(NUM_EXAMPLES), np.asarray(data["x"])], axis=1)
    return {"w": jnp.asarray(np.linalg.lstsq(design, np.asarray(data["y"]), rcond=None)[0])}


def prior_draws(key, num):
    return jax.random.normal(key, (num, 2))


def run_llc(key, checkpoint=None, *, step_size=2e-3, **plan):
    """30 chunks of 10 steps, two chains; `plan`: other `slt.RunPlan` fields."""
    settings = dict(num_chains=2, num_warmup=20, num_samples=280, chunk_size=10, progress=False)
    return slt.llc(problem(), minimum(), key,
                   sampler=slt.samplers.SGLD(step_size=step_size, batch_size=10),
                   plan=slt.RunPlan(checkpoint=checkpoint, **(settings | plan)))


def run_wbic(key, checkpoint=None, *, sampler=slt.NUTS, init=None, **fields):
    """NUTS (or `sampler=slt.TemperedSGLD`): 10 chunks of 10 steps, two chains; `fields`:
    other fields of the NUTS value, or of the SGLD value `TemperedSGLD` holds."""
    settings = dict(num_chains=2, num_warmup=40, num_samples=60, chunk_size=10)
    if sampler is slt.TemperedSGLD:
        chosen = slt.TemperedSGLD(slt.samplers.SGLD(extrapolate=True, **fields),
                                  slt.RunPlan(**settings))
    else:
        chosen = sampler(**(settings | fields))
    return slt.wbic(problem(), key, sampler=chosen, init=init, checkpoint=checkpoint,
                    progress=False)


def run_free_energy(key, checkpoint=None, **fields):
    """Tempered SMC, 32 particles, two copies (a dozen stages); `fields`: other fields of the
    `slt.Tempering` value."""
    settings = dict(num_particles=32, num_copies=2, prior_sampler=prior_draws)
    return slt.free_energy(problem(), key, slt.Tempering(**(settings | fields)),
                           checkpoint=checkpoint, progress=False)


RUNS = {"llc": run_llc, "wbic": run_wbic, "free_energy": run_free_energy}


def assert_bitwise_equal(first, second, where: str = "result") -> None:
    """Every number in two results is bitwise the same (timings, named *_time, excepted).

    Walks dataclasses, named tuples, lists, tuples, dicts, ArviZ InferenceData, xarray Datasets
    and pandas DataFrames down to arrays and scalars, whose dtype, shape and bytes must agree.
    """
    if dataclasses.is_dataclass(first) or hasattr(first, "_fields"):
        names = [f.name for f in dataclasses.fields(first)] if dataclasses.is_dataclass(first) \
            else first._fields
        for name in names:
            if not name.endswith("_time"):
                assert_bitwise_equal(getattr(first, name), getattr(second, name), f"{where}.{name}")
    elif isinstance(first, list | tuple):
        assert len(first) == len(second), where
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            assert_bitwise_equal(a, b, f"{where}[{index}]")
    elif isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for name in first:
            assert_bitwise_equal(first[name], second[name], f"{where}[{name!r}]")
    elif isinstance(first, az.InferenceData):
        assert first.groups() == second.groups(), where
        for group in first.groups():
            assert_bitwise_equal(first[group], second[group], f"{where}.{group}")
    elif isinstance(first, xr.Dataset):
        assert_bitwise_equal(
            {name: var.values for name, var in first.data_vars.items()},
            {name: var.values for name, var in second.data_vars.items()}, where,
        )
    elif isinstance(first, pd.DataFrame):
        pd.testing.assert_frame_equal(first, second, check_exact=True)
    elif first is None or isinstance(first, str):
        assert first == second, where
    else:
        first, second = np.asarray(first), np.asarray(second)
        assert (first.dtype, first.shape) == (second.dtype, second.shape), where
        assert first.tobytes() == second.tobytes(), f"{where} differs"


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    from slt.cli.signals import sigterm_as_interrupt
    from slt.samplers.checkpoint import Checkpoint

    save = Checkpoint.save

    def delayed_save(self, *args, **kwargs):
        time.sleep(SAVE_DELAY)
        save(self, *args, **kwargs)
        if kwargs["units_done"] == HOLD_AT:
            time.sleep(HOLD_SECONDS)  # the signal lands here

    Checkpoint.save = delayed_save
    # Ctrl-C raises KeyboardInterrupt, as in an interactive Python, whatever this process
    # inherited: SIGINT ignored (started in the background by a non-interactive shell) or
    # SIGINT / SIGTERM blocked (a signal mask left by the test process's own children, as
    # multiprocessing and loky set one while they start helpers). In a clean-clone `make test`
    # the child once ran all its units through a SIGINT, and once slept through its hold.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    name, path = sys.argv[1:]
    with sigterm_as_interrupt():  # as the `slt` command runs it
        RUNS[name](jax.random.key(0), checkpoint=path)
