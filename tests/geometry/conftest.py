"""Small models with textbook Fisher matrices, built as `ModelSpec`s for the geometry tests.

Builders are cached: the same arguments give the same spec, so compiled Fisher functions are
reused across tests.
"""

import functools

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import pytest

from slt.models.base import ModelSpec, gaussian_regression_data


@functools.cache
def _normal_model(scale_site: str = "sigma") -> ModelSpec:
    """y ~ N(mu, sigma^2), parametrised by (mu, sigma) or, with scale_site="variance", (mu, v)."""

    def scale_of(value):
        return value if scale_site == "sigma" else jnp.sqrt(value)

    def model(y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        value = numpyro.sample(scale_site, dist.LogNormal(0.0, 1.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, scale_of(value)), obs=y)

    def simulate(key, values, n):
        return {"y": values["mu"] + scale_of(values[scale_site]) * jax.random.normal(key, (n,))}

    return ModelSpec(f"normal({scale_site})", model, 2, "test", ("mu", scale_site), simulate)


@functools.cache
def _affine_regression(num_inputs: int, num_outputs: int, noise_scale: float) -> ModelSpec:
    """y = A x + b + eps, eps ~ N(0, noise_scale^2 I): sites A (N, M), b (N,)."""

    def mean_fn(values, x):
        return x @ values["A"].T + values["b"]

    def model(x, y=None):
        shapes = {"A": (num_outputs, num_inputs), "b": (num_outputs,)}
        values = {
            name: numpyro.sample(name, dist.Normal(0, 1).expand(shape).to_event(len(shape)))
            for name, shape in shapes.items()
        }
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mean_fn(values, x), noise_scale).to_event(1), obs=y)

    def simulate(key, values, n):
        return gaussian_regression_data(
            key, n, (num_inputs,), lambda x: mean_fn(values, x), noise_scale, 1.0
        )

    return ModelSpec(
        "affine_regression", model, num_outputs * (num_inputs + 1), "test", ("A", "b"), simulate,
        mean_fn=mean_fn, noise_scale=noise_scale, input_scale=1.0,
    )


@pytest.fixture(scope="session")
def normal_model():
    """The builder `normal_model(scale_site="sigma" | "variance")`."""
    return _normal_model


@pytest.fixture(scope="session")
def affine_regression():
    """The builder `affine_regression(num_inputs, num_outputs, noise_scale)`."""
    return _affine_regression


class _CompileCounter:
    """Counts XLA backend compilations while active (`with count_compiles() as counter:`);
    `count_compiles("summarize")` counts only programs whose name contains that text (an
    eager conversion of a new shape compiles a small program of its own)."""

    def __init__(self, only: str | None = None):
        self.count = 0
        self.only = only

    def _listener(self, name, seconds, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration" and (
            self.only is None or self.only in kwargs.get("fun_name", "")
        ):
            self.count += 1

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)


@pytest.fixture
def count_compiles():
    return _CompileCounter
