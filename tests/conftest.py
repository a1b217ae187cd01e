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
import pytest
from hypothesis import settings

jax.config.update("jax_enable_x64", True)

settings.register_profile("slt", derandomize=True, deadline=None)
settings.load_profile("slt")


@pytest.fixture
def key():
    return jax.random.key(0)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: heavy first
