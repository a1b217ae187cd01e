"""Docstring examples run as doctests: `make test` collects slt/ with `--doctest-modules`.

Besides the names of its own module (doctest's default), an example may use these without
defining them; everything else it defines itself:

- `jax`, `jnp` (jax.numpy), `np` (numpy), `slt`: the modules;
- `key`: `jax.random.key(0)`, fresh for every example;
- `problem`: Bayesian linear regression with two features, `slt.models.linear_regression(2)`
  (w ~ N(0, I), noise sd 1), on n = 100 examples simulated at w = (1, -0.5) with
  `jax.random.key(1)`; its exact evidence is `slt.truth.linear_regression_log_evidence`.
  n = 100 keeps `slt.rlct`'s default temperatures (up to 4 / log n) at most 1;
- `params`: those true parameters, `{"w": jnp.array([1.0, -0.5])}` (unconstrained and
  constrained coincide for this model).

`problem` is built when the first example runs and then shared by every example of the
session, so what is compiled for it is compiled once. Examples run in float64, as the tests
do (tests/conftest.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _pytest.doctest import DoctestItem

jax.config.update("jax_enable_x64", True)  # before slt is imported, as in tests/conftest.py


@functools.cache
def _shared_names() -> dict:
    import slt

    spec = slt.models.linear_regression(2)
    params = {"w": jnp.array([1.0, -0.5])}
    problem = spec.problem(spec.simulate(jax.random.key(1), params, 100))
    return {"jax": jax, "jnp": jnp, "np": np, "slt": slt, "problem": problem, "params": params}


@pytest.fixture(autouse=True)
def _doctest_names(request):
    """Fill `doctest_namespace` for docstring examples only (tests build their own objects)."""
    if isinstance(request.node, DoctestItem):
        namespace = request.getfixturevalue("doctest_namespace")
        namespace.update(_shared_names(), key=jax.random.key(0))
