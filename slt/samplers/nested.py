"""Nested sampling by BlackJAX's nested slice sampler: log Z = log ∫ L dX as a second reference.

Skilling's nested sampling writes the evidence as a one-dimensional integral over the prior
mass X(l) = P_prior(log L(w) > l) enclosed by a likelihood contour,

    Z = ∫ L(w) prior(w) dw = ∫_0^1 L(X) dX,    L(w) = prod_i p(y_i | x_i, w).

N live points are drawn from the prior; each iteration deletes the k = `num_delete` lowest,
whose likelihood L_i sets the next contour, and replaces them by draws from the prior
restricted to L > L_i. The enclosed mass then shrinks by order statistics of uniforms,
E[log X_i] = -i / N, and Z ≈ sum_i L_i (X_{i-1} - X_i) over the dead points plus the live
points' share at the end. The constrained prior draws are made by BlackJAX's nested slice
sampler (`blackjax.nss`): `num_inner_steps` slice moves, each along a random line, from a
randomly chosen surviving live point. The lines are BlackJAX's own (covariance-shaped,
"hit-and-run") or, with probability `jump_probability`, run through two random live points,
which lets points cross between separated modes (`_proposal`).

Conventions: log Z and F = -log Z in nats; L is the full-data likelihood,
log L(w) = sum_i log p(y_i | x_i, w) (`Problem.loglik` summed); the sampler works in the
Problem's **unconstrained** coordinates, where the prior density is `Problem.log_prior`
(log-Jacobian included), and the initial live points are exact prior draws there
(`slt.samplers.tempering.sample_prior`, or `prior_sampler`).

Uncertainty, two ways, both reported:

* nested sampling's own: the prior masses X_i are random; BlackJAX simulates
  `_NUM_VOLUME_SAMPLES` sequences of them (`blackjax.ns.utils.log_weights`) and the
  standard deviation of log Z over those is its error: ≈ sqrt(H / N) for N live points,
  H the information (KL from prior to posterior, nats);
* the spread of `num_runs` independent runs (vmapped side by side): standard deviation
  over sqrt(num_runs).

The combined estimate merges the runs' dead points into one run with num_runs × N live
points (a particle's birth contour says which live set it belonged to; Fowlie, Handley &
Su 2021) and `std_error` is the larger of its own standard error and the runs' spread.
A run stops when the live points hold less than `termination` of the evidence found so far,
Z_live / Z_dead < termination, with Z_live = X · mean(L_live); the live points are then
added to the dead points with their share of X (`blackjax.ns.utils.finalise`).

Measured with the defaults (4 runs of 500 live points, 10 deletions per iteration,
max(5, 4 dim) slice moves, half of them jumps, termination 1e-2; float64, 2 CPU cores,
times with compilation; key 0), F = -log Z against its reference:

===========================================  ========  =====  ============  ======  =========
problem                                      d, n      H      error (se)    time    evals/run
===========================================  ========  =====  ============  ======  =========
conjugate regression (exact)                 3, 200    9.0    +0.10 (0.07)  9 s     0.45 M
product model y = abx + eps, ab = 0 (exact)  2, 1000   1.9    -0.00 (0.03)  9 s     0.20 M
Old Faithful mixture K = 1 (429.609)         2, 272    7.1    -0.06 (0.06)  10 s    0.27 M
Old Faithful mixture K = 2 (296.61)          5, 272    17.8   +0.08 (0.10)  63 s    1.46 M
Old Faithful mixture K = 3 (293.38)          8, 272    22.4   +0.26 (0.11)  171 s   3.42 M
===========================================  ========  =====  ============  ======  =========

(H: the information in nats; the error is F minus the reference.) The cost is the
likelihood: a mixture's costs 7–12 µs here (n = 272, float64 exp and log), and a run
replaces about N (H + 6) points, each by num_inner_steps slice moves of 5–7 evaluations.
One run's error is about sqrt(H / N); the multimodal mixtures scatter more between runs than
that (up to 1.8× for K = 3 with the defaults), which `spread_std_error` catches. K = 3 with
1000 live points and 48 slice moves per point (3× the cost): +0.00 (0.11).

References:
  Skilling, "Nested sampling for general Bayesian computation", Bayesian Analysis
  1:833–859, 2006;
  Yallup, Kroupa & Handley, "Nested slice sampling", arXiv:2601.23252, 2026 (the sampler
  `blackjax.nss` implements);
  Fowlie, Handley & Su, "Nested sampling with plateaus", MNRAS 503:1199–1205, 2021 (the
  live-point counts for batched deletion and merged runs);
  Higson, Handley, Hobson & Lasenby, "Sampling errors in nested sampling parameter
  estimation", Bayesian Analysis 13:873–896, 2018 (merging runs, run-to-run spread);
  ter Braak, "A Markov chain Monte Carlo version of the genetic algorithm differential
  evolution", Statistics and Computing 16:239–249, 2006 (directions from live-point pairs).

Example (small: 2 runs of 50 live points):
  >>> spec = slt.models.product_model()
  >>> data = spec.simulate(jax.random.key(1), {"w": jnp.zeros(2)}, 100)
  >>> run = nested_sampling(spec.problem(data), key, NestedSampling(num_live=50, num_runs=2),
  ...                       progress=False)
  >>> round(-run.combined_log_evidence, 1), round(run.std_error, 1)   # F = -log Z, its se
  (137.7, 0.1)
  >>> round(-slt.truth.product_model_log_evidence(data["x"], data["y"]), 1)  # exact F
  137.6
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.ns import nss
from blackjax.ns.base import NSInfo, NSState, StateWithLogLikelihood
from blackjax.ns.utils import finalise, log_weights
from jax.scipy.special import logsumexp
from tqdm.auto import tqdm

from slt.problem import Problem, require_problem
from slt.samplers.tempering import sample_prior
from slt.validation import (
    InputError,
    require_callable,
    require_in_interval,
    require_instance,
    require_int,
    require_key,
    set_field,
)

__all__ = ["NestedRun", "NestedSampling", "nested_sampling"]

# Simulated prior-mass sequences behind nested sampling's own standard error: the relative
# error of a standard deviation from S samples is 1/sqrt(2S), 7% at S = 100 (BlackJAX's
# default). Memory grows as S × (number of dead points).
_NUM_VOLUME_SAMPLES = 100


@dataclass(frozen=True)
class NestedSampling:
    """Nested slice sampling (`blackjax.nss`): how `nested_sampling` runs, and the second
    reference of `slt.free_energy` and `slt.compare`.

    Each of `num_runs` independent runs keeps N = `num_live` points drawn from the prior
    restricted to L(w) > L*, deletes the `num_delete` lowest each iteration (their likelihood
    sets the next contour L*) and replaces them by `num_inner_steps` slice moves from
    surviving live points, until the live points hold less than `termination` of the evidence
    found so far, Z_live / Z_dead < termination. Then

        Z = ∫_0^1 L(X) dX ≈ sum_i L_i (X_{i-1} - X_i) + Z_live,   E[log X_i] = -i / N

    (module doc); one run's error is about sqrt(H / N) nats, H the information.

    Attributes:
      num_live: live points N per run (>= 2). The runs merged act as one run of
        num_runs × N.
      num_runs: independent runs side by side; their spread is the second standard error.
      num_delete: points deleted and replaced per iteration, drawn in parallel (vmapped),
        fewer than num_live; the prior-mass bookkeeping stays exact (k deletions count as k
        shrinkages, Fowlie et al. 2021). On 2 CPU cores 10, 100 and 250 took the same time
        (K = 2 mixture, 1000 live points): the likelihood evaluations dominate. A few per
        cent of num_live keeps many survivors to start the new points from; on a GPU, more
        uses it better.
      num_inner_steps: slice moves per replacement; None: max(5, 4 dim). BlackJAX asks for
        at least max(5, 2 dim): fewer leave the new point correlated with the survivor it
        started from. Twice that was measured on the K = 3 Old Faithful mixture (d = 8, 4
        runs): with 2 dim = 16 moves (1000 live points) the runs scattered 2.7 times more
        than nested sampling's own error and log Z came out 0.57 ± 0.19 nats low; with
        4 dim = 32 (500 live points, the same cost) 1.0 times, 0.26 ± 0.11 low.
      termination: stop a run when the live points' share of the evidence, Z_live / Z_dead,
        falls below this, in (0, 1); the live points are then added in with their prior
        mass, so the error left is far below it. Measured on conjugate regression (same key,
        1000 live points): 1e-3, 1e-2 and 5e-2 give the same log Z to 1e-3 nats at 773k,
        669k and 596k likelihood evaluations per run; 1e-2 keeps a margin.
      jump_probability: probability, in [0, 1], that a slice move runs along the difference
        of two live points instead of a covariance-shaped direction (`_proposal`): such moves
        carry points between separated islands of the likelihood contour (multimodal
        posteriors). 0 gives BlackJAX's plain nested slice sampler.
      max_iterations: stop with an error when a run has not terminated after this many
        iterations.
      chunk_size: iterations compiled into one call; progress is reported between calls.
      prior_sampler: `(key, num) -> (num, dim)` exact prior draws, flat and unconstrained,
        the initial live points; None: `sample_prior` (NumPyro models). Needed for
        `Problem.from_loss`.

    Example:
      >>> NestedSampling(num_live=1000, num_runs=2)
      NestedSampling(num_live=1000, num_runs=2, num_delete=10, num_inner_steps=None, \
termination=0.01, jump_probability=0.5, max_iterations=1000000, chunk_size=100, \
prior_sampler=None)
      >>> NestedSampling(num_live=10, num_delete=10)
      Traceback (most recent call last):
      slt.validation.InputError: num_delete must be smaller than num_live, got 10 >= 10
    """

    name: ClassVar[str] = "nested"  # how results name the sampler

    num_live: int = 500
    num_runs: int = 4
    num_delete: int = 10
    num_inner_steps: int | None = None
    termination: float = 1e-2
    jump_probability: float = 0.5
    max_iterations: int = 1_000_000
    chunk_size: int = 100
    prior_sampler: Callable[[jax.Array, int], jax.Array] | None = None

    def __post_init__(self):
        for name, minimum in (("num_live", 2), ("num_runs", 1), ("num_delete", 1),
                              ("max_iterations", 1), ("chunk_size", 1)):
            set_field(self, name, require_int(name, getattr(self, name), minimum=minimum))
        if self.num_inner_steps is not None:
            set_field(self, "num_inner_steps",
                 require_int("num_inner_steps", self.num_inner_steps, minimum=1))
        if self.num_delete >= self.num_live:
            raise InputError(
                f"num_delete must be smaller than num_live, got {self.num_delete} >= "
                f"{self.num_live}"
            )
        set_field(self, "termination", require_in_interval(
            "termination", self.termination, 0.0, 1.0))
        set_field(self, "jump_probability", require_in_interval(
            "jump_probability", self.jump_probability, 0.0, 1.0, closed=True))
        require_callable("prior_sampler", self.prior_sampler, optional=True)



class NestedRun(NamedTuple):
    """What `nested_sampling` returns. log Z in nats; F = -log Z.

    combined_log_evidence: log Z of all runs merged into one run of num_runs × num_live live
      points (mean over simulated prior masses): the estimate to quote.
    std_error: the larger of `ns_std_error` and `spread_std_error`.
    ns_std_error: nested sampling's own standard error of `combined_log_evidence`: the
      standard deviation of the merged log Z over simulated prior masses.
    spread_std_error: standard deviation of `log_evidence` over sqrt(num_runs) (NaN for one
      run).
    log_evidence: (run,) each run's log Z: BlackJAX's running integral (prior masses at their
      expected log, E[log X_i] = -sum 1/live count) over the dead points plus the live points'
      share X mean(L_live).
    log_evidence_std_error: one run's own standard error, `ns_std_error` × sqrt(num_runs)
      (the merged run has num_runs times the live points; the error goes as 1/sqrt(N)).
    information: H = KL(posterior ‖ prior) in nats, of the merged run: the posterior occupies
      about e^-H of the prior mass, a run takes about N H iterations to reach it, and one run's
      error is about sqrt(H / N).
    num_iterations: iterations (each deletes `num_delete` points from every run) until every
      run met the termination rule; the runs step together.
    num_likelihood_evaluations: (run,) evaluations of the full-data log-likelihood (each
      with the prior density), the initial live points included.
    samples: (point, dim) dead points and final live points of every run (flat,
      unconstrained): posterior draws with weights exp(`log_weights`).
    log_weights: (point,) normalised log posterior weights of `samples` (mean over the
      simulated prior masses); resample with them for equally weighted draws.
    compile_time, run_time: seconds; compile_time counts the initial prior draws and the
      compilation (0 when the programs were cached), run_time the sampling and the
      post-processing of the dead points (BlackJAX's weights run op by op: 2–4 s).
    """

    combined_log_evidence: float
    std_error: float
    ns_std_error: float
    spread_std_error: float
    log_evidence: np.ndarray
    log_evidence_std_error: float
    information: float
    num_iterations: int
    num_likelihood_evaluations: np.ndarray
    samples: np.ndarray
    log_weights: np.ndarray
    compile_time: float
    run_time: float


class _Config(NamedTuple):
    """Everything that changes the compiled programs (hashable: a static jit argument)."""

    problem: Problem
    num_live: int
    num_delete: int
    num_inner_steps: int
    num_runs: int
    log_termination: float
    jump_probability: float
    chunk_size: int
    max_iterations: int


_TRACE_COUNT = [0]  # how many times a chunk program was traced (tests check it stays at one)


def _algorithm(config: _Config, data) -> blackjax.base.SamplingAlgorithm:
    """`blackjax.nss` on flat unconstrained parameters; `data` is a (traced) argument."""
    problem = config.problem

    def log_prior(flat):
        value = problem.log_prior(problem.unravel(flat))
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    def loglik(flat):
        value = jnp.sum(problem.loglik(problem.unravel(flat), data))
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    return blackjax.nss(
        log_prior, loglik, num_inner_steps=config.num_inner_steps, num_delete=config.num_delete,
        proposal=functools.partial(_proposal, jump_probability=config.jump_probability),
        inner_kernel_params=_live_points_and_factor,
    )


def _live_points_and_factor(rng_key, state, info, params=None) -> dict:
    """The proposal's parameters, recomputed from the live points after every iteration:
    the Cholesky factor of their covariance (BlackJAX's own) and the live points."""
    params = nss.live_covariance_factor(rng_key, state, info, params)
    return {**params, "live": state.particles.position}


def _proposal(init_state_fn, loglikelihood_0, covariance_factor, live, *, jump_probability):
    """Slice directions for `blackjax.nss`: BlackJAX's covariance-shaped hit-and-run
    direction, or, with probability `jump_probability`, the difference of two random live
    points (a differential-evolution direction, ter Braak 2006).

    Once the likelihood contour splits into islands, a covariance direction of two live
    standard deviations hardly ever brackets a second island, so each island keeps the
    points it had and their share drifts away from its prior mass: measured on the K = 3
    Old Faithful mixture (8 runs of 250 points, 16 slice moves), the runs' log Z scattered
    5.9 times more than nested sampling's own error (1.8 nats). A live-point difference
    joins two islands whenever the pair straddles them: with half the moves such jumps the
    excess fell to 1.4×. Only jumps (probability 1) lost the within-island moves and came
    out 0.85 nats low; doubling the jump length did not help (1.8×). The direction
    distribution does not depend on the moving point, so each move leaves the constrained
    prior invariant.
    """

    def proposal_generator(rng_key, position, logdensity_fn):
        del logdensity_fn  # the prior density is the slice's; the contour gates is_valid
        normal_key, pair_key, choice_key = jax.random.split(rng_key, 3)
        normal = jax.random.normal(normal_key, position.shape, position.dtype)
        along_covariance = 2.0 * covariance_factor @ normal / jnp.linalg.norm(normal)
        # two distinct live points, uniformly (not random.choice without replacement, which
        # permutes all N live points on every move)
        first_key, second_key = jax.random.split(pair_key)
        first = jax.random.randint(first_key, (), 0, live.shape[0])
        second = jax.random.randint(second_key, (), 0, live.shape[0] - 1)
        jump = live[first] - live[second + (second >= first)]
        direction = jnp.where(
            jax.random.bernoulli(choice_key, jump_probability), jump, along_covariance
        )

        def slice_fn(t):
            # the slice coordinate t comes in JAX's default float (float64 under x64): keep
            # float32 parameters float32
            point = position + jnp.asarray(t, position.dtype) * direction
            state = init_state_fn(point, loglikelihood_birth=loglikelihood_0)
            return state, state.loglikelihood > loglikelihood_0

        return slice_fn

    return proposal_generator


@functools.partial(jax.jit, static_argnames="config")
def _init(config: _Config, positions, data):
    """The live sets of every run from prior draws of shape (run, live, dim)."""
    return jax.vmap(_algorithm(config, data).init)(positions)


@functools.partial(jax.jit, static_argnames="config")
def _chunk(config: _Config, state, iterations, key, data):
    """`chunk_size` iterations of every run, until every run has met the termination rule.

    The runs step together (one vmapped step per iteration) and stop together, so they all
    have the same number of dead points whatever the chunk size; a run that met the rule
    early just compresses further, adding points of negligible weight.

    Returns the new state and iteration count and, per iteration, the dead points of every
    run, whether the iteration counts, and each run's number of likelihood evaluations.
    """
    _TRACE_COUNT[0] += 1
    step = jax.vmap(_algorithm(config, data).step)

    def body(carry, step_key):
        state, iterations = carry
        going = _going(state.integrator, iterations, config).any()
        new_state, info = step(jax.random.split(step_key, config.num_runs), state)
        state = jax.tree_util.tree_map(
            lambda new, old: jnp.where(going, new, old), new_state, state
        )
        # per slice move: stepping out tests both ends of the initial bracket, then one point
        # per expansion; shrinkage one per proposal (blackjax.mcmc.slice)
        slice_info = info.update_info  # fields (run, num_delete, num_inner_steps)
        evaluations = jnp.sum(2 + slice_info.num_expansions + slice_info.num_shrink, (1, 2))
        return (state, iterations + going), (info.particles, going, going * evaluations)

    keys = jax.random.split(key, config.chunk_size)
    (state, iterations), records = jax.lax.scan(body, (state, iterations), keys)
    return state, iterations, records


def _going(integrator, iterations, config: _Config):
    """Which runs have not met the termination rule Z_live / Z < termination (nor reached
    max_iterations)."""
    gap = integrator.logZ_live - integrator.logZ
    return (gap > config.log_termination) & (iterations < config.max_iterations)


def _merged_evidence(key, live: StateWithLogLikelihood, dead: StateWithLogLikelihood):
    """log Z and the information of all runs merged into one, over simulated prior masses,
    with the merged points and their mean log weights.

    live, dead: particle fields with leading axes (run, point). BlackJAX's `log_weights`
    indexes with a data-dependent boolean mask, so it cannot be jitted; it runs op by op.
    """
    final = finalise(
        NSState(_merge_runs(live)), [NSInfo(_merge_runs(dead), None)], update_info=False
    )
    # only the likelihoods enter the weights: leave out the other fields, so that eager
    # indexing does not compile (and copy) them as well
    contours = final.particles._replace(position=None, logdensity=None)
    log_w = log_weights(key, NSInfo(contours, None), shape=_NUM_VOLUME_SAMPLES)
    log_z, information, mean_log_w = _evidence_moments(log_w, contours.loglikelihood)
    return log_z, information, final.particles.position, mean_log_w


def _merge_runs(particles: StateWithLogLikelihood) -> StateWithLogLikelihood:
    """(run, point, ...) -> (run x point, ...)."""
    return jax.tree_util.tree_map(lambda leaf: leaf.reshape(-1, *leaf.shape[2:]), particles)


@jax.jit
def _evidence_moments(log_w, loglik):
    """Per simulated prior-mass sequence: log Z = log sum_i w_i and the information
    H = sum_i (w_i / Z) log L_i - log Z; and the mean log weight of each point."""
    log_z = logsumexp(log_w, axis=0)
    posterior = jnp.exp(log_w - log_z)
    information = jnp.sum(
        jnp.where(posterior > 0, posterior * loglik[:, None], 0.0), axis=0
    ) - log_z
    return log_z, information, jnp.mean(log_w, axis=1)


def nested_sampling(
    problem: Problem,
    key: jax.Array,
    sampler: NestedSampling = NestedSampling(),
    *,
    progress: bool = True,
) -> NestedRun:
    """log Z by `sampler.num_runs` independent nested slice sampling runs (`blackjax.nss`),
    vmapped.

    Args:
      problem: model and data with a proper prior.
      key: PRNG key (same key, same result).
      sampler: the live points, runs, moves, termination rule and prior draws
        (`NestedSampling`, its fields stated there).
      progress: show the iterations and the live points' evidence share as a progress bar.

    Returns:
      A `NestedRun`.

    Raises:
      InputError (a ValueError): bad arguments (sampler not a `NestedSampling` value), a
        problem without a proper prior, prior draws of the wrong shape or outside the
        prior's support.
      ValueError: the log-likelihood is -inf or NaN at every initial live point.
      RuntimeError: a run did not terminate within max_iterations.
      FloatingPointError: a run's log Z is not finite.
    """
    key = _validate(problem, key, sampler)
    termination = sampler.termination
    num_inner_steps = (max(5, 4 * problem.dim) if sampler.num_inner_steps is None
                       else sampler.num_inner_steps)
    config = _Config(
        problem, sampler.num_live, sampler.num_delete, num_inner_steps, sampler.num_runs,
        float(np.log(termination)), sampler.jump_probability, sampler.chunk_size,
        sampler.max_iterations,
    )
    prior_key, run_key, volume_key = jax.random.split(key, 3)
    data = problem.data
    traces = _TRACE_COUNT[0]
    start = time.perf_counter()
    state = _initial_state(config, prior_key, sampler.prior_sampler, data)
    iterations = jnp.zeros((), jnp.int32)
    chunk = _chunk.lower(config, state, iterations, run_key, data).compile()
    compile_time = time.perf_counter() - start if _TRACE_COUNT[0] > traces else 0.0

    start = time.perf_counter()
    records = []
    with tqdm(desc="nested sampling (iterations)", disable=not progress, leave=False) as bar:
        while np.any(going := np.asarray(_going(state.integrator, iterations, config))):
            state, iterations, record = chunk(
                state, iterations, jax.random.fold_in(run_key, len(records)), data
            )
            records.append(jax.device_get(record))
            bar.update(int(iterations) - bar.n)
            bar.set_postfix_str(
                f"runs going {int(np.sum(going))}/{config.num_runs}, live share of Z "
                f"{_live_share(state.integrator):.1e} -> {termination:.0e}"
            )
    if int(iterations) >= config.max_iterations:
        raise RuntimeError(
            f"nested sampling did not terminate in max_iterations={config.max_iterations} "
            f"iterations (live share of Z {_live_share(state.integrator):.3g}, asked "
            f"{termination}); raise max_iterations or termination"
        )
    dead, evaluations = _dead_points(records, config.num_runs)
    # each run's estimate: BlackJAX's running integral, dead points plus the live share
    per_run = np.asarray(jnp.logaddexp(state.integrator.logZ, state.integrator.logZ_live))
    combined = _merged_evidence(volume_key, state.particles, dead)
    run_time = time.perf_counter() - start
    return _summarise(
        config, per_run, combined, int(iterations),
        config.num_live + np.sum(evaluations, axis=0), compile_time, run_time,
    )


def _dead_points(records, num_runs: int):
    """(dead points, likelihood evaluations per iteration and run) from the chunks' records:
    the dead points of the counted iterations only, arranged (run, iteration x deleted, ...)."""
    dead, counted, evaluations = (
        jax.tree_util.tree_map(lambda *leaves: np.concatenate(leaves), *fields)
        for fields in zip(*records, strict=True)
    )
    # (iteration, run, deleted, ...) -> (run, iteration x deleted, ...)
    dead = jax.tree_util.tree_map(
        lambda leaf: np.swapaxes(leaf[counted], 0, 1).reshape(num_runs, -1, *leaf.shape[3:]),
        dead,
    )
    return dead, evaluations


def _live_share(integrator) -> float:
    """The largest Z_live / Z over the runs (inf before the first point dies)."""
    with np.errstate(over="ignore"):
        return float(np.max(np.exp(np.asarray(integrator.logZ_live - integrator.logZ))))


def _initial_state(config: _Config, key, prior_sampler, data):
    """The live sets of every run from prior draws, checked: the draws' shape, their prior
    density finite, the log-likelihood finite at one of them at least."""
    problem = config.problem
    num = config.num_runs * config.num_live
    sampler = prior_sampler or functools.partial(sample_prior, problem)
    draws = jnp.asarray(sampler(key, num))
    if draws.shape != (num, problem.dim):
        raise InputError(
            f"prior_sampler(key, num) must return shape (num, dim) = ({num}, {problem.dim}), "
            f"got {draws.shape}"
        )
    draws = draws.astype(problem.dtype).reshape(config.num_runs, config.num_live, problem.dim)
    state = _init(config, draws, data)
    bad = ~np.isfinite(np.asarray(state.particles.logdensity).ravel())
    if bad.any():
        raise InputError(
            f"{int(bad.sum())} of {num} prior draws have a non-finite prior density (the "
            f"first at row {int(np.argmax(bad))}): prior_sampler must draw from the prior, in "
            f"unconstrained coordinates"
        )
    if not np.any(np.isfinite(np.asarray(state.particles.loglikelihood))):
        raise ValueError("the log-likelihood is -inf or NaN at every initial live point")
    return state


def _summarise(config, per_run, combined, iterations, evaluations, compile_time, run_time
               ) -> NestedRun:
    """Means and standard deviations over the simulated prior masses; the runs' spread."""
    per_run = np.asarray(per_run, np.float64)
    log_z, information, samples, mean_log_w = (np.asarray(field) for field in combined)
    if not (np.all(np.isfinite(per_run)) and np.all(np.isfinite(log_z))):
        raise FloatingPointError(
            f"nested sampling gave a non-finite log Z (per run: {per_run}): check the "
            f"log-likelihood is finite over the prior's support"
        )
    ns_se = float(np.std(log_z))
    spread = (
        float(np.std(per_run, ddof=1) / np.sqrt(config.num_runs))
        if config.num_runs > 1 else float("nan")
    )
    mean_log_w = mean_log_w.astype(np.float64)
    return NestedRun(
        combined_log_evidence=float(np.mean(log_z)),
        std_error=float(np.nanmax([ns_se, spread])),
        ns_std_error=ns_se,
        spread_std_error=spread,
        log_evidence=per_run,
        log_evidence_std_error=ns_se * np.sqrt(config.num_runs),
        information=float(np.mean(information)),
        num_iterations=iterations,
        num_likelihood_evaluations=np.asarray(evaluations, np.int64),
        samples=samples,
        log_weights=mean_log_w - float(logsumexp(mean_log_w)),
        compile_time=compile_time,
        run_time=run_time,
    )


def _validate(problem, key, sampler) -> jax.Array:
    """Check `nested_sampling`'s arguments (`slt.validation`; the `NestedSampling` value
    checked its own fields); return the key as a typed key."""
    require_problem(problem)
    if not problem.has_prior:
        raise InputError(
            "nested sampling integrates the likelihood over the prior, so it needs a proper "
            "prior: build the Problem with log_prior= in Problem.from_loss and give "
            "NestedSampling(prior_sampler=...)"
        )
    require_key(key)
    require_instance("sampler", sampler, NestedSampling,
                     "a NestedSampling value, e.g. NestedSampling()")
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # a legacy uint32 key
        key = jax.random.wrap_key_data(key)
    return key
