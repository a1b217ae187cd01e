"""Run many SGLD chains on a Problem's (localized, tempered) posterior: vmapped, scanned, sharded.

The target of every chain is

    log pi(w) = -n beta L_b(w) - (gamma / 2) ||w - w_center||^2  [+ log prior(w)],

with L_b the mean negative log-likelihood over the step's minibatch (an unbiased estimate of
L_n). gamma = 0 with the prior included is the plain tempered posterior (WBIC); gamma > 0
around a trained w* is the local posterior of the LLC.

How it is fast (DESIGN.md): chains are `vmap`ped; steps are `lax.scan`ned in chunks of equal
length, compiled ahead of time once per configuration (step size, gamma and n beta are runtime
arguments, one per chain, so sweeping them never recompiles); minibatch indices come from a
keyed permutation evaluated on device (`slt.samplers.shuffle`: shuffled epochs without
replacement, independent across chains, no sort); chains are sharded over all visible devices
when their number divides evenly. Progress is shown between chunks.

Randomness: chain c uses `fold_in(split(key, num_chains)[c], step)`, so the draws do not
depend on chunking or on the number of devices.

Checkpoints (`slt.samplers.checkpoint`): with `checkpoint=path`, the positions, RMSprop state
and divergence flags of every chain, the traces so far and the number of chunks done are
written atomically after every chunk; a run stopped by SIGINT / SIGTERM (or killed) resumes
from there on the next call, to the bitwise same `ChainTrace`. The state after chunk k is the
same computation whether or not the run stopped, since chunks always have `chunk_size` steps
and step t's randomness depends only on (key, chain, t).
"""

from __future__ import annotations

import functools
import os
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from slt.problem import Problem
from slt.samplers.checkpoint import Checkpoint, join_records
from slt.samplers.sgld import SGLDState, mala_log_acceptance, sgld
from slt.samplers.shuffle import epoch_indices

__all__ = ["ChainTrace", "run_chains", "divergence_threshold"]


class ChainTrace(NamedTuple):
    """What `run_chains` records, one row per chain and one column per step.

    loss: L_b(w_t), the minibatch loss at the position before step t (NaN after divergence).
    center_loss: L_b(w_center) on the same minibatch: loss - center_loss is an unbiased estimate
      of L_n(w_t) - L_n(w_center) whose minibatch noise largely cancels.
    log_acceptance: log MALA acceptance of step t, NaN where not computed.
    distance: ||w_t - w_center||.
    diverged_at: first step whose loss was non-finite or exploded, -1 if none.
    final_position: the last position of every chain (flat).
    compile_time, run_time: seconds (compile time 0 when the program was cached).
    """

    loss: np.ndarray
    center_loss: np.ndarray
    log_acceptance: np.ndarray
    distance: np.ndarray
    diverged_at: np.ndarray
    final_position: np.ndarray
    compile_time: float
    run_time: float


def divergence_threshold(dim: int) -> float:
    """A chain diverges when n beta (L_b(w) - L_n(w_center)) exceeds this (or is not finite).

    lambda <= d / 2, so per-draw values of n beta (L_b - L_n(w*)) beyond 100 d are far outside
    anything a stationary chain produces; the floor 1e4 keeps minibatch noise (standard deviation
    n beta sd(loss) / sqrt(b), a few hundred at n = 1e5, b = 256) from tripping it on tiny models.
    """
    return max(100.0 * dim, 1e4)


class _Config(NamedTuple):
    """Everything that changes the compiled program."""

    problem: Problem
    num_chains: int
    chunk_size: int
    batch_size: int
    preconditioner: str | None
    include_prior: bool
    mala_every: int


class _Carry(NamedTuple):
    sgld: SGLDState
    diverged_at: jax.Array


def run_chains(
    problem: Problem,
    center,
    key: jax.Array,
    *,
    num_chains: int,
    num_steps: int,
    step_size,
    gamma,
    nbeta,
    batch_size: int,
    preconditioner: str | None = None,
    include_prior: bool = False,
    mala_every: int = 10,
    chunk_size: int = 500,
    reference_loss: float | None = None,
    progress: bool = True,
    description: str = "SGLD",
    checkpoint: str | os.PathLike | None = None,
) -> ChainTrace:
    """Run `num_chains` SGLD chains for `num_steps` steps from `center` (see module doc).

    Args:
      problem: the model and data.
      center: unconstrained parameters (pytree) where every chain starts; also the centre of
        the localizing term.
      key: PRNG key.
      num_chains, num_steps: sizes.
      step_size, gamma, nbeta: scalars or arrays of shape (num_chains,) (one value per chain).
      batch_size: minibatch size b (<= n); an epoch is floor(n / b) steps.
      preconditioner: None or "rmsprop".
      include_prior: add the model's log prior to the target.
      mala_every: compute the MALA acceptance every this many steps (0: never). Each costs one
        extra gradient on the same minibatch.
      chunk_size: steps per compiled chunk (progress is reported between chunks).
      reference_loss: L_n(center) for divergence detection (computed on the full data if None).
      progress: show a tqdm bar.
      description: the bar's label.
      checkpoint: a file to save progress to after every chunk and resume from (see the
        module doc and `slt.samplers.checkpoint`); None: no checkpoint. `run_time` then counts
        the sampling time of every session.

    Raises:
      slt.samplers.checkpoint.Interrupted: SIGINT or SIGTERM during a checkpointed run, after
        saving (a `KeyboardInterrupt`).
      slt.samplers.checkpoint.CheckpointError: the file at `checkpoint` is from another run.
    """
    num_steps = int(num_steps)
    chunk_size = max(1, min(int(chunk_size), num_steps))
    config = _Config(
        problem,
        int(num_chains),
        chunk_size,
        int(batch_size),
        preconditioner,
        bool(include_prior),
        int(mala_every),
    )
    center_flat = problem.ravel(center)
    dtype = center_flat.dtype
    if reference_loss is None:
        reference_loss = float(problem.loss(center))
    per_chain = [
        jnp.broadcast_to(jnp.asarray(v, dtype), (num_chains,)) for v in (step_size, gamma, nbeta)
    ]
    chain_keys = jax.random.split(key, num_chains)
    store = Checkpoint(
        checkpoint, "run_chains", **config._asdict(), num_steps=num_steps, key=key,
        center=center_flat, step_size=per_chain[0], gamma=per_chain[1], nbeta=per_chain[2],
        reference_loss=float(reference_loss),
    )
    carry, chunks, done, run_time = store.resume(
        _initial_carry(config, center_flat, chain_keys)
    )
    sharding = _chain_sharding(num_chains)
    if sharding is not None:
        carry, chain_keys, per_chain = jax.device_put((carry, chain_keys, per_chain), sharding)
    arguments = (carry, chain_keys, per_chain, center_flat, jnp.asarray(reference_loss, dtype))

    start = time.perf_counter()
    compiled, was_cached = _compile(config, arguments)
    compile_time = 0.0 if was_cached else time.perf_counter() - start

    start, previous_time = time.perf_counter(), run_time
    num_chunks = -(-num_steps // chunk_size)
    with store.catching_signals(), tqdm(
        total=num_chunks * chunk_size,
        initial=done * chunk_size,
        desc=description,
        unit="step",
        disable=not progress,
        leave=False,
    ) as bar:
        for chunk in range(done, num_chunks):
            carry, recorded = compiled(carry, *arguments[1:], jnp.asarray(chunk * chunk_size))
            chunks.append(jax.device_get(recorded))
            bar.update(chunk_size)
            run_time = previous_time + time.perf_counter() - start
            store.save(carry, chunks, units_done=chunk + 1, run_time=run_time,
                       complete=chunk + 1 == num_chunks)
    loss, center_loss, log_acceptance, distance = (
        record[:, :num_steps] for record in join_records(chunks)
    )
    return ChainTrace(
        loss=loss,
        center_loss=center_loss,
        log_acceptance=log_acceptance,
        distance=distance,
        diverged_at=np.asarray(carry.diverged_at),
        final_position=np.asarray(carry.sgld.position),
        compile_time=compile_time,
        run_time=run_time,
    )


def _initial_carry(config: _Config, center_flat, chain_keys) -> _Carry:
    position = jnp.broadcast_to(center_flat, (config.num_chains, center_flat.size))
    return _Carry(
        sgld=jax.vmap(sgld(config.preconditioner).init)(position),
        diverged_at=jnp.full((config.num_chains,), -1, jnp.int32),
    )


def _chain_sharding(num_chains: int):
    """Shard the chain axis over every visible device (None when one device or uneven)."""
    devices = jax.devices()
    if len(devices) == 1 or num_chains % len(devices):
        return None
    return NamedSharding(Mesh(np.array(devices), ("chains",)), PartitionSpec("chains"))


_COMPILED: dict = {}


def _compile(config: _Config, arguments):
    """The chunk program for `config` and these argument shapes/shardings, compiled once."""
    leaves, structure = jax.tree.flatten(arguments)
    signature = (config, structure, tuple((a.shape, a.dtype, a.sharding) for a in leaves))
    if signature in _COMPILED:
        return _COMPILED[signature], True
    program = jax.jit(functools.partial(_run_chunk, config))
    compiled = program.lower(*arguments, jnp.asarray(0)).compile()
    _COMPILED[signature] = compiled
    return compiled, False


def compile_count() -> int:
    """How many chunk programs have been compiled in this process (for recompilation tests)."""
    return len(_COMPILED)


def _run_chunk(
    config: _Config, carry: _Carry, chain_keys, per_chain, center, reference_loss, first_step
):
    problem = config.problem
    steps_per_epoch = problem.n // config.batch_size
    threshold = divergence_threshold(problem.dim)
    algorithm = sgld(config.preconditioner)

    def log_target(flat, batch, gamma, nbeta):
        params = problem.unravel(flat)
        loss = -jnp.mean(problem.loglik(params, batch))
        value = -nbeta * loss - 0.5 * gamma * jnp.sum((flat - center) ** 2)
        if config.include_prior:
            value = value + problem.log_prior(params)
        return value, loss

    def chain_step(state: SGLDState, diverged_at, chain_key, hyper, step):
        step_size, gamma, nbeta = hyper
        first = (step % steps_per_epoch) * config.batch_size
        indices = epoch_indices(jax.random.fold_in(chain_key, 1), step // steps_per_epoch,
                                first + jnp.arange(config.batch_size), problem.n)
        batch = problem.take(indices)
        value_and_grad = jax.value_and_grad(log_target, has_aux=True)
        (log_density, loss), gradient = value_and_grad(state.position, batch, gamma, nbeta)
        new_state, diagonal = algorithm.step(
            jax.random.fold_in(chain_key, step), state, gradient, step_size
        )

        def acceptance():
            def density_and_grad(flat):
                (value, _), grad = value_and_grad(flat, batch, gamma, nbeta)
                return value, grad

            return mala_log_acceptance(
                state.position,
                new_state.position,
                log_density,
                gradient,
                diagonal,
                density_and_grad,
                step_size,
            )

        measure = (config.mala_every > 0) & (step % max(config.mala_every, 1) == 0)
        log_acceptance = jax.lax.cond(measure, acceptance, lambda: jnp.asarray(jnp.nan, loss.dtype))
        exploded = (
            ~jnp.isfinite(loss)
            | (nbeta * (loss - reference_loss) > threshold)
            | ~jnp.all(jnp.isfinite(new_state.position))
        )
        already = diverged_at >= 0
        diverged_at = jnp.where(~already & exploded, step.astype(jnp.int32), diverged_at)
        stopped = diverged_at >= 0
        new_state = jax.tree.map(lambda new, old: jnp.where(stopped, old, new), new_state, state)
        nan = jnp.asarray(jnp.nan, loss.dtype)
        center_loss = -jnp.mean(problem.loglik(problem.unravel(center), batch))
        record = (
            jnp.where(stopped, nan, loss),
            center_loss,
            jnp.where(stopped, nan, log_acceptance),
            jnp.linalg.norm(state.position - center),
        )
        return new_state, diverged_at, record

    def scan_step(carry: _Carry, step):
        state, diverged_at, record = jax.vmap(chain_step, in_axes=(0, 0, 0, 0, None))(
            carry.sgld, carry.diverged_at, chain_keys, per_chain, step
        )
        return _Carry(state, diverged_at), record

    steps = first_step + jnp.arange(config.chunk_size)
    carry, records = jax.lax.scan(scan_step, carry, steps)
    return carry, tuple(record.T for record in records)
