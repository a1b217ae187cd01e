"""NUTS on a Problem's posterior at inverse temperature beta, one beta per chain (NumPyro).

The target of a chain at inverse temperature beta is the tempered posterior

    pi_beta(w) ∝ exp(beta * sum_i log p(y_i | x_i, w)) * prior(w),

in the Problem's unconstrained coordinates (the prior includes the log-Jacobian), so that
beta = 1 is the posterior, beta = 1 / log n the WBIC posterior and beta = 0 the prior. Only the
likelihood is tempered.

How: NumPyro's functional NUTS (`numpyro.infer.hmc.hmc` with `potential_fn_gen`), given the
potential -(beta sum_i log p + log prior) on the flattened parameter vector. beta is a runtime
argument of every chain, so the chains at every temperature run in one compiled program,
run chain by chain on a CPU and, on an accelerator, compiled for `NUTS.num_chains` chains
(`vmap`) and run once per temperature (`NUTS.chain_method`). Vmapped chains advance in
lockstep, each step costing the longest trajectory among them, and the hot chains'
trajectories are far longer (Old Faithful K = 3, 4 chains at each of six temperatures, 150 +
150 steps: 90 leapfrog steps per draw on average at beta = 0.045, up to 1023 at 0.18, 13–22
at 0.7 and 1): all 24 chains in one vmap did 5.5 times the useful leapfrog steps, one group
per temperature 2.5 times. On a CPU, where a vmapped step is not cheaper than the chains'
steps one after another, one chain a program call took half the time (Old Faithful K = 4, 4
chains at beta = 1 and at 1 / log n, 500 + 2000 steps, depth 7, 2 cores: 16.6 s against
32.3 s, 16.5 against 35.9 CPU seconds; benchmarks/RESULTS.md). The groups of a chunk (a
temperature's chains, or single chains) are independent calls of that program, made side by
side, one thread per CPU core (`slt.threads.side_by_side`): bitwise the draws of the
calls made in turn, in about half the time on 2 cores. Warm-up adapts each chain's
step size and diagonal (or dense) mass matrix on its own (NumPyro's windowed adaptation). Steps are
`lax.scan`ned in chunks, compiled once per configuration; progress is shown between chunks.
Working on the potential directly avoids model handlers: it needs no `handlers.scale` (which
rejects beta <= 0) and serves `Problem.from_loss` as well as NumPyro models.

Checkpoints (`slt.samplers.checkpoint`): with `checkpoint=path`, every chain's NUTS state (its
position, adaptation state and PRNG key) and the draws so far are written atomically after
every chunk, and a later call resumes from them. Chunks always have `chunk_size` steps, with
or without a checkpoint, and NUTS carries its randomness in its state, so a resumed run does
the same computation as an uninterrupted one: bitwise the same draws.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc import hmc

from slt import compile_cache
from slt.problem import Params, Problem
from slt.samplers.checkpoint import Checkpoint, join_records
from slt.samplers.runner import ProgressBar, run_units
from slt.threads import side_by_side
from slt.validation import (
    InputError,
    require_in_interval,
    require_instance,
    require_int,
    require_one_of,
    require_params,
    require_positive,
    set_field,
)

__all__ = [
    "NUTS", "NUTSDraws", "sample_nuts", "tempered_potential", "nll_of_draws",
    "pointwise_loglik_of_draws",
]


CHAIN_METHODS = ("auto", "sequential", "vectorized")


@dataclass(frozen=True)
class NUTS:
    """NumPyro's No-U-Turn sampler on the tempered posterior: how `sample_nuts` runs, and the
    posterior sampler of `slt.wbic`, `slt.rlct` and `slt.compare` where NUTS is asked for.

    Every chain targets pi_beta(w) ∝ exp(beta sum_i log p(y_i | x_i, w)) prior(w) in the
    problem's unconstrained coordinates (module doc). `num_warmup` steps adapt the chain's step
    size (dual averaging towards a mean acceptance probability of `target_acceptance`) and its
    mass matrix (diagonal, or dense with `dense_mass`; NumPyro's windowed adaptation), and are
    discarded; `num_samples` draws follow. A trajectory doubles until it makes a U-turn or
    reaches 2^`max_tree_depth` leapfrog steps (Hoffman & Gelman 2014).

    Attributes:
      num_chains: chains at each inverse temperature (four give a useful R-hat).
      num_warmup: adaptation steps per chain (discarded), >= 0.
      num_samples: draws kept per chain, >= 1.
      target_acceptance: the mean acceptance probability the step size adapts towards, in
        (0, 1); raise it (0.9, 0.95) when a run reports divergences.
      max_tree_depth: a trajectory has at most 2^max_tree_depth leapfrog steps.
      dense_mass: adapt a dense mass matrix (else diagonal).
      init_radius: chains start at `problem.init`, uniform on (-init_radius, init_radius) in
        unconstrained coordinates (unless a starting point is given).
      chunk_size: steps per compiled chunk; progress is reported and the checkpoint written
        between chunks (the draws do not depend on it).
      chain_method: "sequential" (each chain advanced by its own call of a one-chain
        program, the calls made side by side, one thread per core), "vectorized" (the
        chains of one temperature in one `vmap`ped program, in lockstep: each step costs
        the longest of their trajectories) or "auto" (the default): sequential on a CPU,
        where it measured twice as fast, vectorized on an accelerator, where the chains of
        one call run side by side (module doc). Both run the same chains from the same keys,
        but their rounding differs, so a chain's draws agree between the two only at first
        and then part (the dynamics is chaotic): the same distribution, not the same
        numbers.

    Example:
      >>> NUTS(num_chains=2, num_warmup=500)
      NUTS(num_chains=2, num_warmup=500, num_samples=1000, target_acceptance=0.8, \
max_tree_depth=10, dense_mass=False, init_radius=2.0, chunk_size=250, chain_method='auto')
      >>> NUTS(num_samples=0)
      Traceback (most recent call last):
      slt.validation.InputError: num_samples must be an integer >= 1, got 0

    References:
      Hoffman & Gelman, "The No-U-Turn sampler", JMLR 15:1593–1623, 2014.
    """

    name: ClassVar[str] = "nuts"  # how results name the sampler (`WBICResult.sampler`)

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_acceptance: float = 0.8
    max_tree_depth: int = 10
    dense_mass: bool = False
    init_radius: float = 2.0
    chunk_size: int = 250
    chain_method: str = "auto"

    def __post_init__(self):
        require_one_of("chain_method", self.chain_method, CHAIN_METHODS)
        for name, minimum in (("num_chains", 1), ("num_warmup", 0), ("num_samples", 1),
                              ("max_tree_depth", 1), ("chunk_size", 1)):
            set_field(self, name, require_int(name, getattr(self, name), minimum=minimum))
        set_field(self, "target_acceptance",
             require_in_interval("target_acceptance", self.target_acceptance, 0.0, 1.0))
        set_field(self, "init_radius", require_positive("init_radius", self.init_radius))
        if not isinstance(self.dense_mass, bool | np.bool_):
            raise InputError(f"dense_mass must be True or False, got {self.dense_mass!r}")
        set_field(self, "dense_mass", bool(self.dense_mass))

    @property
    def vectorized(self) -> bool:
        """Whether the chains of one temperature run in one vmapped program (`chain_method`;
        "auto": on an accelerator, not on a CPU)."""
        if self.chain_method == "auto":
            return jax.default_backend() != "cpu"
        return self.chain_method == "vectorized"


class NUTSDraws(NamedTuple):
    """Post-warm-up draws of `sample_nuts`, one row per chain.

    positions: (chain, draw, dim) unconstrained parameters, flattened (`Problem.ravel`).
    nll: (chain, draw) n L_n(w) = -sum_i log p(y_i | x_i, w) at each draw (full data).
    betas: (chain,) the inverse temperature of each chain.
    diverging: (chain, draw) whether the trajectory of the draw diverged.
    num_steps: (chain, draw) leapfrog steps of the draw's trajectory.
    accept_prob: (chain, draw) NUTS mean acceptance probability of the trajectory.
    step_size: (chain,) the adapted step size.
    compile_time, run_time: seconds (compile time 0 when the program was cached).
    """

    positions: np.ndarray
    nll: np.ndarray
    betas: np.ndarray
    diverging: np.ndarray
    num_steps: np.ndarray
    accept_prob: np.ndarray
    step_size: np.ndarray
    compile_time: float
    run_time: float


def tempered_potential(problem: Problem, beta, data=None):
    """U_beta(w) = -(beta sum_i log p(y_i | x_i, w) + log prior(w)) on flat parameters.

    `data` (default: the problem's own) is what the sum runs over; compiled programs pass it
    as an argument. A non-finite value (a parameter outside the region where the model is
    defined) becomes +inf, which NUTS treats as a divergence and never accepts.
    """
    data = problem.data if data is None else data

    def potential(flat):
        params = problem.unravel(flat)
        value = -(beta * jnp.sum(problem.loglik(params, data)) + problem.log_prior(params))
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    return potential


def nll_of_draws(problem: Problem, flat_draws, batch_size: int = 256) -> jax.Array:
    """n L_n(w) = -sum_i log p(y_i | x_i, w) for every row of `flat_draws` (shape (..., dim))."""
    return _map_draws("nll", problem, flat_draws, batch_size)


def pointwise_loglik_of_draws(problem: Problem, flat_draws, batch_size: int = 256) -> jax.Array:
    """log p(y_i | x_i, w) for every row of `flat_draws`: shape (..., n)."""
    return _map_draws("pointwise", problem, flat_draws, batch_size)


def _per_draw(kind: str, problem: Problem):
    """`(flat, data) -> value` of `kind`: "nll" (n L_n) or "pointwise" (the n log-likelihoods)."""

    def pointwise(flat, data):
        return problem.loglik(problem.unravel(flat), data)

    return pointwise if kind == "pointwise" else lambda flat, data: -jnp.sum(pointwise(flat, data))


def _map_draws(kind: str, problem: Problem, flat_draws, batch_size: int) -> jax.Array:
    """`_per_draw(kind)` over the rows of (..., dim) draws, `batch_size` rows at a time
    (`lax.map`), so memory stays O(batch_size * n); compiled once per problem, kind and shape,
    with the data as an argument (`slt.compile_cache`)."""
    flat_draws = jnp.asarray(flat_draws)
    rows = flat_draws.reshape(-1, problem.dim)
    batch = min(batch_size, rows.shape[0])
    per_draw = _per_draw(kind, problem)

    def over_rows(rows, data):
        return jax.lax.map(lambda flat: per_draw(flat, data), rows, batch_size=batch)

    program = compile_cache.program_for(
        problem, ("map draws", kind, rows.shape, rows.dtype, batch), over_rows, rows,
        problem.data)
    values = program(rows, problem.data)
    return values.reshape(*flat_draws.shape[:-1], *values.shape[1:])


class _Config(NamedTuple):
    """Everything that changes the compiled program."""

    problem: Problem
    num_warmup: int
    dense_mass: bool
    target_accept_prob: float
    max_tree_depth: int


def _compiled(config: _Config, num_chains: int, chunk_length: int):
    """((init, run_chunk, compile seconds), whether compiled before) for `config` and
    `num_chains` chains: once per configuration, kept with the problem (`slt.compile_cache`)."""
    return compile_cache.compiled_for(
        config.problem, ("nuts", config._replace(problem=None), num_chains, chunk_length),
        lambda: _compile(config, num_chains, chunk_length),
    )


def _compile(config: _Config, num_chains: int, chunk_length: int):
    """Compiled (init, run_chunk, compile seconds) for `config` and `num_chains` chains.

    `init(keys, starts, betas, data)` sets every chain up; `run_chunk(state, betas, data)`
    advances every chain `chunk_length` steps and returns the new state and the per-step
    record. The data are an argument (NumPyro passes `model_args=(beta, data)` to the
    potential), not constants of the programs. NumPyro's `init_kernel` configures the closure
    that `sample_kernel` uses, so the two are built together here, and `run_chunk`'s function
    traces `init` (abstractly) before it runs a chain: either may come from the traced store
    (`slt.compile_cache.program_for`) without the other being traced.
    """
    problem = config.problem
    init_kernel, sample_kernel = hmc(
        potential_fn_gen=functools.partial(tempered_potential, problem), algo="NUTS"
    )

    def init_chain(key, flat, beta, data):
        return init_kernel(
            flat,
            config.num_warmup,
            dense_mass=config.dense_mass,
            target_accept_prob=config.target_accept_prob,
            max_tree_depth=config.max_tree_depth,
            model_args=(beta, data),
            rng_key=key,
        )

    def run_chain(state, beta, data):
        def step(state, _):
            state = sample_kernel(state, model_args=(beta, data))
            record = (
                state.z,
                state.diverging,
                state.num_steps,
                state.accept_prob,
                state.adapt_state.step_size,
                # n L_n at the draw: one likelihood beside the step's dozens of gradients,
                # where a separate program over the draws compiled and ran once more
                -jnp.sum(problem.loglik(problem.unravel(state.z), data)),
            )
            return state, record

        return jax.lax.scan(step, state, None, length=chunk_length)

    start = time.perf_counter()
    keys = jax.ShapeDtypeStruct((num_chains,), jax.random.key(0).dtype)
    starts = jax.ShapeDtypeStruct((num_chains, problem.dim), problem.dtype)
    betas = jax.ShapeDtypeStruct((num_chains,), problem.dtype)
    data = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), problem.data)
    init_chains = _over_chains(init_chain, num_chains, in_axes=(0, 0, 0, None))
    run_chains = _over_chains(run_chain, num_chains, in_axes=(0, 0, None))

    def run_configured(state, betas, data):
        jax.eval_shape(init_chains, keys, starts, betas, data)  # configures sample_kernel
        return run_chains(state, betas, data)

    signature = ("nuts programs", config._replace(problem=None), num_chains, chunk_length)
    init = compile_cache.program_for(problem, (*signature, "init"), init_chains, keys, starts,
                                     betas, data, compile="brief", keep=False,
                                     traced_from=(config, "init"))
    state = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), init.out_info)
    run_chunk = compile_cache.program_for(problem, (*signature, "chunk"), run_configured,
                                          state, betas, data, keep=False,
                                          traced_from=(config, "chunk"))
    return init, run_chunk, time.perf_counter() - start


def _over_chains(chain_fn, num_chains: int, in_axes: tuple):
    """`chain_fn` of one chain, applied over a leading chain axis of the arguments whose
    `in_axes` entry is 0 (the others shared): `jax.vmap` for several chains; for one, the
    chain traced alone and the axis taken off and put back.

    A vmapped `while_loop` with a per-chain condition (NUTS's trajectory and tree doubling)
    runs while any chain runs and selects every step over its whole state, and tracing it
    batches the loop's body until its axes settle; a single chain needs neither. Measured
    (Old Faithful, 4 chains at beta = 1 and 1 / log n, 500 + 2000 steps, one chain a call, 2
    cores): the programs traced, lowered and loaded from the persistent cache in 0.6 s
    against 2.0 s (K = 2), and K = 4's whole `sample_nuts` took 22.3 s against 29.7 s. The
    same steps, rounded as XLA compiles each program: a chain's draws agree with the vmapped
    program's at first and may part later (benchmarks/RESULTS.md, sixteenth session)."""
    if num_chains > 1:
        return jax.vmap(chain_fn, in_axes=in_axes)

    def one_chain(*args):
        args = [jax.tree.map(lambda leaf: leaf[0], arg) if axis == 0 else arg
                for arg, axis in zip(args, in_axes, strict=True)]
        return jax.tree.map(lambda leaf: leaf[None], chain_fn(*args))

    return one_chain


def sample_nuts(
    problem: Problem,
    key: jax.Array,
    betas,
    sampler: NUTS = NUTS(),
    *,
    init: Params | None = None,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> NUTSDraws:
    """Run `sampler.num_chains` NUTS chains at each inverse temperature in `betas` on the
    tempered posterior pi_beta.

    Args:
      problem: model and data; needs a proper prior (`problem.has_prior`).
      key: PRNG key (starting points and chains).
      betas: inverse temperatures, a number or shape (B,), each >= 0 (beta = 0 samples the
        prior); the B x num_chains chains, those of one beta adjacent
        (`np.repeat(betas, num_chains)`), run in groups (a beta's chains, or one chain:
        `sampler.chain_method`) side by side, every chunk, by the same compiled program
        (module doc).
      sampler: the chains' length and NUTS's settings (`NUTS`, its fields stated there).
      init: a starting point (unconstrained pytree) for every chain, or a (chains, dim) array
        of flat starting points (`Problem.ravel`), one per chain in the order above; by
        default each chain starts at its own `problem.init` point (uniform on
        (-init_radius, init_radius)).
      progress: show a progress bar.
      checkpoint: a file to save progress to after every chunk and resume from (module doc,
        `slt.samplers.checkpoint`); None: no checkpoint. `run_time` then counts the sampling
        time of every session.

    Returns:
      `NUTSDraws` with the post-warm-up draws and the per-draw n L_n(w), one row per chain.

    Raises:
      InputError (a ValueError): sampler not a `NUTS` value, init not a finite point of the
        problem.
      ValueError: bad arguments, no proper prior, or a non-finite potential at a start point.
      slt.samplers.checkpoint.Interrupted: a KeyboardInterrupt during a checkpointed run (the
        chunks before the one in progress are saved; `slt.samplers.runner`).
      slt.samplers.checkpoint.CheckpointError: the file at `checkpoint` is from another run.

    Example:
      >>> beta = 1 / np.log(problem.n)                   # four chains at WBIC's temperature
      >>> draws = sample_nuts(problem, key, beta, NUTS(num_warmup=100, num_samples=100),
      ...                     progress=False)
      >>> draws.nll.shape, round(float(draws.nll.mean()), 1)   # (chain, draw); WBIC
      ((4, 100), 141.1)
    """
    require_instance("sampler", sampler, NUTS, "a NUTS value, e.g. NUTS()")
    betas = np.repeat(np.asarray(betas, dtype=np.float64).reshape(-1), sampler.num_chains)
    _validate(problem, betas)
    num_warmup, num_samples = sampler.num_warmup, sampler.num_samples
    num_chains = betas.size
    if _per_chain(init, problem):
        init = np.asarray(init)
        if init.shape != (num_chains, problem.dim) or not np.all(np.isfinite(init)):
            raise InputError(f"init as an array must be finite with shape (chains, dim) = "
                             f"{(num_chains, problem.dim)}, got {init.shape}")
    elif init is not None:
        require_params(problem, init, "init")
    config = _Config(problem, num_warmup, sampler.dense_mass, sampler.target_acceptance,
                     sampler.max_tree_depth)
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # a legacy uint32 key
        key = jax.random.wrap_key_data(key)
    init_key, chain_key = jax.random.split(key)
    starts = _starting_points(problem, init_key, num_chains, init, sampler.init_radius)
    total = num_warmup + num_samples
    chunk_length = min(sampler.chunk_size, total)
    # One group per temperature (vectorized: one program compiled for `sampler.num_chains`
    # chains, a group's step costing its slowest trajectory) or per chain (sequential): module
    # doc.
    group = sampler.num_chains if sampler.vectorized else 1
    (init_fn, run_chunk, compile_time), compiled_before = _compiled(config, group,
                                                                     chunk_length)
    if compiled_before:
        compile_time = 0.0
    store = Checkpoint(
        checkpoint, "sample_nuts", **config._asdict(), betas=betas, num_samples=num_samples,
        chunk_length=chunk_length, key=chain_key, starts=starts, group=group,
        records=", ".join(_RECORDS),  # a checkpoint of an older record is refused by name
    )
    chain_betas = np.asarray(betas, problem.dtype)
    chain_keys = jax.random.split(chain_key, num_chains)
    groups = [slice(start, start + group) for start in range(0, num_chains, group)]
    initial = tuple(init_fn(chain_keys[chains], starts[chains], chain_betas[chains], problem.data)
                    for chains in groups)
    _check_starts(initial)
    resumed = store.resume(initial)

    group_betas = [chain_betas[chains] for chains in groups]

    def run(state, betas):  # one group's chunk, its record copied to the host
        state, record = run_chunk(state, betas, problem.data)
        return state, tuple(np.asarray(part) for part in record)

    def advance(states, _):
        done = side_by_side([functools.partial(run, state, betas)
                             for state, betas in zip(states, group_betas, strict=True)])
        records = zip(*(record for _, record in done), strict=True)
        return (tuple(state for state, _ in done),
                tuple(np.concatenate(parts) for parts in records))

    # Every chunk has the same length (one compiled program); the surplus steps of the last
    # chunk are dropped.
    num_chunks = -(-total // chunk_length)
    state, chunks, _, run_time = run_units(
        advance, resumed, store,
        ProgressBar(total, lambda _, chunks: min(chunks * chunk_length, total), "nuts",
                    show=progress),
        num_units=num_chunks,
    )
    positions, diverging, num_steps, accept_prob, step_size, nll = (
        record[:, num_warmup:total] for record in join_records(chunks)
    )
    nll = np.asarray(nll, dtype=np.float64)
    return NUTSDraws(
        positions=positions,
        nll=nll,
        betas=betas,
        diverging=diverging.astype(bool),
        num_steps=num_steps,
        accept_prob=accept_prob,
        step_size=step_size[:, -1],
        compile_time=compile_time,
        run_time=run_time,
    )


# What each chunk records per chain and step (the order of `run_chain`'s record).
_RECORDS = ("position", "diverging", "num_steps", "accept_prob", "step_size", "nll")


def _check_starts(initial_states) -> None:
    """A ValueError naming the chains whose tempered log density is not finite at their
    starting point (read from the chains' initial states, which hold the potential there:
    NUTS's initialisation ends on such a start, with an infinite potential)."""
    potentials = np.concatenate([np.asarray(state.potential_energy).reshape(-1)
                                 for state in initial_states])
    bad = ~np.isfinite(potentials)
    if bad.any():
        raise ValueError(
            f"the log density is not finite at the starting point of chain(s) "
            f"{np.flatnonzero(bad).tolist()}: give `init` inside the model's support"
        )


def _per_chain(init, problem: Problem) -> bool:
    """Whether `init` is a (chains, dim) array of flat starting points (more than one chain:
    a single point's parameters have dim numbers in all)."""
    return (isinstance(init, np.ndarray | jax.Array) and np.ndim(init) == 2
            and np.shape(init)[1] == problem.dim and np.size(init) != problem.dim)


def _starting_points(problem: Problem, key, num_chains: int, init, init_radius: float):
    if _per_chain(init, problem):
        return np.asarray(init, problem.dtype)
    if init is not None:
        flat = np.asarray(problem.ravel(init), problem.dtype)
        return np.broadcast_to(flat, (num_chains, problem.dim))
    return np.asarray(problem.random_starts(key, num_chains, init_radius))


def _validate(problem, betas):
    """Check `sample_nuts`'s problem and inverse temperatures (the `NUTS` value checked its
    own fields)."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be an slt.Problem, got {type(problem).__name__}")
    if not problem.has_prior:
        raise ValueError(
            "sampling a tempered posterior needs a proper prior: pass log_prior= to "
            "Problem.from_loss"
        )
    if betas.size == 0:
        raise ValueError("betas is empty: give at least one inverse temperature")
    if not np.all(np.isfinite(betas) & (betas >= 0)):
        raise ValueError(f"every beta must be finite and >= 0, got {betas}")
