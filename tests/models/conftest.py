"""Shared check: a model's `Problem.loglik` equals a hand-written log-likelihood."""

import jax
import numpy as np
import pytest


def check_against_handwritten(spec, true_values, handwritten, *, n=40, num_points=3):
    """Simulate n examples at `true_values`, then compare `Problem.loglik` with
    `handwritten(values, data) -> (n,)` (numpy/scipy, constrained values) at `num_points` random
    parameter points, to 1e-10. Also checks the parameter count and the transform round trip."""
    data = spec.simulate(jax.random.key(1), true_values, n)
    problem = spec.problem(data)
    assert problem.dim == spec.dim
    numpy_data = {k: np.asarray(v) for k, v in data.items()}
    for key in jax.random.split(jax.random.key(2), num_points):
        params = problem.init(key)
        values = {k: np.asarray(v) for k, v in problem.constrain(params).items()}
        expected = handwritten(values, numpy_data)
        actual = np.asarray(problem.loglik(params, problem.data))
        assert actual.shape == (n,)
        np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-10)
        round_trip = problem.ravel(problem.unconstrain(problem.constrain(params)))
        np.testing.assert_allclose(round_trip, problem.ravel(params), rtol=1e-9, atol=1e-9)
    return problem


@pytest.fixture
def handwritten_check():
    return check_against_handwritten
