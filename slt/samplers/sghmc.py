"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC) as pure `init` / `step` functions.

Underdamped Langevin dynamics with unit mass and friction c,

    dw = p dt,   dp = grad log pi(w) dt - c p dt + sqrt(2c) dW,

whose stationary law is pi(w) N(p; 0, I), integrated by the BAOAB splitting (Leimkuhler &
Matthews 2013) with time step h = sqrt(eps) (eps is `step_size`, in the units of SGLD's: the
stable steps of both scale as 1 / curvature) and a = c h the friction per step:

    B  p <- p + (h / 2) g(w)                  (g the gradient cached from the last step)
    A  w <- w + (h / 2) p
    O  p <- e^-a p + sqrt(1 - e^-2a) xi,      xi ~ N(0, I)
    A  w <- w + (h / 2) p
    B  p <- p + (h / 2) g(w),                 g(w) on this step's minibatch (kept for the next)

One gradient a step. Why BAOAB: on a Gaussian target its positions are distributed exactly as
pi, for every stable step (eps K < 4 along a curvature K) and every friction; the simpler
momentum form of Chen et al. (2014, eq. 15) inflates the variance along K by
1 / (1 - eps K / (2 (2 - a))), 7% at eps K = 0.26, and lambda_hat with it (measured on a
Gaussian linear regression: +6% on average over 16 keys at its calibrated step). On other
targets the positions' error is O(eps), and the configurational temperature measures it.
What the momentum buys: along a direction of curvature K, SGLD needs about 1 / (eps K) steps
to cross the posterior's width, the underdamped chain about 1 / sqrt(eps K) when
a < 2 sqrt(eps K) (it moves ballistically), and a / (eps K) when overdamped; the local
posterior's soft directions (gamma against n beta times the loss's curvatures) are where
SGLD's chains fall short (benchmarks/RESULTS.md, "Momentum and control variates").

Positions, momenta and gradients are flat vectors (`Problem.ravel`). Restricted sampling
(`mask`): only the coordinates where the mask is 1 move; the gradient and the noise are 0
elsewhere, so the momentum stays 0 there. The chain starts with momentum 0 and no cached
gradient (its first half-kick is empty: a transient of the warmup). Everything is pure (works
under `jit`, `vmap`, `lax.scan`); the step size and the target are arguments, the friction is
fixed in the closure.

Example:
  >>> algorithm = sghmc(friction=0.1)
  >>> state = algorithm.init(jnp.zeros(2))
  >>> target = lambda w: (-0.5 * jnp.sum(w**2), None)
  >>> state, info = algorithm.step(jax.random.key(0), state, target, 1e-2)
  >>> state.momentum.shape
  (2,)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from slt.samplers.noise import standard_normal
from slt.samplers.sgld import LogDensity, SGLDInfo, SGLDKernel

__all__ = ["SGHMCState", "sghmc"]


class SGHMCState(NamedTuple):
    """position: the flat parameter vector w; momentum: p (unit mass); gradient: the minibatch
    gradient of log pi at `position` from the last step (the next step's first half-kick)."""

    position: jax.Array
    momentum: jax.Array
    gradient: jax.Array


def sghmc(friction: float) -> SGLDKernel:
    """Build the SGHMC (BAOAB) algorithm with friction a per step (0 < a <= 1).

    Returns:
      `SGLDKernel(init, step)`: `init(position) -> SGHMCState` (momentum and gradient 0);
      `step(key, state, logdensity_fn, step_size, mask=None) -> (new_state, SGLDInfo)`, with
      `logdensity_fn(position) -> (log pi_hat, aux)` the minibatch estimate of the log density
      and step_size eps = h^2 (module doc). The info is SGLD's (its `diagonal` is 1: no
      preconditioner), at the position the step ends at (where this step's gradient is
      evaluated; SGLD's is at the one it starts from).
    """
    decay = jnp.exp(-friction)
    noise_scale = jnp.sqrt(-jnp.expm1(-2.0 * friction))

    def init(position: jax.Array) -> SGHMCState:
        return SGHMCState(position, jnp.zeros_like(position), jnp.zeros_like(position))

    def step(key, state: SGHMCState, logdensity_fn: LogDensity, step_size, mask=None):
        half = 0.5 * jnp.sqrt(step_size)
        noise = standard_normal(key, state.position.shape, state.position.dtype)
        if mask is not None:
            mask = jnp.asarray(mask, bool)
            noise = jnp.where(mask, noise, 0.0)
        momentum = state.momentum + half * state.gradient
        position = state.position + half * momentum
        momentum = decay * momentum + noise_scale * noise
        position = position + half * momentum
        (log_density, aux), gradient = jax.value_and_grad(logdensity_fn, has_aux=True)(position)
        if mask is not None:
            gradient = jnp.where(mask, gradient, 0.0)
        momentum = momentum + half * gradient
        return (SGHMCState(position, momentum, gradient),
                SGLDInfo(log_density, aux, gradient, jnp.ones_like(gradient)))

    return SGLDKernel(init, step)
