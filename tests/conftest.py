"""Tests run in float64: exact answers are checked to 1e-10 and tighter.

Property tests draw their examples deterministically (`derandomize=True`), so a run on CI sees
the same examples as a run here; a failure found by exploring further (`--hypothesis-seed`) is
reproducible from its printed example.

`make test` runs on two pytest-xdist workers with `--dist loadscope`: each test module stays
on one worker, so the programs and module fixtures its tests share are compiled and built once
(sending a module's tests to both workers cost 2.5 of 16 CPU minutes). Tests marked `heavy`
(10 s or more each) are collected first, so their modules start early and both workers finish
together instead of one waiting on a long module that came last.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import settings

from slt import models
from slt.samplers.checkpoint import Checkpoint

jax.config.update("jax_enable_x64", True)

settings.register_profile("slt", derandomize=True, deadline=None)
settings.load_profile("slt")


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture
def saves(monkeypatch):
    """Records the `units_done` of every checkpoint written in this process;
    `saves.interrupt_at = k` raises KeyboardInterrupt (as Ctrl-C would) just before write k + 1."""
    original = Checkpoint.save
    saved = []

    def recording_save(self, *args, **kwargs):
        if self.path is not None:
            if len(saved) == recording_save.interrupt_at:
                raise KeyboardInterrupt
            saved.append(kwargs["units_done"])
        original(self, *args, **kwargs)

    recording_save.units = saved
    recording_save.interrupt_at = None
    monkeypatch.setattr(Checkpoint, "save", recording_save)
    return recording_save


@pytest.fixture(scope="module")
def regression():
    """A Gaussian linear regression (d = 3, n = 2000, noise sd 1) and its least-squares fit:
    (problem, X, y, w* as params). Its local posterior is Gaussian and E[lambda_hat] exact
    (`slt.truth.linear_regression_expected_llc`): the samplers' exact case."""
    spec = models.linear_regression(3)
    data = spec.simulate(jax.random.key(0), {"w": jnp.array([1.0, -1.0, 0.5])}, 2000)
    problem = spec.problem(data)
    X, y = np.asarray(data["x"], float), np.asarray(data["y"], float)
    w_hat = np.linalg.lstsq(X, y, rcond=None)[0]
    return problem, X, y, {"w": jnp.asarray(w_hat)}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: heavy first
