"""slt.train_checkpoints: Adam keeping log-spaced checkpoints.

Checked on Bayesian linear regression, whose maximum-likelihood point is the least-squares
solution: full-batch Adam must reach it, and minibatch Adam must come near it.
"""

import jax
import numpy as np
import pytest

import slt
from slt.validation import InputError


@pytest.fixture(scope="module")
def regression():
    spec = slt.models.linear_regression(3)
    data = spec.simulate(jax.random.key(1), {"w": np.array([1.0, -0.5, 2.0])}, 200)
    least_squares = np.linalg.lstsq(np.asarray(data["x"]), np.asarray(data["y"]), rcond=None)[0]
    return spec.problem(data), least_squares


def test_full_batch_reaches_least_squares(regression):
    problem, least_squares = regression
    start = {"w": np.zeros(3)}
    checkpoints = slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=2000,
                                        num_checkpoints=5, learning_rate=0.05)
    assert list(checkpoints) == [1, 7, 45, 299, 2000]  # round(geomspace(1, 2000, 5))
    losses = [float(problem.loss(w)) for w in checkpoints.values()]
    assert losses == sorted(losses, reverse=True)
    np.testing.assert_allclose(checkpoints[2000]["w"], least_squares, atol=1e-6)
    # the first checkpoint is one Adam step: every coordinate moves by the learning rate
    np.testing.assert_allclose(np.abs(checkpoints[1]["w"]), 0.05, rtol=1e-6)


def test_minibatches(regression):
    problem, least_squares = regression
    start = {"w": np.zeros(3)}
    first = slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=300,
                                  num_checkpoints=1, batch_size=20, learning_rate=0.02)
    again = slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=300,
                                  num_checkpoints=1, batch_size=20, learning_rate=0.02)
    other = slt.train_checkpoints(problem, start, jax.random.key(1), num_steps=300,
                                  num_checkpoints=1, batch_size=20, learning_rate=0.02)
    assert list(first) == [300]  # one checkpoint: the last step
    np.testing.assert_array_equal(first[300]["w"], again[300]["w"])  # same key, same path
    assert not np.allclose(first[300]["w"], other[300]["w"])
    # minibatch noise keeps Adam within a few times the posterior sd (~0.07) of the optimum
    np.testing.assert_allclose(first[300]["w"], least_squares, atol=0.3)


def test_bad_input(regression):
    problem, _ = regression
    start = {"w": np.zeros(3)}
    with pytest.raises(InputError, match="batch_size"):
        slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=5, batch_size=201)
    with pytest.raises(InputError, match="num_steps"):
        slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=0)
    with pytest.raises(InputError, match="learning_rate"):
        slt.train_checkpoints(problem, start, jax.random.key(0), num_steps=5,
                              learning_rate=-1.0)
    with pytest.raises(InputError):
        slt.train_checkpoints(problem, {"w": np.zeros(2)}, jax.random.key(0), num_steps=5)
