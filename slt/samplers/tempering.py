"""Adaptive tempered SMC from the prior (beta = 0) to the posterior (beta = 1), with log Z(beta).

The tempered posteriors pi_beta(w) ∝ exp(beta l(w)) prior(w), l(w) = sum_i log p(y_i | x_i, w),
are bridged by a ladder 0 = beta_0 < beta_1 < ... < beta_K = 1 chosen on the fly: from beta_k the
next inverse temperature is the largest beta_{k+1} <= 1 at which the importance weights
exp((beta_{k+1} - beta_k) l(w_j)) of the N particles keep an effective sample size of at least
`target_ess` * N (found by bisection). Each stage

1. multiplies the evidence estimate by the mean weight, Z(beta_{k+1}) / Z(beta_k) ≈
   (1/N) sum_j exp((beta_{k+1} - beta_k) l(w_j));
2. resamples the particles in proportion to their weights (systematic resampling);
3. moves every particle with HMC transitions targeting pi_{beta_{k+1}} (`num_leapfrog`
   leapfrog steps, mass matrix the inverse of the particle covariance, step size jittered by
   ±20% per particle and adapted between stages towards an acceptance rate of
   `target_acceptance`), as many as the stage needs (below).

**Moves.** The number of HMC sweeps per stage adapts: at least `num_mcmc_steps`, then more
until the correlation, across particles, between each particle's log-likelihood before and
after the moves falls to `correlation_threshold` (at most `max_mcmc_steps`; the criterion of
PyMC's SMC, applied to l(w), the quantity the evidence and E_beta[n L_n] are made of). Why:
the estimate is only as good as the particles' equilibration at every stage, and the stages
where the posterior changes character (a mixture's components splitting the data) need many
more moves than the rest. Measured on the Old Faithful mixture K = 2 (n = 272, reference
F = 296.61): with 2 fixed moves of 5 leapfrog steps F came out 297.46–297.87 (1000 particles,
4 copies), 0.9–1.3 nats high, the loss arising at nbeta = 5–27; with 10 fixed moves 296.68 ±
0.12 at 5× the cost; with the adaptive rule (500 particles, 10 leapfrog steps, threshold
0.2, at most 20) 296.75 ± 0.06 and 296.73 ± 0.09, about 10 moves per stage on average.
On unimodal posteriors l(w) decorrelates in 2–3 moves, so they pay little.

**Independence moves** (`kernel="hmc_imh"`, the default up to d = 16). HMC follows
gradients and does not cross between separated modes (a mixture's label-switched copies, or its
non-equivalent configurations: one component covering both clusters against one each). With
"hmc_imh" each sweep first gives every particle three independent Metropolis–Hastings
proposals from a Gaussian mixture fitted by EM to the particles
(`slt.samplers.mixture_proposal`), which can carry it to any mode the cloud has found in one
step, and then one HMC transition; a stage takes at least 4 sweeps. The mixture a particle
uses is fitted to the *other* half of the particles at the start of the stage: fitted to all
of them, including the particle itself, the move is not invariant for the target (measured,
on a Gaussian likelihood with exact evidence: log Z 0.16 nats too high; cross-fitted, 0.03).
Measured (4 copies x 500 particles; benchmarks/RESULTS.md, "Independence moves"):

- Old Faithful K = 2 (d = 5), F - reference over keys 0-4: HMC alone +0.11 on average (at
  most +0.16) in 10.5 sweeps a stage; with independence moves +0.000 (at most 0.096) in 4.2
  sweeps, a third of the time.
- Old Faithful K = 3 (d = 8), keys 0-4: +0.099 on average (at most 0.173) in 10 sweeps a
  stage; HMC alone +0.12 (at most +0.21) in 12.4: most of this bias is not from modes that
  HMC cannot reach. `slt.free_energy` therefore estimates the evidence of models with
  exchangeable (label-switching) sites by importance sampling from the final particles
  (`slt.samplers.importance`), which needs the particles to find the modes but not to weigh
  them right: within 0.005 nats of the reference on the same five keys.
- Conjugate regression (d = 3, float64, exact log Z), six keys: spread of log Z over keys
  0.044 with at least 2 sweeps (1.8x HMC's 0.025; one key 6 of its own 4-copy standard
  errors off), 0.017 with at least 4, the default.

The particles start as exact draws from the prior (beta = 0 needs no MCMC). Because the ladder is
set by the ESS, not by a fixed schedule, a diffuse prior costs only more stages: the first
increment may be 1e-14. DESIGN.md: a target ESS of 0.9–0.95 is needed; with 0.5, multimodal
posteriors come out wrong by up to a nat whatever the particle count, because mode weights
are carried only by the reweighting. Several independent copies run side by side (`vmap`),
each with its own ladder; a copy that reaches beta = 1 is frozen while the others finish.

Every stage records E_beta[n L_n] and Var_beta[n L_n] over the moved particles, which
thermodynamic integration uses (`slt.free_energy(method="ti")`).

**Waypoints.** `waypoints=(b_1, ..., b_W)` forces every copy's ladder through those inverse
temperatures exactly: the ESS bisection never steps past the next waypoint. At each waypoint
the n L_n of every moved particle is kept (`SMCRun.waypoint_nll`), so that WBIC
(beta = 1 / log n), the E_beta[n L_n] curve and lambda from temperatures come from the same
particles as log Z, with standard errors from the independent copies (`slt.estimators.path`).
Stopping at a waypoint only shortens a step, so it never lowers the ESS between stages.

Checkpoints (`slt.samplers.checkpoint`): with `checkpoint=path`, the particles, their
log-likelihoods, each copy's beta, log Z and step size, and the ladder recorded so far are
written atomically after every stage; a later call resumes from the last stage to the bitwise
same `SMCRun` (stage k's randomness is `fold_in(key, k)`; nothing else is random).

References:
  Del Moral, Doucet & Jasra, "Sequential Monte Carlo samplers", JRSS-B 68:411–436, 2006;
  Jasra, Stephens, Doucet & Tsagaris, "Inference for Lévy-driven stochastic volatility models
  via adaptive sequential Monte Carlo", Scand. J. Stat. 38:1–22, 2011 (ESS-adaptive ladder);
  Buchholz, Chopin & Jacob, "Adaptive tuning of Hamiltonian Monte Carlo within sequential
  Monte Carlo", Bayesian Analysis 16:745–771, 2021 (HMC moves, covariance preconditioning).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from numpyro import handlers

from slt import compile_cache
from slt.problem import Problem, require_problem
from slt.samplers.checkpoint import Checkpoint, join_records
from slt.samplers.mixture_proposal import (
    cross_fitted_independence_sweep,
    fit_cross_mixtures,
    whitening_factor,
)
from slt.samplers.nuts import nll_of_draws
from slt.samplers.runner import ProgressBar, run_units
from slt.validation import (
    InputError,
    require_callable,
    require_float_array,
    require_in_interval,
    require_instance,
    require_int,
    require_key,
    require_one_of,
    require_positive,
    set_field,
)

__all__ = ["SMCRun", "Tempering", "sample_prior", "tempered_smc"]

# Bisection steps for the next inverse temperature: 2^-100 of the remaining interval resolves
# increments down to 1e-30, below any first step from a diffuse prior.
_BISECTION_STEPS = 100
KERNELS = ("auto", "hmc", "hmc_imh")
# "auto" adds independence moves up to this many parameters. Above it a mixture fitted to N / 2
# particles cannot pin down d-dimensional covariances (d (d + 1) / 2 numbers for each of 8
# components), its proposals are rarely accepted, and the EM fit, O(N M d^2) per iteration,
# costs more than it brings.
INDEPENDENCE_MAX_DIM = 16
# The fewest sweeps a stage takes: with independence moves the log-likelihoods decorrelate
# within the first two sweeps even where the rest of the cloud has not re-equilibrated;
# measured on conjugate regression (6 keys), the per-copy spread of log Z was 1.8x HMC's with
# at least 2 sweeps and 0.7x with at least 4.
MIN_SWEEPS = {"hmc": 2, "hmc_imh": 4}
# Independence moves per sweep, before its HMC transition. Each costs two evaluations of the
# log-likelihood per particle against the 10 gradients of an HMC transition. Measured on the
# Old Faithful mixture K = 2 (keys 0-2): with 1, F came out -0.02, +0.05, +0.20 from the
# reference in 4.0 sweeps a stage; with 3, +0.04, -0.01, +0.10 in 2.7.
INDEPENDENCE_MOVES_PER_SWEEP = 3
# The step size moves by the factor exp(acceptance - target) per stage, kept within this range.
_STEP_SIZE_RANGE = (1e-4, 2.0)


@dataclass(frozen=True)
class Tempering:
    """Adaptive tempered SMC from the prior (beta = 0) to the posterior (beta = 1): how
    `tempered_smc` runs, and the sampler of `slt.free_energy` (and, by default, of `slt.wbic`
    and `slt.rlct`).

    `num_copies` independent copies of `num_particles` particles N each climb their own ladder
    0 = beta_0 < beta_1 < ... < beta_K = 1 of the tempered posteriors
    pi_beta(w) ∝ exp(beta l(w)) prior(w), l(w) = sum_i log p(y_i | x_i, w): from beta_k the next
    inverse temperature is the largest beta_{k+1} <= 1 with

        ESS(exp((beta_{k+1} - beta_k) l(w_j))) >= target_ess * N,

    the evidence grows by the mean weight, Z(beta_{k+1}) / Z(beta_k) ≈
    (1/N) sum_j exp((beta_{k+1} - beta_k) l(w_j)), and the resampled particles are moved by
    sweeps targeting pi_{beta_{k+1}} until the correlation across particles of l(w) before and
    after the sweeps is at most `correlation_threshold` (module doc: "Moves", "Independence
    moves").

    Attributes:
      num_particles: particles N per copy (>= 2).
      num_copies: independent copies (their spread is the standard error of log Z).
      target_ess: ESS fraction kept between successive temperatures, in (0, 1); 0.9–0.95
        (DESIGN.md: with 0.5, multimodal posteriors come out wrong by up to a nat).
      kernel: the moves: "hmc"; "hmc_imh" (each sweep first makes independence moves from a
        Gaussian mixture fitted to the other half of the particles, then one HMC
        transition); "auto": "hmc_imh" for d <= 16 with at least 8 particles per component
        in each half, else "hmc".
      num_mcmc_steps: the fewest sweeps a stage takes; None: the kernel's (2 with "hmc", 4
        with "hmc_imh", `MIN_SWEEPS`).
      max_mcmc_steps: the most sweeps a stage takes (raised to num_mcmc_steps if below it).
      correlation_threshold: a stage's sweeps stop once the correlation between the
        particles' log-likelihoods before and after them is at most this, in (0, 1).
      interim_correlation_threshold: the threshold at the stages that end neither at a
        waypoint nor at beta = 1; None: `correlation_threshold`. A looser one there saves
        sweeps where nothing is measured but the evidence, when the evidence comes from
        elsewhere (importance sampling); 0.5 halved the time on Old Faithful K = 3 but
        widened the importance estimate's errors (benchmarks/RESULTS.md).
      num_leapfrog: leapfrog steps per HMC transition.
      initial_step_size: HMC step size at the first stage, in units of the particle spread.
      target_acceptance: the HMC acceptance rate the step size is steered towards, in (0, 1).
      num_components: mixture components of the independence proposal ("hmc_imh").
      max_stages: stop with an error after this many stages.
      prior_sampler: `(key, num) -> (num, dim)` exact prior draws, flat and unconstrained,
        the particles at beta = 0; None: `sample_prior` (NumPyro models). Needed for
        `Problem.from_loss`.

    Example:
      >>> Tempering(num_particles=200)
      Tempering(num_particles=200, num_copies=4, target_ess=0.95, kernel='auto', \
num_mcmc_steps=None, max_mcmc_steps=20, correlation_threshold=0.2, \
interim_correlation_threshold=None, num_leapfrog=10, initial_step_size=0.5, \
target_acceptance=0.75, num_components=8, max_stages=5000, prior_sampler=None)
      >>> Tempering(target_ess=1.0)
      Traceback (most recent call last):
      slt.validation.InputError: target_ess must be a number in (0.0, 1.0), got 1.0
    """

    name: ClassVar[str] = "smc"  # how results name the sampler (`WBICResult.sampler`)

    num_particles: int = 500
    num_copies: int = 4
    target_ess: float = 0.95
    kernel: str = "auto"
    num_mcmc_steps: int | None = None
    max_mcmc_steps: int = 20
    correlation_threshold: float = 0.2
    interim_correlation_threshold: float | None = None
    num_leapfrog: int = 10
    initial_step_size: float = 0.5
    target_acceptance: float = 0.75
    num_components: int = 8
    max_stages: int = 5000
    prior_sampler: Callable[[jax.Array, int], jax.Array] | None = None

    def __post_init__(self):
        minima = {"num_particles": 2, "num_copies": 1, "num_mcmc_steps": 1,
                  "max_mcmc_steps": 1, "num_leapfrog": 1, "num_components": 1, "max_stages": 1}
        for name, minimum in minima.items():
            if getattr(self, name) is not None or name != "num_mcmc_steps":  # None: kernel's
                set_field(self, name, require_int(name, getattr(self, name), minimum=minimum))
        for name in ("target_ess", "target_acceptance", "correlation_threshold",
                     "interim_correlation_threshold"):
            if getattr(self, name) is not None:  # None: the interim one is the other's
                set_field(self, name, require_in_interval(name, getattr(self, name), 0.0, 1.0))
        set_field(self, "initial_step_size",
             require_positive("initial_step_size", self.initial_step_size))
        require_one_of("kernel", self.kernel, KERNELS)
        require_callable("prior_sampler", self.prior_sampler, optional=True)
        if self.kernel == "hmc_imh" and self.num_particles // 2 < self.num_components:
            raise InputError(
                f"kernel='hmc_imh' fits {self.num_components} components to each half of the "
                f"particles: num_particles must be at least {2 * self.num_components}, got "
                f"{self.num_particles}"
            )



class SMCRun(NamedTuple):
    """What `tempered_smc` records, one row per copy and one column per stage (NaN-padded).

    log_evidence: (copy,) log Z estimate of each copy.
    betas: (copy, stage) the ladder, from beta_0 = 0 to 1.
    log_evidence_path: (copy, stage) log Z(beta_k) accumulated along the ladder.
    mean_nll, var_nll: (copy, stage) E_beta[n L_n] and Var_beta[n L_n] over the particles.
    acceptance: (copy, stage) mean HMC acceptance of the moves (NaN at stage 0).
    step_size: (copy, stage) the HMC step size used (in whitened units).
    num_moves: (copy, stage) sweeps the stage took (NaN at stage 0).
    independence_acceptance: (copy, stage) mean acceptance of the independence moves (NaN at
      stage 0 and without them).
    num_stages: (copy,) number of tempering stages (ladder length - 1).
    particles: (copy, particle, dim) final particles (flat, unconstrained): posterior draws.
    waypoints: (W,) the inverse temperatures every ladder passed through (ascending).
    waypoint_nll: (copy, W, particle) n L_n of each particle at each waypoint, after the moves.
    compile_time, run_time: seconds.
    """

    log_evidence: np.ndarray
    betas: np.ndarray
    log_evidence_path: np.ndarray
    mean_nll: np.ndarray
    var_nll: np.ndarray
    acceptance: np.ndarray
    step_size: np.ndarray
    num_moves: np.ndarray
    independence_acceptance: np.ndarray
    num_stages: np.ndarray
    particles: np.ndarray
    waypoints: np.ndarray
    waypoint_nll: np.ndarray
    compile_time: float
    run_time: float


class _State(NamedTuple):
    """One copy's particle system (a leading copy axis when batched)."""

    position: jax.Array  # (N, d)
    loglik: jax.Array  # (N,)
    beta: jax.Array
    log_evidence: jax.Array
    step_size: jax.Array
    waypoint_nll: jax.Array  # (W, N) n L_n of the particles at each waypoint (NaN until reached)


class _Config(NamedTuple):
    """Everything that changes the compiled program."""

    problem: Problem
    num_particles: int
    num_copies: int
    target_ess: float
    num_mcmc_steps: int
    max_mcmc_steps: int
    correlation_threshold: float
    interim_correlation_threshold: float
    num_leapfrog: int
    target_acceptance: float
    waypoints: tuple[float, ...]
    kernel: str
    num_components: int


def sample_prior(problem: Problem, key: jax.Array, num: int) -> jax.Array:
    """`num` exact draws from a NumPyro model's prior, flat and unconstrained, shape (num, d).

    Each draw runs the model under `handlers.seed` and reads its latent sites.
    """
    if problem.model is None:
        raise ValueError(
            "sampling the prior needs a NumPyro model; for Problem.from_loss give the "
            "sampler prior_sampler=(key, num) -> flat draws of shape (num, dim) (e.g. "
            "Tempering(prior_sampler=...))"
        )

    def one(k):
        model = handlers.seed(problem.model, k)
        trace = handlers.trace(model).get_trace(**problem.data, **problem.model_kwargs)
        values = {name: trace[name]["value"] for name in problem.site_names}
        return problem.ravel(problem.unconstrain(values))

    return jax.jit(jax.vmap(one))(jax.random.split(key, num))


def _next_increment(loglik, remaining, target_ess):
    """The largest delta <= remaining with ESS(exp(delta * loglik)) >= target_ess * N."""
    size = loglik.shape[0]

    def ess_fraction(delta):
        log_weights = delta * loglik
        return jnp.exp(2 * logsumexp(log_weights) - logsumexp(2 * log_weights)) / size

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        ok = ess_fraction(mid) >= target_ess
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    lo, hi = jax.lax.fori_loop(
        0, _BISECTION_STEPS, bisect, (jnp.zeros_like(remaining), remaining)
    )
    # lo stays 0 only if even the smallest step loses the target (particles with l = -inf,
    # outside the likelihood's support): then take the smallest step, which drops them.
    delta = jnp.where(lo > 0, lo, hi)
    return jnp.where(ess_fraction(remaining) >= target_ess, remaining, delta)


def _correlation(a, b):
    """Pearson correlation of two vectors (1 when either is constant: nothing has mixed)."""
    a, b = a - a.mean(), b - b.mean()
    denominator = jnp.sqrt(jnp.sum(a * a) * jnp.sum(b * b))
    finite = jnp.isfinite(denominator) & (denominator > 0)
    return jnp.where(finite, jnp.sum(a * b) / jnp.where(finite, denominator, 1.0), 1.0)


def _systematic_resample(key, log_weights):
    """Ancestor indices by systematic resampling (one uniform, N evenly spaced points)."""
    size = log_weights.shape[0]
    weights = jnp.exp(log_weights - logsumexp(log_weights))
    points = (jax.random.uniform(key, dtype=weights.dtype) + jnp.arange(size)) / size
    return jnp.clip(jnp.searchsorted(jnp.cumsum(weights), points), 0, size - 1)


def _tempered_log_target(problem: Problem) -> Callable:
    """log_target(flat, beta, data) -> (beta log-likelihood + log prior, -inf where NaN;
    the log-likelihood)."""
    def log_target(flat, beta, data):
        params = problem.unravel(flat)
        loglik = jnp.sum(problem.loglik(params, data))
        value = beta * loglik + problem.log_prior(params)
        return jnp.where(jnp.isnan(value), -jnp.inf, value), loglik

    return log_target


def _hmc_step_fn(log_target: Callable, num_leapfrog: int) -> Callable:
    """hmc_step(key, flat, beta, data, step_size, factor) -> (position, log-likelihood,
    acceptance probability): one HMC transition of `num_leapfrog` leapfrog steps (step size
    jittered by +-20%) in coordinates whitened by the particle covariance factor."""
    value_and_grad = jax.value_and_grad(log_target, has_aux=True)

    def hmc_step(key, flat, beta, data, step_size, factor):
        momentum_key, jitter_key, accept_key = jax.random.split(key, 3)
        step = step_size * jax.random.uniform(jitter_key, minval=0.8, maxval=1.2)
        (value, loglik), grad = value_and_grad(flat, beta, data)
        momentum = jax.random.normal(momentum_key, flat.shape, flat.dtype)

        def leapfrog(carry, _):
            x, v, _, _, g = carry
            v = v + 0.5 * step * (factor.T @ g)
            x = x + step * (factor @ v)
            (new_value, new_loglik), g = value_and_grad(x, beta, data)
            v = v + 0.5 * step * (factor.T @ g)
            return (x, v, new_value, new_loglik, g), None

        (x, v, new_value, new_loglik, _), _ = jax.lax.scan(
            leapfrog, (flat, momentum, value, loglik, grad), None, length=num_leapfrog
        )
        log_ratio = (new_value - 0.5 * v @ v) - (value - 0.5 * momentum @ momentum)
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        accept = jnp.log(jax.random.uniform(accept_key, dtype=flat.dtype)) < log_ratio
        return (
            jnp.where(accept, x, flat),
            jnp.where(accept, new_loglik, loglik),
            jnp.exp(jnp.minimum(log_ratio, 0.0)),
        )

    return hmc_step


def _move_fn(config: _Config, log_target: Callable) -> Callable:
    """move(key, position, loglik, beta, data, step_size, threshold) -> (position, loglik,
    mean HMC acceptance, mean independence acceptance, sweeps): sweeps over all particles
    until the correlation of their log-likelihoods with those before the moves is at most
    `threshold` (module doc)."""
    size = config.num_particles
    hmc_step = _hmc_step_fn(log_target, config.num_leapfrog)
    target_values = jax.vmap(log_target, in_axes=(0, None, None))
    jumps = config.kernel == "hmc_imh"

    def move(key, position, loglik, beta, data, step_size, threshold):
        factor = whitening_factor(position)
        if jumps:  # (keys are split only here, so that "hmc" draws what it always drew)
            fit_key, key = jax.random.split(key)
            mixtures = fit_cross_mixtures(fit_key, position, config.num_components)

        def sweep(key, position, loglik):
            """Independence moves (with "hmc_imh"), then one HMC transition per particle."""
            jump_rate = jnp.full((), jnp.nan, position.dtype)
            if jumps:
                jump_key, key = jax.random.split(key)

                def jump(index, carry):
                    position, loglik, rate = carry
                    position, loglik, new_rate = cross_fitted_independence_sweep(
                        jax.random.fold_in(jump_key, index), position, loglik,
                        lambda points: target_values(points, beta, data), mixtures,
                    )
                    return position, loglik, rate + new_rate

                position, loglik, rate = jax.lax.fori_loop(
                    0, INDEPENDENCE_MOVES_PER_SWEEP, jump,
                    (position, loglik, jnp.zeros((), position.dtype)),
                )
                jump_rate = rate / INDEPENDENCE_MOVES_PER_SWEEP
            position, loglik, acceptance = jax.vmap(
                hmc_step, in_axes=(0, 0, None, None, None, None)
            )(jax.random.split(key, size), position, beta, data, step_size, factor)
            return position, loglik, acceptance.mean(), jump_rate

        def unfinished(carry):
            moves, _, moved_loglik, _, _, _ = carry
            mixed = _correlation(loglik, moved_loglik) <= threshold
            return (moves < config.max_mcmc_steps) & (
                (moves < config.num_mcmc_steps) | ~mixed
            )

        def one_sweep(carry):
            moves, position, moved_loglik, acceptance, jump_rate, key = carry
            key, sweep_key = jax.random.split(key)
            position, moved_loglik, rate, jump = sweep(sweep_key, position, moved_loglik)
            return moves + 1, position, moved_loglik, acceptance + rate, jump_rate + jump, key

        zero = jnp.zeros((), position.dtype)
        moves, position, moved_loglik, acceptance, jump_rate, _ = jax.lax.while_loop(
            unfinished, one_sweep,
            (jnp.zeros((), jnp.int32), position, loglik, zero, zero, key),
        )
        return position, moved_loglik, acceptance / moves, jump_rate / moves, moves

    return move


def _stage_fn(config: _Config) -> Callable:
    """One tempering stage of one copy: (state, key, data) -> (state, record). The data are an
    argument, not constants of the compiled program."""
    problem = config.problem
    size = config.num_particles
    move = _move_fn(config, _tempered_log_target(problem))
    waypoints = jnp.asarray(config.waypoints + (1.0,), problem.dtype)

    def stage(state: _State, key, data):
        active = state.beta < 1.0
        loglik = jnp.where(jnp.isnan(state.loglik), -jnp.inf, state.loglik)
        target = jnp.min(jnp.where(waypoints > state.beta, waypoints, 1.0))
        delta = _next_increment(loglik, target - state.beta, config.target_ess)
        beta = jnp.where(delta >= target - state.beta, target, state.beta + delta)
        delta = beta - state.beta
        log_weights = jnp.where(jnp.isneginf(loglik), -jnp.inf, delta * loglik)
        log_increment = logsumexp(log_weights) - jnp.log(size)
        resample_key, move_key = jax.random.split(key)
        ancestors = _systematic_resample(resample_key, log_weights)
        measured = jnp.any(waypoints == beta)  # a waypoint or beta = 1
        threshold = jnp.where(measured, config.correlation_threshold,
                              config.interim_correlation_threshold)
        position, loglik, acceptance, jump_rate, moves = move(
            move_key, state.position[ancestors], loglik[ancestors], beta, data, state.step_size,
            threshold,
        )
        step_size = jnp.clip(
            state.step_size * jnp.exp(acceptance - config.target_acceptance), *_STEP_SIZE_RANGE
        )
        reached = (waypoints[:-1] == beta)[:, None]
        waypoint_nll = jnp.where(reached, -loglik[None, :], state.waypoint_nll)
        new = _State(position, loglik, beta, state.log_evidence + log_increment, step_size,
                     waypoint_nll)
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), new, state)
        record = (
            jnp.where(active, beta, jnp.nan),
            jnp.where(active, new.log_evidence, jnp.nan),
            jnp.where(active, -jnp.mean(loglik), jnp.nan),
            jnp.where(active, jnp.var(loglik), jnp.nan),
            jnp.where(active, acceptance, jnp.nan),
            jnp.where(active, state.step_size, jnp.nan),
            jnp.where(active, moves, jnp.nan),
            jnp.where(active, jump_rate, jnp.nan),
        )
        return new, record

    return stage


_TRACE_COUNT = [0]  # how many times a stage program was traced (tests check it stays at one)


def _compiled_stage(config: _Config):
    """((the compiled stage program, the seconds compilation took), whether it was compiled
    before): once per configuration, kept with the problem (`slt.compile_cache`)."""
    return compile_cache.compiled_for(
        config.problem, ("tempering stage", config._replace(problem=None)),
        lambda: _compile_stage(config),
    )


def _compile_stage(config: _Config):
    """The stage of every copy, vmapped and compiled, and the seconds compilation took."""
    stage = _stage_fn(config)

    def all_copies(state, key, data):
        _TRACE_COUNT[0] += 1
        return jax.vmap(stage, in_axes=(0, 0, None))(
            state, jax.random.split(key, config.num_copies), data
        )

    copies, size, dim = config.num_copies, config.num_particles, config.problem.dim
    dtype = config.problem.dtype
    state = _State(
        position=jax.ShapeDtypeStruct((copies, size, dim), dtype),
        loglik=jax.ShapeDtypeStruct((copies, size), dtype),
        beta=jax.ShapeDtypeStruct((copies,), dtype),
        log_evidence=jax.ShapeDtypeStruct((copies,), dtype),
        step_size=jax.ShapeDtypeStruct((copies,), dtype),
        waypoint_nll=jax.ShapeDtypeStruct((copies, len(config.waypoints), size), dtype),
    )
    start = time.perf_counter()
    compiled = jax.jit(all_copies).lower(state, jax.random.key(0), config.problem.data).compile()
    return compiled, time.perf_counter() - start


def tempered_smc(
    problem: Problem,
    key: jax.Array,
    sampler: Tempering = Tempering(),
    *,
    waypoints=(),
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> SMCRun:
    """Run `sampler.num_copies` independent adaptive tempered SMC samplers from prior to
    posterior.

    Args:
      problem: model and data with a proper prior.
      key: PRNG key.
      sampler: the particles, copies, ladder, moves and prior draws (`Tempering`, its fields
        stated there).
      waypoints: inverse temperatures in (0, 1] every ladder must pass through exactly (module
        doc); the particles' n L_n there is returned in `waypoint_nll`.
      progress: show the smallest beta reached as a progress bar.
      checkpoint: a file to save progress to after every stage and resume from (module doc,
        `slt.samplers.checkpoint`); None: no checkpoint. The fingerprint holds the settings
        and the initial prior draws, not `max_stages`: a run stopped by it continues with a
        larger one. `run_time` then counts the sampling time of every session.

    Returns:
      An `SMCRun`.

    Raises:
      InputError (a ValueError): problem not a Problem, key not a PRNG key, sampler not a
        `Tempering`, its prior_sampler returning the wrong shape, waypoints outside (0, 1].
      ValueError: no proper prior, or every prior draw has l(w) = -inf.
      RuntimeError: beta = 1 not reached within max_stages.
      slt.samplers.checkpoint.Interrupted: a KeyboardInterrupt during a checkpointed run (the
        stages before the one in progress are saved; `slt.samplers.runner`).
      slt.samplers.checkpoint.CheckpointError: the file at `checkpoint` is from another run.

    Example:
      >>> run = tempered_smc(problem, key, Tempering(num_particles=100), progress=False)
      >>> run.particles.shape, round(float(-run.log_evidence.mean()), 1)   # F = -log Z
      ((4, 100, 2), 141.5)
    """
    _validate(problem, key, sampler)
    kernel = _resolve_kernel(sampler.kernel, problem.dim, sampler.num_particles,
                             sampler.num_components)
    num_mcmc_steps = (MIN_SWEEPS[kernel] if sampler.num_mcmc_steps is None
                      else sampler.num_mcmc_steps)
    initial_step_size = sampler.initial_step_size
    max_stages = sampler.max_stages
    config = _Config(
        problem, sampler.num_particles, sampler.num_copies, sampler.target_ess, num_mcmc_steps,
        max(sampler.max_mcmc_steps, num_mcmc_steps), sampler.correlation_threshold,
        (sampler.correlation_threshold if sampler.interim_correlation_threshold is None
         else sampler.interim_correlation_threshold),
        sampler.num_leapfrog, sampler.target_acceptance, _waypoints(waypoints),
        kernel, sampler.num_components,
    )
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # a legacy uint32 key
        key = jax.random.wrap_key_data(key)
    prior_key, run_key = jax.random.split(key)
    state = _initial_state(
        config, sampler.prior_sampler or functools.partial(sample_prior, problem), prior_key,
        initial_step_size,
    )
    store = Checkpoint(
        checkpoint, "tempered_smc", **config._asdict(), key=run_key, particles=state.position,
        initial_step_size=float(initial_step_size),
    )
    resumed = store.resume(state)
    resumed = resumed._replace(chunks=resumed.chunks or [_prior_record(config, state.loglik)])
    (stage, compile_time), compiled_before = _compiled_stage(config)
    if compiled_before:
        compile_time = 0.0

    def advance(state, index):
        state, record = stage(state, jax.random.fold_in(run_key, index), problem.data)
        return state, _stage_record(record)

    def lowest_beta(state, _=None) -> float:
        return float(jnp.min(state.beta))

    state, stages, _, run_time = run_units(
        advance, resumed, store,
        ProgressBar(1.0, lowest_beta, "tempering (min beta)", unit="beta", show=progress),
        num_units=max_stages, finished=lambda state, _: lowest_beta(state) >= 1.0,
    )
    lowest = lowest_beta(state)
    if lowest < 1.0:
        raise RuntimeError(
            f"beta = 1 not reached in {max_stages} stages (lowest beta {lowest:.3g}); "
            f"lower target_ess or raise max_stages"
        )
    betas, path, mean_nll, var_nll, acceptance, step_size, moves, jump_rate = join_records(
        stages
    )
    return SMCRun(
        log_evidence=np.asarray(state.log_evidence, np.float64),
        betas=betas, log_evidence_path=path, mean_nll=mean_nll, var_nll=var_nll,
        acceptance=acceptance, step_size=step_size, num_moves=moves,
        independence_acceptance=jump_rate, num_stages=np.sum(np.isfinite(betas), axis=1) - 1,
        particles=np.asarray(state.position),
        waypoints=np.asarray(config.waypoints, np.float64),
        waypoint_nll=np.asarray(state.waypoint_nll, np.float64),
        compile_time=compile_time, run_time=run_time,
    )


def _initial_state(config: _Config, sampler: Callable, key: jax.Array,
                   initial_step_size: float) -> _State:
    """Every copy's particles drawn from the prior by `sampler(key, num)`, at beta = 0; an
    InputError for draws of the wrong shape, a ValueError when l(w) is -inf or NaN at every
    draw."""
    problem = config.problem
    num = config.num_copies * config.num_particles
    draws = jnp.asarray(sampler(key, num), problem.dtype)
    if draws.shape != (num, problem.dim):
        raise InputError(
            f"prior_sampler(key, num) must return shape (num, dim) = "
            f"({num}, {problem.dim}), got {draws.shape}"
        )
    draws = draws.reshape(config.num_copies, config.num_particles, problem.dim)
    loglik = -nll_of_draws(problem, draws)
    loglik = jnp.where(jnp.isnan(loglik), -jnp.inf, loglik)
    if not np.any(np.isfinite(np.asarray(loglik))):
        raise ValueError("the log-likelihood is -inf or NaN at every prior draw")
    dtype = draws.dtype
    return _State(
        position=draws,
        loglik=loglik,
        beta=jnp.zeros(config.num_copies, dtype),
        log_evidence=jnp.zeros(config.num_copies, dtype),
        step_size=jnp.full(config.num_copies, initial_step_size, dtype),
        waypoint_nll=jnp.full(
            (config.num_copies, len(config.waypoints), config.num_particles), jnp.nan, dtype
        ),
    )


def _prior_record(config: _Config, loglik) -> tuple[np.ndarray, ...]:
    """The record of stage 0 (the prior, beta = 0): the stage record's columns, with the mean
    and variance of n L_n over the finite draws and NaN where no move was made."""
    finite = jnp.where(jnp.isfinite(loglik), loglik, jnp.nan)
    return _stage_record((
        jnp.zeros(config.num_copies), jnp.zeros(config.num_copies),
        -jnp.nanmean(finite, axis=1), jnp.nanvar(finite, axis=1),
        *(jnp.full(config.num_copies, jnp.nan),) * 4,
    ))


def _stage_record(record) -> tuple[np.ndarray, ...]:
    """A stage's record, arrays of shape (copy,), as float64 columns of shape (copy, 1)."""
    return tuple(np.asarray(column, np.float64)[:, None] for column in record)


def _waypoints(values) -> tuple[float, ...]:
    """Sorted distinct waypoints in (0, 1], as floats."""
    values = np.unique(require_float_array("waypoints", values).reshape(-1))
    if values.size and not (np.all(np.isfinite(values)) and values[0] > 0 and values[-1] <= 1):
        raise InputError(f"waypoints must be inverse temperatures in (0, 1], got {values}")
    return tuple(float(v) for v in values)


def _resolve_kernel(kernel: str, dim: int, num_particles: int, num_components: int) -> str:
    """The kernel to run: "auto" -> "hmc_imh" for d <= `INDEPENDENCE_MAX_DIM` with at least 8
    particles per component in each half, else "hmc". Raise InputError for an unknown kernel
    or too few particles for "hmc_imh"'s mixture fits."""
    if kernel not in KERNELS:
        raise InputError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel == "auto":
        enough = num_particles // 2 >= 8 * num_components
        return "hmc_imh" if dim <= INDEPENDENCE_MAX_DIM and enough else "hmc"
    if kernel == "hmc_imh" and num_particles // 2 < num_components:
        raise InputError(
            f"kernel='hmc_imh' fits {num_components} components to each half of the particles: "
            f"num_particles must be at least {2 * num_components}, got {num_particles}"
        )
    return kernel


def _validate(problem, key, sampler):
    """Check `tempered_smc`'s arguments (`slt.validation`); raise InputError naming a bad one
    (the `Tempering` value checked its own fields)."""
    require_problem(problem)
    if not problem.has_prior:
        raise ValueError("tempering from the prior needs a proper prior (log_prior= in from_loss)")
    require_key(key)
    require_instance("sampler", sampler, Tempering, "a Tempering value, e.g. Tempering()")
