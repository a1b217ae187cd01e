"""Exact samplers of the local posterior: MALA and HMC on the full data, with warmup adaptation.

`run_chains` runs these programs for `slt.samplers.MALA` and `slt.samplers.HMC` exactly as it
runs SGLD's (vmapped chains, scanned chunks, the same record, checkpoints, observables): only
the step differs. Every chain targets

    log pi(w) = -n beta L_n(w) - (gamma / 2) ||w - w_center||^2  [+ log prior(w)]

on the **full** data, and each step is BlackJAX's Metropolis-adjusted kernel (`blackjax.mala`,
`blackjax.hmc`), so the chain's law is exactly pi: what SGLD's answer can be checked against.

Warmup (the first `num_warmup` steps, not kept). With step_size="auto" a reasonable first step
is found at the centre (`blackjax.adaptation.step_size.find_reasonable_step_size`: doubled or
halved until the acceptance crosses the target) and then adapted by Nesterov dual averaging
(`dual_averaging_adaptation`) to the sampler's target acceptance; the last warmup step fixes
it at the dual-averaging average. HMC with mass_matrix="diagonal" also collects the draws'
variances over the middle half of the warmup (Welford, `blackjax.adaptation.mass_matrix`,
regularised as Stan does), sets M^-1 to them at the end of that window and restarts the
step-size adaptation for the new metric. Chains adapt independently.

Restricted chains (a mask, the weight-refined LLC). The coordinates outside the mask must stay
at the centre, which a Metropolis-adjusted kernel of the full vector cannot enforce. Instead
the chain samples the product of the restricted local posterior (the model evaluated at
P(w) = where(mask, w, w_center)) and a standard normal centred at w_center in the other
coordinates: the selected coordinates' marginal is exactly the restricted local posterior, and
everything recorded (losses, distances, observables, the final position) is evaluated at
P(w). The diagnostics read only the selected coordinates.

Diagnostics. The acceptance probability of every step is recorded (as `log_acceptance`); the
configurational temperature's two terms, |grad U|^2 (exact: full data) and v' Hess(U) v (a
Rademacher probe), every `MEASURE_EVERY` steps, U = -log pi restricted to the mask: an exact
sampler has T = 1 in equilibrium, so T says whether the warmup was long enough.
"""

from __future__ import annotations

from typing import NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import (
    dual_averaging_adaptation,
    find_reasonable_step_size,
)

from slt.samplers.config import HMC, MALA

__all__ = ["MEASURE_EVERY", "ExactState", "exact_initial_state", "exact_step",
           "integration_steps_range", "restricted_logdensity", "temperature_terms"]

# The temperature's terms cost a gradient and a Hessian-vector product: measured every this
# many steps (as SGLD's default mala_every).
MEASURE_EVERY = 10


class ExactState(NamedTuple):
    """One chain of an exact sampler (a leading chain axis in the runner's carry).

    kernel: BlackJAX's state (position, log density, its gradient) of the chain's target.
    step_size: the step size in use; during the warmup the adaptation's current value.
    inverse_mass: the diagonal of M^-1 (ones for MALA and for mass_matrix=None).
    dual: the dual-averaging state of the step-size adaptation.
    welford: the mass-matrix adaptation's state (the window's running variances).
    """

    kernel: NamedTuple
    step_size: jax.Array
    inverse_mass: jax.Array
    dual: NamedTuple
    welford: NamedTuple


def integration_steps_range(num_integration_steps: int) -> tuple[int, int]:
    """The leapfrog steps of one HMC transition are drawn uniformly from [low, high): from
    ceil(L/2) to floor(3L/2) (mean L). A fixed trajectory length resonates: on a near-Gaussian
    target whitened by the mass matrix every direction turns by the same angle per leapfrog
    step, and where L times that angle is a multiple of 2 pi the proposal returns to its start
    with acceptance 1 (measured: a 3-parameter regression's loss kernel 10-30% low, T_v 0.9,
    with L = 16 fixed; benchmarks/RESULTS.md). Drawing L spreads the angle over a range wider
    than 2 pi (Neal 2011, section 5.4.2.2; BlackJAX's `dynamic_hmc`)."""
    low = (num_integration_steps + 1) // 2
    return low, max(low + 1, (3 * num_integration_steps) // 2 + 1)


def _kernel(sampler: MALA | HMC):
    """kernel(key, state, logdensity_fn, step_size, inverse_mass) -> (state, info)."""
    if isinstance(sampler, MALA):
        mala = blackjax.mala.build_kernel()
        return lambda key, state, logdensity, step_size, _: mala(key, state, logdensity,
                                                                  step_size)
    low, high = integration_steps_range(sampler.num_integration_steps)
    hmc = blackjax.dynamic_hmc.build_kernel(
        next_random_arg_fn=lambda arg: jax.random.split(arg)[1],
        integration_steps_fn=lambda arg: jax.random.randint(arg, (), low, high))
    return lambda key, state, logdensity, step_size, inverse_mass: hmc(
        key, state, logdensity, step_size, inverse_mass)


def _init(sampler: MALA | HMC, key, position, logdensity):
    """The BlackJAX state at `position`; HMC's carries the key of its draws of L as raw key
    data of the default implementation (whatever `key`'s), a plain array in the carry."""
    if isinstance(sampler, MALA):
        return blackjax.mala.init(position, logdensity)
    seed = jax.random.randint(jax.random.fold_in(key, 1), (), 0, jnp.iinfo(jnp.int32).max)
    return blackjax.dynamic_hmc.init(position, logdensity,
                                     jax.random.key_data(jax.random.key(seed)))


def exact_initial_state(sampler: MALA | HMC, key, position, logdensity, step_size
                        ) -> ExactState:
    """A chain at `position` (flat) of the target `logdensity`: the first step size
    `step_size`, or with step_size="auto" in the sampler a reasonable one found from it."""
    kernel = _kernel(sampler)
    state = _init(sampler, key, position, logdensity)
    inverse_mass = jnp.ones_like(position)
    if sampler.step_size == "auto":
        step_size = find_reasonable_step_size(
            key, lambda eps: lambda k, s: kernel(k, s, logdensity, eps, inverse_mass),
            state, step_size, sampler.target_acceptance)
    dual_init, _, _ = dual_averaging_adaptation(sampler.target_acceptance)
    mass_init, _, _ = mass_matrix_adaptation(is_diagonal_matrix=True)
    return ExactState(state, step_size, inverse_mass, dual_init(step_size),
                      mass_init(position.shape[0]))


def exact_step(sampler: MALA | HMC, key, state: ExactState, logdensity, step, num_warmup
               ) -> tuple[ExactState, jax.Array]:
    """One step of a chain at step number `step` of a run with `num_warmup` warmup steps
    (both integer scalars): the kernel's transition, then the warmup's adaptation (module
    doc). Returns the new state and the step's acceptance probability."""
    kernel = _kernel(sampler)
    new_kernel, info = kernel(key, state.kernel, logdensity, state.step_size,
                              state.inverse_mass)
    acceptance = jnp.nan_to_num(info.acceptance_rate)
    new = state._replace(kernel=new_kernel)
    if sampler.step_size == "auto" or (isinstance(sampler, HMC) and sampler.mass_matrix):
        adapted = _adapt(sampler, new, acceptance, step, num_warmup)
        new = jax.tree.map(lambda a, b: jnp.where(step < num_warmup, a, b), adapted, new)
    return new, info.acceptance_rate


def _adapt(sampler: MALA | HMC, state: ExactState, acceptance, step, num_warmup
           ) -> ExactState:
    """The warmup's update after step `step`: dual averaging of the step size (with "auto"),
    the diagonal mass matrix's window [num_warmup / 4, 3 num_warmup / 4) (HMC), and at the
    window's end the new M^-1 and a fresh dual averaging; the last warmup step fixes the
    step size at its dual-averaging average."""
    dual_init, dual_update, dual_final = dual_averaging_adaptation(sampler.target_acceptance)
    _, mass_update, mass_final = mass_matrix_adaptation(is_diagonal_matrix=True)
    auto = sampler.step_size == "auto"
    dual, step_size, inverse_mass, welford = (state.dual, state.step_size, state.inverse_mass,
                                              state.welford)
    if auto:
        dual = dual_update(dual, acceptance)
        step_size = jnp.where(step == num_warmup - 1, dual_final(dual),
                              jnp.exp(dual.log_step_size)).astype(state.step_size.dtype)
    if isinstance(sampler, HMC) and sampler.mass_matrix:
        window_start, window_end = num_warmup // 4, (3 * num_warmup) // 4
        inside = (step >= window_start) & (step < window_end)
        collected = mass_update(welford, state.kernel.position)
        welford = jax.tree.map(lambda a, b: jnp.where(inside, a, b), collected, welford)
        closing = (step == window_end - 1) & (window_end > window_start)
        finished = mass_final(welford)
        inverse_mass = jnp.where(closing, finished.inverse_mass_matrix.astype(
            inverse_mass.dtype), inverse_mass)
        welford = jax.tree.map(lambda a, b: jnp.where(closing, a, b), finished, welford)
        if auto:
            restarted = dual_init(step_size)
            dual = jax.tree.map(lambda a, b: jnp.where(closing, a, b), restarted, dual)
    return state._replace(step_size=step_size, inverse_mass=inverse_mass, dual=dual,
                          welford=welford)


def restricted_logdensity(log_target, mask, center):
    """The log density of a restricted exact chain (module doc): the target at
    P(w) = where(mask, w, center), times a standard normal around `center` elsewhere."""
    def logdensity(flat):
        value, _ = log_target(jnp.where(mask, flat, center))
        return value - 0.5 * jnp.sum(jnp.where(mask, 0.0, (flat - center) ** 2))

    return logdensity


def temperature_terms(logdensity, position, gradient, mask, key):
    """|grad U|^2 and v' Hess(U) v at `position` (U = -logdensity, v a Rademacher probe),
    both over the coordinates `mask` selects; `gradient` is grad log pi there."""
    probe = jnp.where(mask, jax.random.rademacher(key, position.shape, position.dtype), 0.0)
    _, curvature = jax.jvp(jax.grad(logdensity), (position,), (probe,))
    selected = jnp.where(mask, gradient, 0.0)
    return jnp.dot(selected, selected), -jnp.dot(probe, curvature)

