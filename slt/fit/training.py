"""Training with Adam while keeping log-spaced checkpoints: the input of `slt.llc_trajectory`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slt.problem import Params, Problem, require_problem
from slt.validation import InputError, require_int, require_key, require_params, require_positive

__all__ = ["train_checkpoints"]


def train_checkpoints(
    problem: Problem,
    params: Params,
    key: jax.Array,
    *,
    num_steps: int,
    num_checkpoints: int = 20,
    batch_size: int | None = None,
    learning_rate: float = 1e-3,
) -> dict[int, Params]:
    """Adam on L_n from `params`, keeping the parameters at log-spaced steps.

    Step t updates w with optax.adam(learning_rate) on the gradient of the minibatch loss
    L_B(w) = -(1/b) sum_{i in B} log p(y_i | x_i, w) (B: `batch_size` distinct examples drawn
    afresh each step, uniformly without replacement; all n with batch_size None). The
    parameters after step t are kept at t = round(geomspace(1, num_steps, num_checkpoints))
    (repeated steps once: fewer than num_checkpoints when num_steps is small). One program,
    compiled once: the steps between two checkpoints run in a loop whose bounds are runtime
    values; the data are its argument.

    Args:
      problem: the model and data (`Problem.from_loss`, `Problem.from_predict`, ...).
      params: the starting point (a point of `problem`).
      key: PRNG key of the minibatches (unused with batch_size None).
      num_steps: Adam steps (>= 1).
      num_checkpoints: checkpoints kept (>= 1; the last is always step num_steps).
      batch_size: examples per step, 1..n (default n: full-batch steps).
      learning_rate: Adam's learning rate (> 0; default 1e-3, optax's usual).

    Returns:
      {step: params after that step} in increasing order of step, ready for
      `slt.llc_trajectory(problem, checkpoints, key)`.

    Raises:
      InputError (a ValueError): a bad problem, params, key, or a size out of range.

    Example:
      >>> checkpoints = slt.fit.train_checkpoints(problem, params, key, num_steps=100,
      ...                                         num_checkpoints=3, learning_rate=0.1)
      >>> list(checkpoints)
      [1, 10, 100]
    """
    problem = require_problem(problem)
    params = require_params(problem, params)
    key = require_key(key)
    num_steps = require_int("num_steps", num_steps, minimum=1)
    num_checkpoints = require_int("num_checkpoints", num_checkpoints, minimum=1)
    learning_rate = require_positive("learning_rate", learning_rate)
    if batch_size is not None:
        batch_size = require_int("batch_size", batch_size, minimum=1)
        if batch_size > problem.n:
            raise InputError(f"batch_size must be at most n = {problem.n}, got {batch_size}")
    # from the end: with num_checkpoints = 1 the one checkpoint is the last step
    steps = np.unique(np.geomspace(num_steps, 1, num_checkpoints).round().astype(int))
    optimizer = optax.adam(learning_rate)
    advance = jax.jit(_steps(problem, optimizer, batch_size))
    state, checkpoints, done = optimizer.init(params), {}, 0
    for step in steps:
        params, state = advance(params, state, key, problem.data, done, int(step))
        checkpoints[int(step)] = params
        done = int(step)
    return checkpoints


def _steps(problem: Problem, optimizer: optax.GradientTransformation, batch_size: int | None):
    """`advance(params, state, key, data, start, stop)`: the Adam steps start, ..., stop - 1
    on `data` (the minibatch of step t drawn with fold_in(key, t))."""

    def loss(params, key, data, step):
        if batch_size is None:
            return -jnp.mean(problem.loglik(params, data))
        indices = jax.random.choice(jax.random.fold_in(key, step), problem.n, (batch_size,),
                                    replace=False)
        return -jnp.mean(problem.loglik(params, problem.take(indices, data)))

    def advance(params, state, key, data, start, stop):
        def body(step, carry):
            params, state = carry
            gradient = jax.grad(loss)(params, key, data, step)
            updates, state = optimizer.update(gradient, state, params)
            return optax.apply_updates(params, updates), state

        return jax.lax.fori_loop(start, stop, body, (params, state))

    return advance
