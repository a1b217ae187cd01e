"""Tests run in float64: exact answers are checked to 1e-10 and tighter.

Property tests draw their examples deterministically (`derandomize=True`), so a run on CI sees
the same examples as a run here; a failure found by exploring further (`--hypothesis-seed`) is
reproducible from its printed example.
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
