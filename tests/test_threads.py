"""`slt.threads.side_by_side`: the calls of one unit run in threads at once, their
results in order, and the numbers the same as calls one after another."""

import threading

import jax
import numpy as np
import pytest
from estimators.evidence_cases import conjugate_regression

from slt import threads
from slt.samplers import nuts
from slt.samplers.nuts import NUTS, sample_nuts


@pytest.mark.skipif(threads._usable_cores() < 2, reason="one core: the calls run in turn")
def test_calls_run_at_once_and_come_back_in_order():
    together = threading.Barrier(2, timeout=30)  # breaks unless both calls wait at once

    def call(value):
        together.wait()
        return value, threading.get_ident()

    (first, first_thread), (second, second_thread) = threads.side_by_side(
        [lambda: call("a"), lambda: call("b")])
    assert (first, second) == ("a", "b") and first_thread != second_thread


def test_one_call_runs_in_the_callers_thread_and_errors_are_raised():
    assert threads.side_by_side([threading.get_ident]) == [threading.get_ident()]
    assert threads.side_by_side([]) == []

    def fails():
        raise ZeroDivisionError("in a call")

    with pytest.raises(ZeroDivisionError, match="in a call"):
        threads.side_by_side([lambda: 1, fails])


def test_nuts_groups_side_by_side_are_bitwise_the_groups_in_turn(monkeypatch):
    """Two temperatures' chains (one chain a group on a CPU: four program calls a chunk) run
    side by side give the draws of the same calls made one after another."""
    problem = conjugate_regression().problem
    sampler = NUTS(num_chains=2, num_warmup=50, num_samples=50)
    together = sample_nuts(problem, jax.random.key(8), [0.3, 1.0], sampler, progress=False)
    monkeypatch.setattr(nuts, "side_by_side", lambda calls: [call() for call in calls])
    in_turn = sample_nuts(problem, jax.random.key(8), [0.3, 1.0], sampler, progress=False)
    np.testing.assert_array_equal(together.positions, in_turn.positions)
    np.testing.assert_array_equal(together.nll, in_turn.nll)
    np.testing.assert_array_equal(together.num_steps, in_turn.num_steps)
