"""Digests that mean the same in another process, and differ where the computation does."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from slt import Problem, models
from slt.fingerprint import digest, environment

SCALE = 2.0


def _model(y=None):
    mean = numpyro.sample("mean", dist.Normal(0.0, SCALE))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mean, 1.0), obs=y)


def _other_model(y=None):
    mean = numpyro.sample("mean", dist.Normal(0.0, SCALE + 1.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mean, 1.0), obs=y)


def _mixture_problem(scale=10.0, n=50):
    spec = models.gaussian_mixture(2, mean_prior_scale=scale)
    data = {"y": np.linspace(-2.0, 2.0, n)}
    return spec.problem(data)


def test_a_problems_fingerprint_is_the_same_in_another_process():
    """The library's mixture and a model of the user's (its code, the globals it reads):
    one digest in this process and in a fresh one."""
    here = (_mixture_problem().fingerprint,
            Problem(_model, {"y": np.linspace(-1.0, 1.0, 20)}).fingerprint)
    script = textwrap.dedent(f"""
        import importlib, sys, jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        sys.path[:0] = {sys.path[:3]!r}
        here = importlib.import_module({__name__!r})  # as pytest named this module
        from slt import Problem
        print(here._mixture_problem().fingerprint)
        print(Problem(here._model, {{"y": np.linspace(-1.0, 1.0, 20)}}).fingerprint)
    """)
    there = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True).stdout.split()
    assert None not in here
    assert list(here) == there


def test_a_fingerprint_changes_with_the_model_the_settings_and_the_data():
    fingerprints = {
        _mixture_problem().fingerprint,
        _mixture_problem(scale=5.0).fingerprint,  # a value in the model's closure
        _mixture_problem(n=51).fingerprint,  # the data
        models.gaussian_mixture(3).problem({"y": np.linspace(-2.0, 2.0, 50)}).fingerprint,
        Problem(_model, {"y": np.linspace(-1.0, 1.0, 20)}).fingerprint,
        Problem(_other_model, {"y": np.linspace(-1.0, 1.0, 20)}).fingerprint,  # the code
    }
    assert len(fingerprints) == 6 and None not in fingerprints


def test_a_global_the_code_reads_is_part_of_its_digest(monkeypatch):
    before = digest(_model)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    assert digest(_model) != before


def test_values_without_a_readable_meaning_have_no_digest():
    class Users:  # a class of the user's: its methods could change between processes
        pass

    assert digest(Users()) is None
    assert digest((1, Users())) is None
    assert digest(lambda: Users) is None  # a closure over it
    problem = Problem.from_loss(lambda w, batch: (batch["y"] - w) ** 2, jnp.zeros(()),
                                {"y": jnp.ones(4)})
    assert problem.fingerprint is None  # a loss's closures are not read


def test_arrays_are_digested_by_dtype_shape_and_bytes():
    values = np.arange(6.0)
    assert digest(values) == digest(jnp.asarray(values)) == digest(np.arange(6.0))
    assert len({digest(values), digest(values.astype(np.float32)), digest(values.reshape(2, 3)),
                digest(values + 1e-12)}) == 4
    assert digest(jax.random.key(0)) != digest(jax.random.key(1))


def test_the_environment_follows_jaxs_configuration():
    with jax.enable_x64(False):
        narrow = environment()
    with jax.enable_x64(True):
        wide = environment()
    assert narrow != wide
