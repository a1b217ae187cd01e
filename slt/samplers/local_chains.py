"""Run many chains on a Problem's (localized, tempered) posterior: vmapped, scanned, sharded.

The chains step with SGLD or SGHMC on minibatches (`slt.samplers.SGLD`, `SGHMC`: SGHMC with
control variates takes its minibatch gradients relative to the centre, grad L_n at the
centre given with the targets: `ChainTargets.center_gradient`) or with an exact sampler on
the full data (`MALA`, `HMC`: `slt.samplers.exact`).

The target of every chain is

    log pi(w) = -n beta L_b(w) - (gamma / 2) ||w - w_center||^2  [+ log prior(w)],

with L_b the mean negative log-likelihood over the step's minibatch (an unbiased estimate of
L_n). gamma = 0 with the prior included is the plain tempered posterior (WBIC); gamma > 0
around a trained w* is the local posterior of the LLC.

How it is fast (DESIGN.md): chains are `vmap`ped; steps are `lax.scan`ned in chunks of equal
length, compiled ahead of time once per configuration (step size, gamma and n beta are runtime
arguments, one per chain, so sweeping them never recompiles; so is the run's length: a chunk
runs the steps before the run's end and skips the rest); minibatch indices come from a
keyed permutation evaluated on device (`slt.samplers.shuffle`: shuffled epochs without
replacement, independent across chains, no sort); chains are sharded over all visible devices
when their number divides evenly, across processes too under multi-controller JAX
(`jax.distributed.initialize()` in every process, the same call with the same key in each:
every process places the shards of its own devices and gathers the whole record; checkpoint
files are refused there, as one process writes them). Progress is shown between chunks.

Step-size bias (`extrapolate=True`). SGLD's stationary law is off by O(eps): the
discretisation, and the minibatch gradient noise, which heats the chains in proportion to eps.
With `extrapolate`, every chain runs with a twin at eps / 2 (same gamma and n beta, its own
random stream) and the recorded losses are the Richardson combination
2 x_{eps/2}(t) - x_eps(t), whose expectation is free of the O(eps) term. The price: twice the
work, and a larger variance per draw (the two chains are independent, so about 5 times that of
one chain at eps / 2).

Several centres, restricted chains. One run can hold chains around several centres (the
checkpoints of a training run, `slt.llc_trajectory`) and chains that move only some
coordinates (a 0/1 mask per chain: the weight-refined LLC, `slt.LocalPosterior(restrict_to=...)`,
`slt.llc_table`); the centres, the chain-to-centre map and the masks are arguments of the
compiled program, so every centre and every restriction of a model shares one program.

Observables (`observables=`): per-example losses l_i(w) = -log p(z_i | w) of given examples
(training examples, a query set, or both), evaluated at the chains' positions every `every`-th
step from `start` (the end of the warmup) and summarised on device, per chain, as streaming
means, variances and co-moments (`slt.samplers.moments`: Welford's update in the scan's carry):
memory O(p q) per chain and chunk for p and q observables, never one value per draw and
example: each chunk's summaries are one block of consecutive draws per chain (they start empty
in every chunk and are returned with its record), the batches of the estimators' batch-means
standard errors (`slt.estimators.local.observed`). Each
side may be a linear readout of the losses (a matrix R: R l, e.g. the mean loss of a subset).
The step counter decides when to observe; it is the same for every chain, so the observation
is a `lax.cond` outside the vmap over chains and costs nothing at the other steps (a
per-chain predicate would become a select that evaluates the losses at every step); a
diverged chain stops adding draws. The blocks are part of the records, so checkpoints save
and resume them. Without observables the program is the one it was before (bitwise the same
numbers).

Randomness: chain c uses `fold_in(split(key, num_chains)[c], step)`, so the draws do not
depend on chunking or on the number of devices. With per-part keys (`ChainTargets.keys`)
the c-th chain of part p uses `split(keys[p], chains per part)[c]` and its start offset is
drawn from `keys[p]` alone: a part's chains are then the same whatever parts run beside it,
and a part given the run's own key is the run of that part alone (`llc_table`,
`llc_trajectory`: their numbers equal separate calls with the same key).

Checkpoints (`slt.samplers.checkpoint`): with `checkpoint=path`, the positions, RMSprop state
and divergence flags of every chain, the traces so far and the number of chunks done are
written atomically after every chunk; a run stopped by Ctrl-C (or killed) resumes
from there on the next call, to the bitwise same `ChainTrace`. The state after chunk k is the
same computation whether or not the run stopped, since chunks always have `chunk_size` steps
and step t's randomness depends only on (key, chain, t).
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from slt import compile_cache, flat_random
from slt.precision import at_full_precision
from slt.problem import Problem
from slt.samplers import moments
from slt.samplers.checkpoint import Checkpoint, join_records
from slt.samplers.config import (
    SGHMC,
    SGLD,
    RunPlan,
    Sampler,
    StochasticGradient,
    uses_control_variates,
)
from slt.samplers.exact import (
    MEASURE_EVERY,
    ExactState,
    exact_initial_state,
    exact_step,
    restricted_logdensity,
    temperature_terms,
)
from slt.samplers.run_length import (
    EXACT_ADAPTATION,
    RunLength,
    decide_run_length,
    trace_statistics,
)
from slt.samplers.runner import ProgressBar, run_units
from slt.samplers.sghmc import SGHMCState, sghmc
from slt.samplers.sgld import SGLDKernel, SGLDState, mala_log_acceptance, sgld
from slt.samplers.shuffle import epoch_indices

__all__ = [
    "ChainTargets", "ChainTrace", "Observables", "run_chains", "divergence_threshold",
    "configurational_temperature",
    "virial_temperature",
]

# The starting offsets (`ChainTargets.start_scale`) are drawn from fold_in(key, START_STREAM).
START_STREAM = 2**31 - 2


class Observables(NamedTuple):
    """What `run_chains` observes along the chains (module doc): the streaming moments of
    x = R_x l_X(w) and y = R_y l_Y(w), l_X(w) the per-example losses -log p(z | w) of the
    examples `x_examples` (a batch in the problem's data format, `Problem.take`) and l_Y those
    of `y_examples`.

    x_examples: the first set of examples (n_x of them).
    y_examples: the second set (n_y), or None: then l_Y = l_X (one evaluation; with no
      readouts the summary holds the auto co-moment of l_X, n_x by n_x).
    x_readout, y_readout: None (the losses themselves) or a matrix of shape (p, n_x), resp.
      (q, n_y): the observables are the linear combinations R l (subset means, ...).
    every: observe every this many steps from the end of the run's warmup (observations are
      draws of the local posterior).
    """

    x_examples: dict
    y_examples: dict | None = None
    x_readout: np.ndarray | None = None
    y_readout: np.ndarray | None = None
    every: int = 1


class ChainTrace(NamedTuple):
    """What `run_chains` records, one row per chain and one column per step.

    loss: L_b(w_t), the minibatch loss at the position before step t (SGHMC: after it, where
      the step evaluates its gradient) (NaN after divergence).
    center_loss: L_b(w_center) on the same minibatch: loss - center_loss is an unbiased estimate
      of L_n(w_t) - L_n(w_center) whose minibatch noise largely cancels. It is the mean over the
      minibatch of the per-example losses at w_center, computed once on the full data before
      sampling, so pairing costs a gather per step, not a forward pass.
    log_acceptance: log MALA acceptance of step t, NaN where not computed.
    gradient_product, laplacian: the two halves of the configurational temperature at w_t
      (`configurational_temperature`), measured with the MALA acceptance, NaN elsewhere:
      grad U_b(w_t) . grad U_b'(w_t) on two independent minibatches (unbiased for
      |grad U(w_t)|^2) and v' Hess U_b'(w_t) v with v a Rademacher vector (unbiased for the
      Laplacian of U at w_t), U = -log pi.
    distance: ||w_t - w_center||.
    virial: (w_t - w_center) . grad U_b(w_t), every step, on the step's minibatch (an exact
      sampler's: on the full data), unbiased for (w_t - w_center) . grad U(w_t); its mean over
      the local posterior is the number of sampled coordinates (`virial_temperature`).
    center_full_loss: L_n(w_center), the mean of those per-example losses over the full data
      (the reference of the divergence test, and L_n(w*) for the estimators); with several
      centres an array, one value per centre.
    diverged_at: first step whose loss was non-finite or exploded, -1 if none.
    final_position: the last position of every chain (flat; with `extrapolate`, the eps / 2
      twin's).
    compile_time, run_time: seconds (compile time 0 when the program was cached).
    moments: with `observables`, the `slt.samplers.moments.Moments` of every chain and chunk
      that observed (leading axes: chain, chunk; host arrays; the warmup's chunks have none):
      one block of consecutive draws each, empty (count 0) after a chain diverged (module
      doc); `slt.samplers.moments.combine(moments, axis=1)` is every chain's summary. None
      otherwise.
    step_size: an exact sampler's step size per chain after its warmup; None for SGLD.
    warmup_steps, kept_steps, stop_reason: per chain, the steps of its part's warmup, the
      draws kept after it, and why the run stopped there (`slt.samplers.run_length`: the
      plan's numbers, or what an "auto" length decided).
    """

    loss: np.ndarray
    center_loss: np.ndarray
    log_acceptance: np.ndarray
    gradient_product: np.ndarray
    laplacian: np.ndarray
    distance: np.ndarray
    virial: np.ndarray
    center_full_loss: float
    diverged_at: np.ndarray
    final_position: np.ndarray
    compile_time: float
    run_time: float
    moments: moments.Moments | None = None
    step_size: np.ndarray | None = None
    warmup_steps: np.ndarray | None = None
    kept_steps: np.ndarray | None = None
    stop_reason: np.ndarray | None = None


def divergence_threshold(dim: int) -> float:
    """A chain diverges when n beta (L_b(w) - L_n(w_center)) exceeds this (or is not finite).

    lambda <= d / 2, so per-draw values of n beta (L_b - L_n(w*)) beyond 100 d are far outside
    anything a stationary chain produces; the floor 1e4 keeps minibatch noise (standard deviation
    n beta sd(loss) / sqrt(b), a few hundred at n = 1e5, b = 256) from tripping it on tiny models.
    """
    return max(100.0 * dim, 1e4)


def configurational_temperature(gradient_product, laplacian) -> tuple[float, float]:
    """T = E[|grad U|^2] / E[Laplacian U] over the chains' draws, and its standard error.

    For any smooth density pi ∝ exp(-U), integration by parts gives E_pi[|grad U|^2] =
    E_pi[Laplacian U], so T = 1 exactly when the chains sample pi. SGLD samples a law that is
    off by O(eps), through discretisation and minibatch-gradient noise; both make the chains
    run hot (T > 1), and T - 1 measures it from the chains themselves. For a Gaussian target
    with precisions h_i, Langevin with step eps has T = sum h_i a_i / sum h_i with
    a_i = 1 / (1 - eps h_i / 4) the per-direction inflation of lambda_hat, so lambda_hat / T <=
    lambda <= lambda_hat (Chebyshev's sum inequality) and T - 1 bounds the relative bias of
    lambda_hat from above. Measured on a one-hidden-layer tanh network at its most singular
    point, where lambda_hat is biased most: T - 1 = 2.2, 1.6, 1.3, 1.15 while lambda_hat was
    65%, 32%, 18%, 6% above the exact value (NUTS) at eps = 1.7e-3, 8.5e-4, 4e-4, 2e-4.

    Args:
      gradient_product, laplacian: arrays of the per-draw unbiased estimates (NaN entries,
        draws where nothing was measured, are ignored).

    Returns:
      (T, standard error by the delta method over the measured draws, treated as
      independent); (nan, nan) when fewer than two draws were measured or the mean Laplacian
      is not positive.
    """
    measured = np.isfinite(gradient_product) & np.isfinite(laplacian)
    numerator, denominator = gradient_product[measured], laplacian[measured]
    if numerator.size < 2 or not denominator.mean() > 0:
        return float("nan"), float("nan")
    temperature = numerator.mean() / denominator.mean()
    residual = numerator - temperature * denominator
    std_error = residual.std(ddof=1) / np.sqrt(numerator.size) / denominator.mean()
    return float(temperature), float(std_error)


def virial_temperature(virial, num_coordinates: int) -> tuple[float, float]:
    """T_v = E[(w - w*) . grad U(w)] / k over the chains' draws, and its standard error.

    The virial theorem of the local posterior pi ∝ exp(-U) on the k sampled coordinates:
    integrating div((w - w*) pi) = 0 gives E_pi[(w - w*) . grad U] = k, so T_v = 1 exactly
    when the chains sample pi, whatever its shape. Unlike the configurational temperature,
    which is local (gradients against curvature where the chains are), the virial weighs
    every direction by how far the chains have gone along it: where L_n is flat (a valley
    of minima through w*, held only by the localizer gamma), the share of a direction is
    gamma E[x^2] = 1 only once the chains have spread to its width 1 / sqrt(gamma). Chains
    that have not (SGLD diffuses along a flat direction in about 1 / (gamma eps) steps) have
    T_v < 1 while their configurational temperature is 1 (measured on reduced-rank
    regression at its true parameter, benchmarks/RESULTS.md).

    Args:
      virial: (chain, draw) per-draw unbiased estimates (w_t - w*) . grad U_b(w_t) of the
        chains that did not diverge (`ChainTrace.virial`).
      num_coordinates: k, the number of sampled coordinates.

    Returns:
      (T_v, standard error sd / sqrt(ESS) / k, `slt.samplers.run_length.trace_statistics`
      over the chains); (nan, nan) without a chain or with fewer than four draws per chain.
    """
    virial = np.asarray(virial, dtype=float)
    if virial.shape[0] == 0 or virial.shape[1] < 4:
        return float("nan"), float("nan")
    mean, std_error, _, _ = trace_statistics(virial)
    return float(mean / num_coordinates), float(std_error / num_coordinates)


class ChainTargets(NamedTuple):
    """What each part's chains sample, one entry per part (`run_chains` runs
    `plan.num_chains` chains of every part, the parts' chains one after another).

    step_size: the step size of each part's chains (array (P,)): SGLD's eps; an exact
      sampler's fixed step, or with its step_size="auto" the first guess its warmup adapts.
    gamma, nbeta: the local posterior's localization strength and n beta, per part.
    include_prior: add the model's log prior to every target.
    center_of_part: with several centres, the index of each part's centre in `center`
      (integers (P,)); None: one centre.
    mask: None (every coordinate moves), or booleans (P, d) over the flat parameters: the
      coordinates each part's chains sample, the others held at the centre.
    start_scale: None (every chain starts at its centre), or standard deviations (P, d) over
      the flat parameters: each chain starts at its centre plus independent N(0, scale^2)
      offsets in the coordinates it samples (`slt.estimators.local.center`), drawn from
      `fold_in(key, START_STREAM)`, a stream apart from the chains' own.
    keys: None (the run's key is split over all chains of all parts), or one PRNG key per
      part (a key array (P,)): each part's chains and start offsets draw from its own key
      only, as if it ran alone (module doc, "Randomness").
    center_gradient: grad L_n at each centre on the full data, flat (C, d): one row per
      centre of `center` (one row for one centre), as `slt.estimators.local.center.
      measure_center` finds it (`CenterMeasurements.gradient`). Needed by SGHMC's control
      variates (`slt.samplers.SGHMC`), unused by the other samplers; None: not given.
    """

    step_size: np.ndarray
    gamma: np.ndarray
    nbeta: np.ndarray
    include_prior: bool = False
    center_of_part: np.ndarray | None = None
    mask: np.ndarray | None = None
    start_scale: np.ndarray | None = None
    keys: jax.Array | None = None
    center_gradient: np.ndarray | None = None

    @property
    def num_parts(self) -> int:
        return int(np.size(self.step_size))


class _Config(NamedTuple):
    """Everything that changes the compiled program."""

    problem: Problem
    sampler: Sampler  # its step size, a runtime value, left out (`_program_sampler`)
    num_chains: int
    chunk_size: int
    batch_size: int
    include_prior: bool
    num_warmup: int  # exact samplers' adaptation schedule (0 for SGLD: not in its program)


class _Carry(NamedTuple):
    chain: SGLDState | SGHMCState | ExactState
    diverged_at: jax.Array
    observed: moments.Moments | None = None  # with observables: the per-chain summaries


def run_chains(
    problem: Problem,
    center,
    key: jax.Array,
    targets: ChainTargets,
    *,
    sampler: Sampler = SGLD(),
    plan: RunPlan = RunPlan(),
    observables: Observables | None = None,
    description: str = "chains",
) -> ChainTrace:
    """Run `plan.num_chains` chains of every part of `targets` for `plan.num_steps` steps from
    `center` (see the module doc), with SGLD or an exact sampler (`slt.samplers.exact`).

    Args:
      problem: the model and data.
      center: unconstrained parameters (pytree) where every chain starts; also the centre of
        the localizing term. With `targets.center_of_part`, a sequence of such pytrees.
      key: PRNG key.
      targets: the parts' local posteriors and step sizes (`ChainTargets`).
      sampler: `slt.samplers.SGLD` (its batch_size, preconditioner, mala_every and
        extrapolate are used; the step sizes come from `targets`), `SGHMC` (its friction,
        batch_size, control_variates and measure_every), `MALA` or `HMC`.
      plan: `slt.samplers.RunPlan`: chains per part, warmup and draws (their sum is the run's
        length; observables are recorded from the end of the warmup), chunk size, checkpoint
        file (module doc, `slt.samplers.checkpoint`; `run_time` then counts the sampling time
        of every session), progress bar.
      observables: per-example losses to summarise along the chains (`Observables`, module
        doc; not with `extrapolate`); the trace's `moments` then holds every chain's summary.
      description: the progress bar's label.

    With `extrapolate`, the trace holds the combined chains: loss and center_loss are
    2 x_{eps/2} - x_eps, the diagnostics (log_acceptance, gradient_product, laplacian) the eps
    chain's (the larger step's), distance the eps / 2 chain's, and a pair diverged at the
    first step either twin did. With a mask, the MALA acceptance and the configurational
    temperature are those of the restricted chains.

    Raises:
      slt.samplers.checkpoint.Interrupted: a KeyboardInterrupt during a checkpointed run (the
        chunks before the one in progress are saved; `slt.samplers.runner`).
      slt.samplers.checkpoint.CheckpointError: the file at `checkpoint` is from another run.
    """
    extrapolate = isinstance(sampler, SGLD) and sampler.extrapolate
    if observables is not None and extrapolate:
        raise ValueError("observables are summarised per chain; a twin pair's Richardson "
                         "combination of them is not supported: use extrapolate=False")
    num_steps, checkpoint = plan.num_steps, plan.checkpoint
    num_chains = targets.num_parts * plan.num_chains
    chunk_size = plan.chunk_size  # whatever the run's length: one program serves every length
    exact = not isinstance(sampler, StochasticGradient)
    if observables is not None and plan.num_warmup == "auto":
        raise ValueError("observables start at a fixed step: give the plan a num_warmup")
    config = _Config(
        problem,
        _program_sampler(sampler),
        num_chains,
        chunk_size,
        min(sampler.batch_size, problem.n) if not exact else problem.n,
        bool(targets.include_prior),
        (EXACT_ADAPTATION if plan.num_warmup == "auto" else plan.num_warmup) if exact else 0,
    )
    several = targets.center_of_part is not None
    centers = jnp.stack([problem.ravel(c) for c in center]) if several else problem.ravel(
        center)[None]
    dtype = centers.dtype
    center_losses, center_full_loss = (jnp.stack(v) for v in zip(
        *(_center_losses(problem, flat) for flat in centers), strict=True))

    def chains_of(values, value_dtype, shape=()):  # (num_chains, *shape), on the host
        return np.repeat(np.broadcast_to(np.asarray(values, value_dtype),
                                         (targets.num_parts, *shape)), plan.num_chains, axis=0)

    per_chain = [chains_of(v, dtype) for v in (targets.step_size, targets.gamma, targets.nbeta)]
    per_chain += [chains_of(0 if not several else targets.center_of_part, np.int32),
                  chains_of(True if targets.mask is None else targets.mask, bool, (problem.dim,))]
    scale = None if targets.start_scale is None else chains_of(
        targets.start_scale, dtype, (problem.dim,))
    if extrapolate:
        config = config._replace(num_chains=2 * config.num_chains)
        per_chain = _with_twins(per_chain)
        scale = None if scale is None else np.concatenate([scale, scale])
    per_chain = [jax.device_put(values) for values in per_chain]  # nothing compiled
    chain_keys, starts = _keys_and_starts(key, targets.keys, centers, per_chain[3],
                                          per_chain[4], scale, plan.num_chains)
    observed = () if observables is None else (
        _observation_arguments(observables, dtype, plan.num_warmup),)
    store = Checkpoint(
        checkpoint, "run_chains", **{name: value for name, value in config._asdict().items()
                                     if name != "sampler"},
        algorithm=repr(config.sampler), num_steps=num_steps, key=key,
        **({"part_keys": targets.keys} if targets.keys is not None else {}),
        center=centers if several else centers[0], step_size=per_chain[0], gamma=per_chain[1],
        nbeta=per_chain[2],
        reference_loss=center_full_loss if several else float(center_full_loss[0]),
        **({"center_of_chain": per_chain[3]} if several else {}),
        **({"mask": per_chain[4]} if targets.mask is not None else {}),
        **({"start_scale": scale} if scale is not None else {}),
        **({"observables": observed[0]} if observed else {}),
    )
    initial = (_exact_initial_carry(config, chain_keys, per_chain, centers, starts,
                                    problem.data, *observed) if exact else
               _initial_carry(config, starts, *observed))
    resumed = store.resume(initial)
    shared = _Shared(centers, center_losses, center_full_loss, problem.data,
                     _center_gradients(targets, centers) if uses_control_variates(sampler)
                     else None)
    sharding = _chain_sharding(config.num_chains)
    # across processes, the arguments every chain reads are placed on all devices too
    replicated = None
    if sharding is not None:
        carry, chain_keys, per_chain = _place((resumed.state, chain_keys, per_chain), sharding)
        resumed = resumed._replace(state=carry)
        if jax.process_count() > 1:
            if checkpoint is not None:
                raise ValueError("checkpoint files are written by one process: run a "
                                 "checkpointed sampler in a single process")
            replicated = NamedSharding(sharding.mesh, PartitionSpec())
            shared, observed = _place((shared, observed), replicated)
    arguments = (resumed.state, chain_keys, per_chain, shared)

    start = time.perf_counter()
    compiled, was_cached = _compile(config, arguments, observed)
    compile_time = 0.0 if was_cached else time.perf_counter() - start

    def step_count(value):  # a scalar argument of the program, beside the replicated ones
        count = jnp.asarray(value)
        return count if replicated is None else _place(count, replicated)

    stop = step_count(num_steps)

    def advance(carry, chunk):
        carry, recorded = compiled(carry, *arguments[1:], step_count(chunk * chunk_size), stop,
                                   *observed)
        steps = (chunk * chunk_size, (chunk + 1) * chunk_size)
        if observed and not (steps[0] < num_steps and steps[1] > plan.num_warmup):
            # nothing observed in this chunk (warmup, or past the run's end): no block of it
            recorded = (*recorded[:_STEP_RECORDS],
                        *(field[:, :0] for field in recorded[_STEP_RECORDS:]))
        return carry, _to_host(recorded)

    def lengths(chunks, final):
        """Every part's `RunLength` from the traces so far (None while it needs more); only
        the step records are joined (not an observing run's blocks, after every chunk)."""
        loss, center_loss, _, _, _, distance, _ = (
            record[:, :num_steps]
            for record in join_records([chunk[:_STEP_RECORDS] for chunk in chunks]))
        if extrapolate:
            loss, center_loss = (_extrapolated(values) for values in (loss, center_loss))
            distance = distance[:distance.shape[0] // 2]  # the eps / 2 twins' (ChainTrace)
        return [decide_run_length(
            nbeta * (loss[rows] - center_loss[rows]), plan, min_warmup=config.num_warmup,
            final=final, distance=distance[rows]) for nbeta, rows in zip(
                np.broadcast_to(targets.nbeta, (targets.num_parts,)),
                _part_rows(targets.num_parts, plan.num_chains), strict=True)]

    num_chunks = -(-num_steps // chunk_size)
    carry, chunks, _, run_time = run_units(
        advance, resumed, store,
        ProgressBar(num_steps, lambda _, chunks: min(chunks * chunk_size, num_steps),
                    description, show=plan.progress),
        num_units=num_chunks,
        finished=(lambda _, chunks: bool(chunks) and None not in lengths(chunks, False))
        if plan.adaptive else None,
    )
    records = join_records(chunks)  # a resumed run's chunks come back joined
    steps_done = min(records[0].shape[1], num_steps)
    loss, center_loss, log_acceptance, gradient_product, laplacian, distance, virial = (
        record[:, :steps_done] for record in records[:_STEP_RECORDS]
    )
    decided = lengths(chunks, True) if plan.adaptive else [RunLength(
        plan.num_warmup, plan.num_samples, "the planned draws were made")] * targets.num_parts
    final = (_to_host(_projected(carry.chain.kernel.position, per_chain[4], centers[
        per_chain[3]])) if exact else _to_host(carry.chain.position))
    trace = ChainTrace(
        loss=loss,
        center_loss=center_loss,
        log_acceptance=log_acceptance,
        gradient_product=gradient_product,
        laplacian=laplacian,
        distance=distance,
        virial=virial,
        center_full_loss=np.asarray(center_full_loss) if several else float(center_full_loss[0]),
        diverged_at=_to_host(carry.diverged_at),
        final_position=final,
        compile_time=compile_time,
        run_time=run_time,
        moments=None if carry.observed is None else moments.Moments(
            *records[_STEP_RECORDS:]),
        step_size=_to_host(carry.chain.step_size) if exact else None,
    )
    trace = _combine_twins(trace) if extrapolate else trace
    warmup, kept, reason = (np.repeat(np.asarray(values), plan.num_chains)
                            for values in zip(*decided, strict=True))
    return trace._replace(warmup_steps=warmup, kept_steps=kept, stop_reason=reason)


# The records of every step (loss, center_loss, log_acceptance, gradient_product, laplacian,
# distance, virial); with observables, the chunk's summaries follow (`_observed_in_blocks`).
_STEP_RECORDS = 7


def _part_rows(num_parts: int, chains_per_part: int) -> list[slice]:
    """The rows (chains) of every part: the parts' chains one after another."""
    return [slice(part * chains_per_part, (part + 1) * chains_per_part)
            for part in range(num_parts)]


def _extrapolated(values):
    """The Richardson combination 2 x_{eps/2} - x_eps of a twin run's rows (chains [0, C) at
    eps / 2, [C, 2C) at eps)."""
    half = values.shape[0] // 2
    return 2 * values[:half] - values[half:]


def _randomness(key, part_keys, num_chains: int, chains_per_part: int, dim: int, dtype,
                *, needed: bool):
    """Every chain's PRNG key and its standard normal start offset ((num_chains, d); None
    when not `needed`), in the chains' order (twins: the eps / 2 chains of every part, then
    the eps chains).

    Without `part_keys`: `split(key, num_chains)` and one normal draw from
    fold_in(key, START_STREAM). With them (one per part): part p's chains take
    `split(part_keys[p], its chains)` and a normal draw from fold_in(part_keys[p],
    START_STREAM), laid out as above, so that one part given `key` draws what a run of that
    part alone draws."""
    def draws(one_key, count):
        keys = jax.random.split(one_key, count)
        noise = flat_random.normal(jax.random.fold_in(one_key, START_STREAM), (count, dim),
                                   dtype) if needed else None
        return keys, noise

    if part_keys is None:
        return draws(key, num_chains)
    num_parts = part_keys.shape[0]
    twins = num_chains // (num_parts * chains_per_part)
    keys, noise = jax.vmap(functools.partial(draws, count=twins * chains_per_part))(part_keys)

    def in_chain_order(values):  # (part, twin x chain, ...) -> (twin, part, chain, ...) flat
        values = values.reshape(num_parts, twins, chains_per_part, *values.shape[2:])
        return jnp.swapaxes(values, 0, 1).reshape(num_chains, *values.shape[3:])

    return in_chain_order(keys), None if noise is None else in_chain_order(noise)


@functools.partial(jax.jit, static_argnums=6)
def _keys_and_starts(key, part_keys, centers, center_of_chain, masks, scale,
                     chains_per_part: int):
    """Every chain's PRNG key and starting point (`_randomness`, `_starts`; chain c around
    centre `center_of_chain[c]`), in one compiled program per configuration's shapes rather
    than one per operation."""
    chain_keys, noise = _randomness(key, part_keys, masks.shape[0], chains_per_part,
                                    centers.shape[1], centers.dtype, needed=scale is not None)
    return chain_keys, _starts(centers[center_of_chain], scale, masks, noise)


def _starts(positions, scale, masks, noise):
    """Where the chains start: their centres `positions` (num_chains, d), plus offsets
    scale * noise in the coordinates they sample (`ChainTargets.start_scale`; None: the
    centres; `noise`: standard normal, `_randomness`)."""
    if scale is None:
        return positions
    return positions + jnp.where(masks, scale * noise, 0.0)


def _program_sampler(sampler):
    """The sampler as far as it shapes the compiled program: a stochastic-gradient sampler's
    step size is a runtime value (left out); an exact sampler's "auto" decides whether it
    adapts (kept)."""
    if isinstance(sampler, StochasticGradient):
        return replace(sampler, step_size="auto")
    return sampler if sampler.step_size == "auto" else replace(sampler, step_size=1.0)


def _projected(positions, masks, centers):
    """Restricted exact chains' positions with the unselected coordinates at the centre
    (`slt.samplers.exact`, "Restricted chains")."""
    return jnp.where(masks, positions, centers)


def _center_losses(problem: Problem, center_flat) -> tuple[jax.Array, jax.Array]:
    """The per-example losses at the centre (the chains' dtype) and their mean L_n(w*);
    a ValueError when it is not finite."""
    losses = _losses(problem, center_flat, problem.data)
    full_loss = jnp.mean(losses)
    if not np.isfinite(float(full_loss)):
        raise ValueError(
            f"L_n is not finite at the centre ({float(full_loss)}): it is not a valid w*")
    return losses, full_loss


def _losses(problem: Problem, flat, batch) -> jax.Array:
    """Per-example losses -log p(z_i | w) of `batch` at the flat point w, in its dtype."""
    return -problem.loglik(problem.unravel(flat), batch).astype(flat.dtype)


def _with_twins(per_chain: list) -> list:
    """Per-chain (step_size, gamma, nbeta, centre index[, mask]) for twin chains: the first
    half at eps / 2, the second at eps, both with the same other values (`_combine_twins`)."""
    step_size, *others = per_chain
    return [np.concatenate([step_size / 2, step_size]),
            *(np.concatenate([v, v]) for v in others)]


def _combine_twins(trace: ChainTrace) -> ChainTrace:
    """Richardson extrapolation of a twin run: chains [0, C) ran at eps / 2, [C, 2C) at eps."""
    half = trace.loss.shape[0] // 2
    at_half, at_full = trace.diverged_at[:half], trace.diverged_at[half:]
    never = np.iinfo(np.int32).max
    first = np.minimum(np.where(at_half < 0, never, at_half), np.where(at_full < 0, never, at_full))
    return trace._replace(
        loss=_extrapolated(trace.loss),
        center_loss=_extrapolated(trace.center_loss),
        log_acceptance=trace.log_acceptance[half:],
        gradient_product=trace.gradient_product[half:],
        laplacian=trace.laplacian[half:],
        distance=trace.distance[:half],
        virial=trace.virial[:half],
        diverged_at=np.where(first == never, -1, first).astype(trace.diverged_at.dtype),
        final_position=trace.final_position[:half],
    )


def _initial_carry(config: _Config, position, watch: _Watch | None = None) -> _Carry:
    """Every SGLD or SGHMC chain at its start (`position`: (num_chains, d); SGHMC's momentum
    0), none diverged, nothing observed yet (with `watch`, the observation arguments)."""
    return _Carry(
        chain=jax.vmap(_stochastic_kernel(config.sampler).init)(position),
        diverged_at=jax.device_put(np.full((config.num_chains,), -1, np.int32)),
        observed=_no_observations(config, position, watch),
    )


def _exact_initial_carry(config: _Config, chain_keys, per_chain, centers, starts, data,
                         watch: _Watch | None = None) -> _Carry:
    """Every exact chain at its start (`starts`: (num_chains, d)), its first step size found
    (`slt.samplers.exact`), none diverged, nothing observed yet. The program is compiled once
    per configuration and argument shapes, and kept with the problem (`slt.compile_cache`)."""
    arguments = (chain_keys, per_chain, centers, starts, data)
    signature = _signature("exact initial states", config, arguments)

    def build():
        log_target = _local_log_target(config.problem, config.include_prior)

        def initial(chain_keys, per_chain, centers, starts, data):
            def one(chain_key, start, step_size, gamma, nbeta, center_index, mask):
                center = centers[center_index]
                logdensity = restricted_logdensity(
                    lambda flat: log_target(flat, data, gamma, nbeta, center), mask, center)
                return exact_initial_state(config.sampler,
                                           jax.random.fold_in(chain_key, -1 % 2**31),
                                           start, logdensity, step_size)

            return jax.vmap(one)(chain_keys, starts, *per_chain)

        return jax.jit(initial).lower(*arguments).compile()

    initial = compile_cache.compiled_for(config.problem, signature, build)[0]
    return _Carry(
        chain=initial(*arguments),
        diverged_at=jax.device_put(np.full((config.num_chains,), -1, np.int32)),
        observed=_no_observations(config, starts, watch),
    )


def _no_observations(config: _Config, position, watch: _Watch | None):
    """Empty per-chain summaries of the observables (None without `watch`)."""
    observed = None
    if watch is not None:
        sizes = [len(next(iter(examples.values()))) if readout is None else readout.shape[0]
                 for examples, readout in ((watch.x_examples, watch.x_readout),
                                           (watch.y_examples or watch.x_examples,
                                            watch.y_readout))]
        observed = moments.zeros((config.num_chains,), *sizes, position.dtype)
    return observed


class _Watch(NamedTuple):
    """`Observables` as arguments of the chunk program (steps past the run's end are not run,
    so not observed: `_scan_before`)."""

    x_examples: dict
    y_examples: dict | None
    x_readout: jax.Array | None
    y_readout: jax.Array | None
    start: jax.Array
    every: jax.Array


def _observation_arguments(observables: Observables, dtype, start: int) -> _Watch:
    """`observables` as arguments of the chunk program: device arrays, the readouts in the
    chains' dtype, start and every as integer scalars (runtime values: one program serves
    every warmup length)."""
    def readout(matrix):
        return None if matrix is None else jnp.asarray(matrix, dtype)

    return _Watch(
        x_examples={name: jnp.asarray(v) for name, v in observables.x_examples.items()},
        y_examples=None if observables.y_examples is None else {
            name: jnp.asarray(v) for name, v in observables.y_examples.items()},
        x_readout=readout(observables.x_readout),
        y_readout=readout(observables.y_readout),
        start=jnp.asarray(int(start)),
        every=jnp.asarray(max(int(observables.every), 1)),
    )


def _place(tree, sharding):
    """`tree` on `sharding`. With several processes (multi-controller JAX,
    `jax.distributed`) the sharding spans devices of other processes: every process holds
    the same values (same key, same data) and contributes the shards of its own devices."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def place(leaf):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(place(jax.random.key_data(leaf)),
                                            impl=jax.random.key_impl(leaf))
        values = np.asarray(leaf)
        return jax.make_array_from_callback(values.shape, sharding, lambda index: values[index])

    return jax.tree.map(place, tree)


def _to_host(tree):
    """NumPy copies of `tree`'s arrays, gathered from every process when they are sharded
    across processes."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def _chain_sharding(num_chains: int):
    """Shard the chain axis over every visible device (None when one device or uneven)."""
    devices = jax.devices()
    if len(devices) == 1 or num_chains % len(devices):
        return None
    return NamedSharding(Mesh(np.array(devices), ("chains",)), PartitionSpec("chains"))


def _compile(config: _Config, arguments, observed: tuple):
    """(The chunk program for `config` and these argument shapes/shardings, whether it was
    already compiled): one per configuration, kept with the problem (`slt.compile_cache`).
    `observed`: () or (the observation arguments,), passed after the first step."""
    signature = _signature("chain chunk", config, (arguments, observed))
    chunk = _run_chunk if isinstance(config.sampler, StochasticGradient) else _run_exact_chunk
    return compile_cache.compiled_for(
        config.problem, signature,
        lambda: jax.jit(functools.partial(_observed_in_blocks, chunk, config)).lower(
            *arguments, jnp.asarray(0), jnp.asarray(0), *observed).compile(),
    )


def _signature(kind: str, config: _Config, arguments) -> tuple:
    """What names a program of `kind` for `slt.compile_cache`: the configuration (its problem
    aside, the cache's key) and the arguments' tree, shapes, dtypes and shardings."""
    leaves, structure = jax.tree.flatten(arguments)
    return (kind, config._replace(problem=None), structure,
            tuple((a.shape, a.dtype, a.sharding) for a in leaves))


def _observed_in_blocks(chunk, config: _Config, carry: _Carry, *arguments):
    """`chunk(config, carry, *arguments)` with the observables summarised per chunk: the
    summaries start empty, and the chunk's (one block of draws per chain) are appended to its
    record as `Moments` fields of shape (chain, 1, ...), so that the joined records hold one
    block per chain and chunk (module doc). Without observables, `chunk` itself."""
    if carry.observed is None:
        return chunk(config, carry, *arguments)
    carry, records = chunk(config, carry._replace(
        observed=jax.tree.map(jnp.zeros_like, carry.observed)), *arguments)
    return carry, (*records, *(field[:, None] for field in carry.observed))


def compile_count() -> int:
    """How many chunk programs have been compiled in this process (for recompilation tests)."""
    return compile_cache.compile_count("chain chunk")


def _observation(problem: Problem, watch: _Watch | None):
    """observe(summaries, positions, keep, step) -> the per-chain summaries, updated at a step
    due for observation (from `watch.start`, every `watch.every`) with
    the observables x = R_x l_X(w), y = R_y l_Y(w) at every chain's position (module doc),
    where `keep` (per chain) holds; the summaries as they were at other steps, and always
    without `watch` (None: nothing observed, and nothing of it in the program)."""
    @at_full_precision  # the readouts' products too: R l of float32 losses (slt.precision)
    def observables(flat):
        first = _losses(problem, flat, watch.x_examples)
        second = first if watch.y_examples is None else _losses(problem, flat, watch.y_examples)
        x = first if watch.x_readout is None else watch.x_readout @ first
        y = second if watch.y_readout is None else watch.y_readout @ second
        return x, y

    def observe(summaries, positions, keep, step):
        if watch is None:
            return summaries
        due = (step >= watch.start) & ((step - watch.start) % watch.every == 0)
        return jax.lax.cond(
            due, lambda: moments.update(summaries, *jax.vmap(observables)(positions), keep),
            lambda: summaries)

    return observe


def _local_log_target(problem: Problem, include_prior: bool):
    """log_target(flat, batch, gamma, nbeta, center) -> (log density of the local tempered
    posterior on `batch`, up to a constant: -nbeta L_b - (gamma / 2) |w - center|^2
    [+ log prior]; the batch loss L_b)."""
    def log_target(flat, batch, gamma, nbeta, center):
        params = problem.unravel(flat)
        loss = -jnp.mean(problem.loglik(params, batch))
        value = -nbeta * loss - 0.5 * gamma * jnp.sum((flat - center) ** 2)
        if include_prior:
            value = value + problem.log_prior(params)
        return value, loss

    return log_target


def _with_control_variates(log_target, problem: Problem):
    """relative_target(flat, batch, center_gradient, gamma, nbeta, center) -> `log_target`
    plus n beta <grad L_b(center) - grad L_n(center), w>: its gradient is the control-variate
    estimate -n beta (grad L_b(w) - grad L_b(w*) + grad L_n(w*)) - gamma (w - w*) [+ prior]
    of grad log pi(w) (`slt.samplers.SGHMC`), unbiased, its noise 0 at w* (one more
    minibatch gradient a step, at the centre; `center_gradient` is grad L_n(center)). The
    value is a log density of the same minibatch up to a linear term, the aux L_b(w)."""
    def batch_loss(flat, batch):
        return -jnp.mean(problem.loglik(problem.unravel(flat), batch))

    def relative_target(flat, batch, center_gradient, gamma, nbeta, center):
        value, loss = log_target(flat, batch, gamma, nbeta, center)
        offset = jax.lax.stop_gradient(jax.grad(batch_loss)(center, batch) - center_gradient)
        return value + nbeta * jnp.dot(offset, flat), loss

    return relative_target


def _measurements(log_target, problem: Problem, data, batch_size: int, *, acceptance: bool):
    """measure(state, new_state, info, position, batch, chain_key, step, hyper, center,
    mask) -> the diagnostics of one step: with `acceptance` (SGLD), its MALA log acceptance
    on the step's `batch` (NaN otherwise: a momentum step has none), and the configurational
    temperature's two terms at `position` (where `info` was evaluated): grad U . grad' U and
    v' Hess(U) v (U = -log pi, a Rademacher probe v) on a second minibatch drawn from
    `chain_key` and `step`: those of the chain restricted to `mask` (gradients and probe on
    the selected coordinates)."""
    def measure(state, new_state, info, position, batch, chain_key, step, hyper, center,
                mask):
        step_size, gamma, nbeta = hyper

        def density_and_grad(flat):
            (value, _), grad = jax.value_and_grad(log_target, has_aux=True)(
                flat, batch, gamma, nbeta, center
            )
            return value, jnp.where(mask, grad, 0.0)

        log_acceptance = mala_log_acceptance(
            state.position, new_state.position, info, density_and_grad, step_size
        ) if acceptance else jnp.asarray(jnp.nan, info.aux.dtype)
        batch_key, probe_key = jax.random.split(
            jax.random.fold_in(jax.random.fold_in(chain_key, step), 1)
        )
        other_batch = problem.take(
            jax.random.randint(batch_key, (batch_size,), 0, problem.n), data
        )
        probe = jnp.where(mask, jax.random.rademacher(probe_key, position.shape,
                                                      info.aux.dtype), 0.0)

        def other_gradient(flat):
            return jax.grad(lambda w: log_target(w, other_batch, gamma, nbeta, center)[0])(flat)

        other, curvature = jax.jvp(other_gradient, (position,), (probe,))
        # U = -log pi: grad U . grad' U = g . g', Laplacian = -v' Hess(log pi) v
        return log_acceptance, jnp.dot(info.gradient, other), -jnp.dot(probe, curvature)

    return measure


class _Shared(NamedTuple):
    """What every chain of a chunk program reads (its arguments, not constants): the centres
    (one row each), the per-example losses at each centre, L_n at each centre, the data, and
    with control variates (`slt.samplers.SGHMC`) grad L_n at each centre (one row each)."""

    centers: jax.Array
    center_losses: jax.Array
    reference_losses: jax.Array
    data: dict
    center_gradients: jax.Array | None = None


def _stochastic_kernel(sampler) -> SGLDKernel:
    """The step of a stochastic-gradient sampler: SGLD's (with its preconditioner) or SGHMC's
    (with its friction)."""
    if isinstance(sampler, SGHMC):
        return sghmc(sampler.friction)
    return sgld(sampler.preconditioner)


def _center_gradients(targets: ChainTargets, centers) -> jax.Array:
    """`targets.center_gradient`, grad L_n at every centre (rows of `centers`), in the
    chains' dtype; a ValueError when it is missing or of another shape."""
    if targets.center_gradient is None:
        raise ValueError("SGHMC's control variates need grad L_n at the centre: give "
                         "ChainTargets(center_gradient=...) (slt.estimators.local.center."
                         "measure_center)")
    if np.shape(targets.center_gradient) != centers.shape:
        raise ValueError(f"center_gradient must have one row per centre, shape "
                         f"{centers.shape}, got {np.shape(targets.center_gradient)}")
    return jnp.asarray(targets.center_gradient, centers.dtype)


def _scan_before(scan_step, carry, first_step, chunk_size: int, stop):
    """`lax.scan` of `scan_step(carry, step) -> (carry, per-chain records)` over the steps
    first_step, ..., first_step + chunk_size - 1, running those before `stop` (the run's
    length): a step past it leaves the carry as it is and records NaN. So the program does not
    depend on the run's length (one serves every length: the last chunk may reach past the
    end), and the steps past the end cost nothing: the step counter is the same for every
    chain, so the test is a `lax.cond` outside the vmap over chains. Returns the carry and the
    records as (chain, step) arrays."""
    def bounded(carry, step):
        # scan_step traced once: its jaxpr serves as the branch, its shapes as the NaN records
        traced, (_, shapes) = jax.make_jaxpr(scan_step, return_shape=True)(carry, step)
        structure = jax.tree.structure((carry, shapes))

        def run(carry, step):
            return jax.tree.unflatten(structure, jax_core.jaxpr_as_fun(traced)(
                *jax.tree.leaves((carry, step))))

        def skipped(carry, step):
            return carry, tuple(jnp.full(r.shape, jnp.nan, r.dtype) for r in shapes)

        return jax.lax.cond(step < stop, run, skipped, carry, step)

    steps = first_step + jnp.arange(chunk_size)
    carry, records = jax.lax.scan(bounded, carry, steps)
    return carry, tuple(record.T for record in records)


def _run_chunk(config: _Config, carry: _Carry, chain_keys, per_chain, shared: _Shared,
               first_step, stop, watch: _Watch | None = None):
    """`chunk_size` SGLD or SGHMC steps of every chain from `first_step`, those before `stop`
    run (`_scan_before`). The data are an
    argument (not constants of the compiled program): compile time and memory do not grow
    with them; so are
    the centres (one row each; `per_chain` holds each chain's index into them, and its mask:
    every chain is restricted, to all coordinates when unrestricted, so that a restriction to
    every weight is bitwise the unrestricted run), and the observed examples (`watch`; None:
    nothing observed, and nothing of it in the program)."""
    problem = config.problem
    centers, center_losses, reference_losses, data, center_gradients = shared
    steps_per_epoch = problem.n // config.batch_size
    threshold = divergence_threshold(problem.dim)
    algorithm = _stochastic_kernel(config.sampler)
    log_target = _local_log_target(problem, config.include_prior)
    relative_target = _with_control_variates(log_target, problem)
    measurements = _measurements(log_target, problem, data, config.batch_size,
                                 acceptance=config.sampler.has_mala_check)
    evaluates_at_end = isinstance(config.sampler, SGHMC)

    def chain_step(state: SGLDState, diverged_at, chain_key, per_chain_values, center,
                   reference_loss, step):
        hyper, (center_index, mask) = per_chain_values[:3], per_chain_values[3:]
        step_size, gamma, nbeta = hyper
        first = (step % steps_per_epoch) * config.batch_size
        indices = epoch_indices(jax.random.fold_in(chain_key, 1), step // steps_per_epoch,
                                first + jnp.arange(config.batch_size), problem.n)
        batch = problem.take(indices, data)

        def step_target(flat):
            if center_gradients is None:
                return log_target(flat, batch, gamma, nbeta, center)
            return relative_target(flat, batch, center_gradients[center_index], gamma, nbeta,
                                   center)

        new_state, info = algorithm.step(jax.random.fold_in(chain_key, step), state,
                                         step_target, step_size, mask)
        loss = info.aux
        # where the step evaluated its minibatch: SGLD where it starts, SGHMC where it ends
        evaluated = new_state.position if evaluates_at_end else state.position

        def diagnostics():
            return measurements(state, new_state, info, evaluated, batch, chain_key, step,
                                hyper, center, mask)

        every = config.sampler.measure_every
        measure = (every > 0) & (step % max(every, 1) == 0)
        nan = jnp.asarray(jnp.nan, loss.dtype)
        log_acceptance, gradient_product, laplacian = jax.lax.cond(
            measure, diagnostics, lambda: (nan, nan, nan)
        )
        exploded = (
            ~jnp.isfinite(loss)
            | (nbeta * (loss - reference_loss) > threshold)
            | ~jnp.all(jnp.isfinite(new_state.position))
        )
        already = diverged_at >= 0
        diverged_at = jnp.where(~already & exploded, step.astype(jnp.int32), diverged_at)
        stopped = diverged_at >= 0
        new_state = jax.tree.map(lambda new, old: jnp.where(stopped, old, new), new_state, state)
        center_loss = jnp.mean(center_losses[center_index, indices])
        record = (
            jnp.where(stopped, nan, loss),
            center_loss,
            jnp.where(stopped, nan, log_acceptance),
            jnp.where(stopped, nan, gradient_product),
            jnp.where(stopped, nan, laplacian),
            jnp.linalg.norm(evaluated - center),
            jnp.where(stopped, nan, -jnp.dot(evaluated - center, info.gradient)),
        )
        return new_state, diverged_at, record

    # each chain's centre and reference loss, gathered once a chunk rather than every step
    chain_centers, chain_references = centers[per_chain[3]], reference_losses[per_chain[3]]
    observe = _observation(problem, watch)

    def scan_step(carry: _Carry, step):
        state, diverged_at, record = jax.vmap(chain_step, in_axes=(0, 0, 0, 0, 0, 0, None))(
            carry.chain, carry.diverged_at, chain_keys, per_chain, chain_centers,
            chain_references, step
        )
        observed = observe(carry.observed, carry.chain.position, diverged_at < 0, step)
        return _Carry(state, diverged_at, observed), record

    return _scan_before(scan_step, carry, first_step, config.chunk_size, stop)


def _run_exact_chunk(config: _Config, carry: _Carry, chain_keys, per_chain, shared: _Shared,
                     first_step, stop, watch: _Watch | None = None):
    """`chunk_size` steps of every exact chain (MALA or HMC on the full data, adapting during
    the warmup: `slt.samplers.exact`) from `first_step`, those before `stop` run, with
    `_run_chunk`'s record: the loss is L_n at the chain's (restricted) position, the centre
    loss L_n(w_center), the acceptance probability of every step, the temperature's terms
    every `MEASURE_EVERY` steps. The arguments are `_run_chunk`'s (`shared.center_losses`
    unused: the losses are exact)."""
    centers, reference_losses, data = shared.centers, shared.reference_losses, shared.data
    problem, sampler = config.problem, config.sampler
    threshold = divergence_threshold(problem.dim)
    log_target = _local_log_target(problem, config.include_prior)
    chain_centers, chain_references = centers[per_chain[3]], reference_losses[per_chain[3]]

    def logdensity_of(values, center):
        step_size, gamma, nbeta, _, mask = values
        return restricted_logdensity(
            lambda flat: log_target(flat, data, gamma, nbeta, center), mask, center)

    def chain_step(state: ExactState, diverged_at, chain_key, values, center, reference, step):
        mask = values[4]
        new_state, acceptance = exact_step(sampler, jax.random.fold_in(chain_key, step), state,
                                           logdensity_of(values, center), step,
                                           config.num_warmup)
        position = _projected(state.kernel.position, mask, center)
        loss = -jnp.mean(problem.loglik(problem.unravel(position), data)).astype(
            position.dtype)
        exploded = (~jnp.isfinite(loss) | (values[2] * (loss - reference) > threshold)
                    | ~jnp.all(jnp.isfinite(new_state.kernel.position)))
        diverged_at = jnp.where((diverged_at < 0) & exploded, step.astype(jnp.int32),
                                diverged_at)
        stopped = diverged_at >= 0
        new_state = jax.tree.map(lambda new, old: jnp.where(stopped, old, new), new_state, state)
        nan = jnp.asarray(jnp.nan, loss.dtype)
        record = (jnp.where(stopped, nan, loss), reference,
                  jnp.where(stopped, nan, jnp.log(acceptance).astype(loss.dtype)),
                  jnp.linalg.norm(position - center),
                  jnp.where(stopped, nan, -jnp.dot(position - center,
                                                   state.kernel.logdensity_grad)))
        return new_state, diverged_at, record

    def temperature(state: ExactState, chain_key, values, center, step):
        key = jax.random.fold_in(jax.random.fold_in(chain_key, step), 1)
        return temperature_terms(logdensity_of(values, center), state.kernel.position,
                                 state.kernel.logdensity_grad, values[4], key)

    observe = _observation(problem, watch)

    def scan_step(carry: _Carry, step):
        state, diverged_at, (loss, reference, log_acceptance, distance, virial) = jax.vmap(
            chain_step, in_axes=(0, 0, 0, 0, 0, 0, None))(
            carry.chain, carry.diverged_at, chain_keys, per_chain, chain_centers,
            chain_references, step)
        nan = jnp.full_like(loss, jnp.nan)
        gradient_product, laplacian = jax.lax.cond(
            step % MEASURE_EVERY == 0,
            lambda: jax.vmap(temperature, in_axes=(0, 0, 0, 0, None))(
                carry.chain, chain_keys, per_chain, chain_centers, step),
            lambda: (nan, nan))
        stopped = diverged_at >= 0
        record = (loss, reference, log_acceptance, jnp.where(stopped, nan, gradient_product),
                  jnp.where(stopped, nan, laplacian), distance, virial)
        positions = _projected(carry.chain.kernel.position, per_chain[4], chain_centers)
        observed = observe(carry.observed, positions, diverged_at < 0, step)
        return _Carry(state, diverged_at, observed), record

    return _scan_before(scan_step, carry, first_step, config.chunk_size, stop)
