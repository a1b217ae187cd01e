"""Stochastic-gradient Langevin dynamics (SGLD) as pure `init` / `step` functions.

The target is a log density known through a minibatch estimate of its gradient. One step from
w with step size eps, stochastic gradient g = grad log pi_hat(w) and a diagonal preconditioner G:

    w' = w + (eps / 2) G g + sqrt(eps G) xi,      xi ~ N(0, I).

G = I is plain SGLD (Welling & Teh 2011). With `preconditioner="rmsprop"`, G = 1 / (delta +
sqrt(v)), v <- alpha v + (1 - alpha) g^2 (pSGLD, Li et al. 2016, without its small Gamma
correction term; the running average and G g are optax's `scale_by_rms`), reported to work
best on deep linear networks (Hitchcock & Hoogland 2025).
Measured on slt's reduced-rank regression and deep linear network cases (benchmarks/RESULTS.md,
"RMSprop preconditioning"): median error 4.4% against plain SGLD's 5.3% and better mixing on
the widest networks, but hotter chains (lambda_hat 3-12% higher) and a worst case of +30%
against +19%; where the gradient vanishes identically (w* = 0 of a normal crossing) G = 1/delta
and no step size passes the calibration.

Positions are flat vectors (`Problem.ravel`), so the Langevin noise is one draw per step, not one
per pytree leaf (DESIGN.md: halves compile time on large networks at the same speed). The
noise comes from `slt.samplers.noise.standard_normal` (the Threefry-2x32 cipher of
`jax.random`, written out so that XLA vectorises it: on CPU 4-7x faster than
`jax.random.normal` with any of JAX's generators, as fast on a GPU; RESULTS.md).
Everything is pure: it works under `jit`, `vmap` and `lax.scan`. As in BlackJAX, the algorithm
is a pair of functions, `init(position) -> SGLDState` and `step(key, state, logdensity_fn,
step_size) -> (SGLDState, SGLDInfo)`; diagnostics (MALA acceptance, configurational
temperature, divergence) read the info. Configuration that changes the compiled program (the
preconditioner) is fixed in closures; the step size and the target (the minibatch's log
density) enter as arguments, so sweeping them does not recompile.

Restricted sampling (`mask`): with a 0/1 vector m, only the coordinates where m = 1 move,

    w' = w + (eps / 2) G (m * g) + sqrt(eps G) (m * xi),

which is SGLD on the log density as a function of the selected coordinates, the others held
where they are (the weight-refined LLC; RMSprop's average of (m * g)^2 stays 0 off the mask,
so its drift there is 0 too). The recorded gradient is m * g, so the MALA acceptance
and the configurational temperature below are those of the restricted chain. The mask is an
argument like the step size: one compiled program serves every restriction of a model.

The MALA acceptance probability of a step (Lau et al. 2023; devinterp reports it too) is the
Metropolis–Hastings ratio the proposal would have had, on the same minibatch:

    log a = log pi_hat(w') - log pi_hat(w) + log q(w | w') - log q(w' | w),
    q(w' | w) = N(w'; w + (eps/2) G grad log pi_hat(w), eps G).

Values near 1 mean the discretisation error is small; SGLD never rejects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from slt.samplers.noise import standard_normal
from slt.validation import require_one_of

PRECONDITIONERS = (None, "rmsprop")

__all__ = ["SGLDState", "SGLDInfo", "SGLDKernel", "sgld", "mala_log_acceptance"]

# RMSprop constants: decay of the squared-gradient average and the damping delta, pSGLD's
# published defaults (Li et al. 2016). devinterp uses delta = 0.1; with gradients scaled by
# n beta (10^2..10^5 here) delta only matters for parameters whose gradient vanishes.
RMSPROP_DECAY = 0.99
RMSPROP_DAMPING = 1e-5

LogDensity = Callable[[jax.Array], tuple[jax.Array, Any]]
LogDensityGrad = Callable[[jax.Array], tuple[jax.Array, jax.Array]]


class SGLDState(NamedTuple):
    """position: flat parameter vector; square_avg: RMSprop's running mean of g^2 (zeros
    and unused without preconditioning)."""

    position: jax.Array
    square_avg: jax.Array


class SGLDInfo(NamedTuple):
    """What a step saw, at the position it started from.

    log_density: log pi_hat(w) on the step's minibatch; aux: what `logdensity_fn` returned
    beside it (e.g. the minibatch loss); gradient: grad log pi_hat(w); diagonal: the
    preconditioner G the step used.
    """

    log_density: jax.Array
    aux: Any
    gradient: jax.Array
    diagonal: jax.Array


class SGLDKernel(NamedTuple):
    init: Callable[[jax.Array], SGLDState]
    step: Callable[..., tuple[SGLDState, SGLDInfo]]


def sgld(preconditioner: str | None = None) -> SGLDKernel:
    """Build the SGLD algorithm.

    Args:
      preconditioner: None (plain SGLD) or "rmsprop" (pSGLD).

    Returns:
      `SGLDKernel(init, step)`: `init(position) -> SGLDState`;
      `step(key, state, logdensity_fn, step_size, mask=None) -> (new_state, SGLDInfo)`,
      where `logdensity_fn(position) -> (log pi_hat, aux)` is the minibatch estimate of the
      log density (differentiated here; `aux` is passed through to the info) and `mask`
      (optional, 0/1 or boolean, shaped like the position) selects the coordinates that move
      (module doc).

    Example:
      >>> algorithm = sgld("rmsprop")
      >>> state = algorithm.init(jnp.zeros(2))
      >>> target = lambda w: (-0.5 * jnp.sum(w**2), None)
      >>> state, info = algorithm.step(jax.random.key(0), state, target, 1e-2)
      >>> info.diagonal.shape
      (2,)
    """
    require_one_of("preconditioner", preconditioner, PRECONDITIONERS)
    rms = optax.scale_by_rms(decay=RMSPROP_DECAY, eps=RMSPROP_DAMPING, eps_in_sqrt=False)

    def init(position: jax.Array) -> SGLDState:
        return SGLDState(position, jnp.zeros_like(position))

    def step(key, state: SGLDState, logdensity_fn: LogDensity, step_size, mask=None):
        (log_density, aux), gradient = jax.value_and_grad(logdensity_fn, has_aux=True)(
            state.position
        )
        if mask is not None:
            mask = jnp.asarray(mask, bool)
            gradient = jnp.where(mask, gradient, 0.0)
        if preconditioner == "rmsprop":
            drift, rms_state = rms.update(gradient, optax.ScaleByRmsState(nu=state.square_avg))
            square_avg = rms_state.nu
            diagonal = 1.0 / (jnp.sqrt(square_avg) + RMSPROP_DAMPING)  # G, as optax scales g
        else:
            drift, square_avg, diagonal = gradient, state.square_avg, jnp.ones_like(gradient)
        noise = standard_normal(key, state.position.shape, state.position.dtype)
        if mask is not None:  # the drift is masked with the gradient; with every coordinate
            noise = jnp.where(mask, noise, 0.0)  # selected, bitwise the unmasked step
        position = (
            state.position + 0.5 * step_size * drift + jnp.sqrt(step_size * diagonal) * noise
        )
        return SGLDState(position, square_avg), SGLDInfo(log_density, aux, gradient, diagonal)

    return SGLDKernel(init, step)


def mala_log_acceptance(
    position: jax.Array,
    proposal: jax.Array,
    info: SGLDInfo,
    value_and_grad: LogDensityGrad,
    step_size,
) -> jax.Array:
    """log of the MALA acceptance probability min(1, ratio) of an SGLD step (see module doc).

    Args:
      position, proposal: w and w' (the SGLD step's result).
      info: the step's `SGLDInfo` (log pi_hat(w), its gradient and G on the step's minibatch).
      value_and_grad: `w -> (log pi_hat(w), grad)` on the same minibatch.
      step_size: eps.
    """
    proposal_log_density, proposal_gradient = value_and_grad(proposal)
    variance = step_size * info.diagonal

    def log_q(to, start, start_gradient):
        mean = start + 0.5 * variance * start_gradient
        return -0.5 * jnp.sum((to - mean) ** 2 / variance)

    log_ratio = (
        proposal_log_density
        - info.log_density
        + log_q(position, proposal, proposal_gradient)
        - log_q(proposal, position, info.gradient)
    )
    return jnp.minimum(0.0, jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio))
