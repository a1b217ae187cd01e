"""What `loss_kernel`, `bif` and `susceptibilities` share: examples given by the user as
batches, the local run that observes their losses, and the statistics of its per-chain
summaries.

All three read per-example losses l_i(w) = -log p(y_i | x_i, w) (the problem's convention:
with constants, one example each) along the chains of `slt.llc`'s local posterior

    pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2),

summarised on device per chain (`slt.samplers.local_chains.Observables`,
`slt.samplers.moments`). The run is `llc`'s (`slt.estimators.local.parts.part_runs`): the same
values (posterior, sampler, plan), calibration, n beta default, masks, diagnostics and
warnings; its
`LLCResult` travels with every result as `run` (lambda_hat comes for free).

Standard errors are by batch means: the chains summarise their draws per chunk of steps
(`RunPlan.chunk_size`, 500 by default), one block of consecutive draws per chain and chunk
(`slt.samplers.local_chains`), and consecutive chunks are merged into blocks that span at least
`BLOCK_AUTOCORRELATION_TIMES` (25) integrated autocorrelation times tau of the chains' distance
from w* (tau = draws / ESS of the run's distance trace: the slowest trace the run records; a
per-example loss has a linear and a quadratic part in w - w*, and mixes no slower). A
statistic theta (a mean, a covariance) is computed on every block b of k_b >= 2 draws of every
chain that did not diverge, theta_b, and

    se^2 = B / (B - 1) sum_b w_b^2 (theta_b - theta_w)^2,   w_b = k_b / sum k,
    theta_w = sum_b w_b theta_b,

over the B blocks of all chains (with equal blocks, sd_b(theta_b)^2 / B: blocks as
replicates; unequal blocks, such as a last chunk cut short by the run's end, weighted by their
draws). Chains that disagree (not mixed) spread their blocks apart and widen the error bar.
It has about B - 1 degrees of freedom where the earlier between-chain standard error had C - 1
(with 4 chains, (estimate - truth) / se was Student-t with 3 degrees of freedom, beyond 3 in
5.8% of entries). Why 25: on a Gaussian regression's kernel (benchmarks/observed_defaults.py),
over 40 runs at a fixed step, the sd of the estimates over the mean reported se was 1.42 with
blocks of 5 tau, 1.18 with 10 tau and 1.00 with 25 tau (tau = 51 steps): shorter blocks are
correlated with their neighbours and make the error bars too small. An "auto" number of draws
continues until that ESS is at least `OBSERVED_ESS` (500, `RunPlan.min_ess`): about 20 blocks.
The estimate itself is computed on all draws pooled (Chan et al.'s merge).
R-hat is Gelman and Rubin's (1992) from every chain's mean and variance of an
observable (not split, not rank-normalised: those need the draws).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt.estimators.local.diagnostics import MAX_RHAT, ChainsDisagree, TooFewDraws
from slt.estimators.local.llc import LLCResult, LocalRun
from slt.estimators.local.parts import part_runs
from slt.estimators.local.posterior import check_local_run, trace_statistics
from slt.problem import Params, Problem, require_problem
from slt.samplers import moments
from slt.samplers.config import MALA, SGLD, Sampler
from slt.samplers.local_chains import Observables
from slt.validation import InputError, require_instance, require_params, warn_caller

__all__ = [
    "EXACT_MAX_BATCHES",
    "MAX_RHAT",
    "ObservedExamples",
    "ObservedResult",
    "attribution_sampler",
    "block_std_error",
    "chain_summaries",
    "cluster_order",
    "example_batch",
    "example_indices",
    "example_labels",
    "losses_at",
    "observe_examples",
    "observed_runs",
    "BLOCK_AUTOCORRELATION_TIMES",
    "OBSERVED_ESS",
    "OBSERVED_WARMUP",
    "observation_warnings",
    "rhat",
]



# An "auto" warmup of an observed run: the observations begin after this many steps.
OBSERVED_WARMUP = 1000
# An "auto" number of draws of an observed run reaches at least this ESS of the distance from w*
# (`RunPlan.min_ess`): with blocks of BLOCK_AUTOCORRELATION_TIMES, about 20 blocks.
OBSERVED_ESS = 500
# The batch-means blocks span at least this many integrated autocorrelation times of the
# distance from w* (measured: module doc).
BLOCK_AUTOCORRELATION_TIMES = 25
# sampler="auto" runs the exact MALA where one full-data gradient costs at most this many of
# SGLD's minibatch gradients (`attribution_sampler`).
EXACT_MAX_BATCHES = 16


def attribution_sampler(problem: Problem, sampler) -> Sampler:
    """The sampler an attribution estimator runs: `sampler` itself, or for "auto" (their
    default) the exact `MALA()` where one full-data gradient costs at most
    `EXACT_MAX_BATCHES` of SGLD's minibatch gradients (n <= 16 x 256 = 4,096 examples) and
    `SGLD()` (its step calibrated) beyond.

    Why exact where it is affordable: the loss kernel, the BIF and the susceptibilities are
    second moments of the losses, and SGLD's stationary covariance is the posterior's inflated
    at O(eps) (on a Gaussian target of precision A, (A (I - eps A / 4))^-1), a bias its
    temperature diagnostics measure too coarsely at the calibrated step. On a Gaussian
    regression whose kernel has a closed form (benchmarks/observed_defaults.py, n = 2000,
    keys 1-12) SGLD left 3 of 12 kernels with an entry beyond 3 standard errors, MALA 0 of 12,
    with 1000 draws a chain against SGLD's 4000-9000 (benchmarks/RESULTS.md).

    Raises:
      InputError: `sampler` neither a sampler value nor "auto".
    """
    if isinstance(sampler, str) and sampler == "auto":
        return MALA() if problem.n <= EXACT_MAX_BATCHES * SGLD().batch_size else SGLD()
    return require_instance("sampler", sampler, Sampler,
                            '"auto" or slt.samplers.SGLD, SGHMC, MALA or HMC')


def example_batch(problem: Problem, examples, name: str) -> tuple[dict, np.ndarray | None]:
    """Examples as a batch in the problem's data format, and their indices in the training
    data (None for examples given as data).

    Args:
      problem: the problem whose data format the examples take.
      examples: None (every training example), a 1-D array of integer indices into the
        training data, or a dict of arrays with the keys of `problem.data`, each with a leading
        example axis and the training array's shape after it (a query set, a test set).
      name: the argument's name, for error messages.

    Raises:
      InputError: no examples, an index out of range or not an integer, other keys, another
        shape per example, arrays of different lengths, or non-finite values.
    """
    if examples is None:
        return dict(problem.data), np.arange(problem.n)
    if isinstance(examples, Mapping):
        return _data_batch(problem, examples, name), None
    indices = example_indices(problem, examples, name)
    return problem.take(jnp.asarray(indices)), indices


def example_indices(problem: Problem, examples, name: str) -> np.ndarray:
    """Examples given as indices into the training data, checked, without gathering them
    (`example_batch` gathers: an eager gather compiles once per number of indices, about
    30 ms each on CPU, which adds up over many subsets of different sizes).

    Raises:
      InputError: as `example_batch`, for indices.
    """
    indices = np.asarray(examples)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise InputError(
            f"{name} must be a 1-D array of integer indices into the training data or a dict "
            f"of arrays with the data's keys {sorted(problem.data)}; got "
            f"{indices.dtype} of shape {indices.shape}")
    if indices.size == 0:
        raise InputError(f"{name} is empty: give at least one example")
    outside = (indices < 0) | (indices >= problem.n)
    if outside.any():
        raise InputError(f"{name} has index {int(indices[outside][0])} outside the training "
                         f"data (n = {problem.n})")
    return indices


def example_labels(indices: np.ndarray | None, size: int) -> np.ndarray:
    """The names of `size` examples: their training indices, or positions in the given data
    (`indices` None)."""
    return np.arange(size) if indices is None else indices


def _data_batch(problem: Problem, examples: Mapping, name: str) -> dict:
    """A dict of arrays checked against the problem's data format (`example_batch`)."""
    if set(examples) != set(problem.data):
        raise InputError(f"{name} has keys {sorted(examples)}; the problem's data have "
                         f"{sorted(problem.data)}")
    batch, lengths = {}, set()
    for key, template in problem.data.items():
        array = np.asarray(examples[key])
        if array.ndim != template.ndim or array.shape[1:] != template.shape[1:]:
            shape = ", ".join(["m", *map(str, template.shape[1:])])
            raise InputError(f"{name}[{key!r}] has shape {array.shape}; examples of "
                             f"data[{key!r}] have shape ({shape})")
        if array.dtype.kind not in "biuf" or (
                array.dtype.kind == "f" and not np.isfinite(array).all()):
            raise InputError(f"{name}[{key!r}] must hold finite numbers")
        with np.errstate(invalid="ignore", over="ignore"):
            cast = array.astype(template.dtype)
        if template.dtype.kind in "biu" and not np.array_equal(cast, array):
            changed = np.flatnonzero(np.ravel(cast != array))[0]
            raise InputError(
                f"{name}[{key!r}] holds {np.ravel(array)[changed].item()!r}, which data[{key!r}] "
                f"(dtype {template.dtype}) cannot hold: give values of the training data's "
                f"type (integer labels for integer labels)")
        lengths.add(array.shape[0])
        batch[key] = jnp.asarray(cast)
    if len(lengths) > 1:
        raise InputError(f"{name}'s arrays have different numbers of examples {sorted(lengths)}")
    if lengths == {0}:
        raise InputError(f"{name} is empty: give at least one example")
    if problem.prediction is not None:  # labels in range, outputs finite (from_predict's check)
        problem.prediction.check(problem.reference_params, batch, where=name)
    return batch


def losses_at(problem: Problem, params: Params, batch: dict, name: str) -> np.ndarray:
    """l_i(w*) = -log p(z_i | w*) of every example of `batch` (float64 NumPy); an InputError
    naming `name` when one is not finite (the chains could not observe it)."""
    values = np.asarray(-problem.loglik(params, batch), np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise InputError(f"the loss of {name} example {int(np.argmax(bad))} is not finite at "
                         f"params ({values[bad][0]})")
    return values


def observed_runs(problem: Problem, params: Params, key: jax.Array, values: tuple, *,
                  observables: Observables, parts: dict | None = None,
                  description: str) -> list[tuple[LLCResult, moments.Moments]]:
    """`llc`'s local run (one per part) with `observables` summarised every
    `plan.observe_every` steps after the warmup; per part, its `LLCResult` and the summaries
    of its chains that did not diverge, per block of draws (leading axes: chain, chunk;
    `chain_summaries` merges each chain's, `block_std_error` reads standard errors).

    Args:
      values: the estimator's (posterior, sampler, plan), as its user gave them (checked
        here, `check_local_run`; sampler "auto" chosen by `attribution_sampler`);
        SGLD(extrapolate=True) is refused (a twin pair's summaries
        do not combine). The observations begin when the warmup ends, a step fixed before the
        run: an "auto" num_warmup is `OBSERVED_WARMUP` (1000) steps here (the chains start
        dispersed over the posterior's width, and the run's diagnostics say whether that
        sufficed); an "auto" num_samples draws until lambda_hat's standard error reaches the
        plan's target, as for `llc`.
      parts: {name: restrict_to} (`part_runs`; the posterior's restrict_to must then be
        None); None: one run of the weights the posterior's restrict_to selects.

    Raises:
      InputError: a bad value, extrapolate=True, a posterior restricted beside parts, or a
        bad mask.
      FloatingPointError: every chain of a part diverged (`llc`).
    """
    posterior, sampler, plan = values
    sampler = attribution_sampler(require_problem(problem), sampler)
    posterior = check_local_run(problem, params, key, posterior, sampler, plan)
    if plan.num_warmup == "auto":  # the observations begin at a step fixed in advance
        plan = replace(plan, num_warmup=OBSERVED_WARMUP)
    if plan.num_samples == "auto":
        plan = replace(plan, min_ess=max(plan.min_ess, OBSERVED_ESS))
    if getattr(sampler, "extrapolate", False):
        raise InputError("SGLD(extrapolate=True) is not supported here: the statistics are "
                         "summarised per chain, and a twin pair's do not combine")
    if parts is not None and posterior.restrict_to is not None:
        raise InputError(f"{description} restricts every component itself: give the masks "
                         "as components, with posterior.restrict_to=None")
    parts = {"all": posterior.restrict_to} if parts is None else parts
    runs = part_runs(problem, params, key, LocalRun(posterior, sampler, plan), parts,
                     description=description,
                     observables=observables._replace(every=plan.observe_every))
    return [(result, _grouped(moments.Moments(*(np.asarray(field)[trace.diverged_at < 0]
                                                for field in trace.moments)),
                              _chunks_per_block(result, plan.chunk_size)))
            for result, trace in runs]


def _chunks_per_block(run: LLCResult, chunk_size: int) -> int:
    """How many chunks of `chunk_size` steps one batch-means block spans: at least
    BLOCK_AUTOCORRELATION_TIMES integrated autocorrelation times of the distance from w*,
    tau = draws / ESS of the run's kept distance trace (module doc)."""
    distance = np.asarray(run.distance_trace, np.float64)
    distance = distance[np.all(np.isfinite(distance), axis=1)]
    if distance.shape[0] == 0 or distance.shape[1] < 4:
        return 1
    tau = distance.size / max(trace_statistics(distance)[2], 1.0)
    return max(1, int(np.ceil(BLOCK_AUTOCORRELATION_TIMES * tau / chunk_size)))


def _grouped(blocks: moments.Moments, size: int) -> moments.Moments:
    """Every chain's blocks merged `size` at a time, in order (the last group may be
    shorter); leading axes (chain, group)."""
    if size == 1 or blocks.count.shape[1] == 0:
        return blocks
    groups = [moments.combine(moments.Moments(*(field[:, start:start + size]
                                                for field in blocks)), axis=1)
              for start in range(0, blocks.count.shape[1], size)]
    return moments.Moments(*(np.stack(fields, axis=1) for fields in zip(*groups, strict=True)))


class ObservedExamples(NamedTuple):
    """The local run of `observe_examples`, per set of examples in the order given: its
    training indices (None for examples given as data), its losses l_i(w*), the R-hat of
    every example's loss; and the run: its `LLCResult`, the summaries of its chains that did
    not diverge (leading axis: chain; x: the first set's losses, y: the second's, or the
    first's again) and of their blocks of draws (leading axes: chain, chunk; the batches of
    `block_std_error`), the observation interval."""

    indices: tuple[np.ndarray | None, ...]
    losses: tuple[np.ndarray, ...]
    rhats: tuple[np.ndarray, ...]
    run: LLCResult
    chains: moments.Moments
    blocks: moments.Moments
    every: int

    def result_fields(self, names: tuple[str, ...]) -> dict:
        """The fields a result over these examples shares with every other (``num_samples``,
        ``every``, ``moments``, ``run``, ``warnings``), the warnings naming each set's R-hat
        by `names` (`observation_warnings`)."""
        return {"num_samples": int(np.min(self.chains.count)), "every": self.every,
                "moments": self.chains, "run": self.run,
                "warnings": observation_warnings(self.run, dict(zip(names, self.rhats,
                                                                    strict=True)))}


@dataclass(frozen=True, kw_only=True)
class ObservedResult:
    """What the results over examples observed along one local run (`LossKernelResult`,
    `BIFResult`) share: the base of a frozen dataclass (beside `slt.results.Persistable`)
    whose own fields include ``correlation``, a matrix with one row per (training) example.

    Attributes:
      num_samples: draws observed per chain; every: observed every this many steps.
      moments: the chains' streaming summaries (`slt.samplers.moments.Moments`, leading axis
        chain).
      run: the `LLCResult` of the run (lambda_hat, n beta, step size, diagnostics).
      warnings: the run's warnings, and R-hat above 1.1.

    These are the fields `ObservedExamples.result_fields` fills (keyword-only).
    """

    num_samples: int
    every: int
    moments: moments.Moments = field(repr=False)
    run: LLCResult = field(repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def num_chains(self) -> int:
        return int(self.moments.count.shape[0])

    def order(self) -> np.ndarray:
        """The (training) examples in the order of a hierarchical clustering of their rows of
        ``correlation`` (`cluster_order`): examples the network treats alike end up next to
        each other."""
        return cluster_order(self.correlation)

    def _run_attrs(self) -> dict:
        """The run's settings and lambda_hat, as the attrs of `to_xarray`'s Dataset."""
        return {"num_chains": self.num_chains, "num_samples": self.num_samples,
                "every": self.every, "nbeta": self.run.nbeta, "llc": self.run.llc_mean}


def observe_examples(problem: Problem, params: Params, key: jax.Array, values: tuple,
                     examples: dict, *, description: str) -> ObservedExamples:
    """`llc`'s local run observing the losses of one or two sets of examples (`observed_runs`),
    with the sets checked and their losses at w* = `params`.

    Args:
      values: the estimator's (posterior, sampler, plan), as `observed_runs` takes them.
      examples: {argument name: examples as `example_batch` takes them}, one or two sets (x,
        then y); the names are those error messages give.

    Raises:
      InputError: as `example_batch` and `losses_at` for every set (all sets are checked
        before any loss is computed), and as `observed_runs`.
      FloatingPointError: every chain diverged (`llc`).
    """
    require_problem(problem)
    require_params(problem, params)
    checked = {name: example_batch(problem, given, name) for name, given in examples.items()}
    losses = tuple(losses_at(problem, params, batch, name)
                   for name, (batch, _) in checked.items())
    batches = [batch for batch, _ in checked.values()]
    ((run, blocks),) = observed_runs(problem, params, key, values,
                                     observables=Observables(*batches),
                                     description=description)
    chains = chain_summaries(blocks)
    sets = len(batches)
    rhats = tuple(rhat(chains.count, mean, variance) for mean, variance in zip(
        (chains.mean_x, chains.mean_y)[:sets], moments.variances(chains)[:sets], strict=True))
    return ObservedExamples(tuple(indices for _, indices in checked.values()), losses, rhats,
                            run, chains, blocks, values[2].observe_every)


def chain_summaries(blocks: moments.Moments) -> moments.Moments:
    """Every chain's summary (leading axis: chain) from its blocks' (leading axes: chain,
    chunk), merged in float64."""
    return moments.combine(blocks, axis=1)


def block_std_error(blocks: moments.Moments, statistic) -> np.ndarray:
    """Batch-means standard error (module doc) of `statistic(summary)` (a mean, a covariance:
    any function of a `Moments` that keeps its leading axes) from its values on every block
    of at least two draws (`blocks`: leading axes chain, chunk); NaN with fewer than two
    such blocks.

    Example:
      >>> draws = np.arange(8.0).reshape(2, 2, 2, 1)      # chain, block, draw, observable
      >>> blocks = moments.zeros((2, 2), 1, 1, jnp.float64)
      >>> for t in range(2):
      ...     blocks = moments.update(blocks, draws[:, :, t], draws[:, :, t])
      >>> float(block_std_error(blocks, lambda m: m.mean_x)[0])   # sd of 0.5, 2.5, 4.5, 6.5 / 2
      1.2909944487358056
    """
    counts = np.asarray(blocks.count, np.float64).reshape(-1)
    kept = counts >= 2
    values = np.asarray(statistic(blocks), np.float64)
    values = values.reshape(-1, *values.shape[np.ndim(blocks.count):])[kept]
    if values.shape[0] < 2:
        return np.full(values.shape[1:], np.nan)
    weights = counts[kept] / counts[kept].sum()
    weights = weights.reshape(-1, *[1] * (values.ndim - 1))
    deviations = values - np.sum(weights * values, axis=0)
    return np.sqrt(values.shape[0] / (values.shape[0] - 1)
                   * np.sum(weights**2 * deviations**2, axis=0))


def rhat(count, means, variances) -> np.ndarray:
    """Gelman-Rubin R-hat of observables from every chain's (axis 0) number of draws k, means
    and variances: sqrt(((k - 1) / k W + B / k) / W), W the mean within-chain variance,
    B / k the variance of the chain means (the chains' counts are equal: one run). NaN with
    fewer than two chains or draws, or an observable that does not vary."""
    means, variances = np.asarray(means, np.float64), np.asarray(variances, np.float64)
    draws = float(np.min(count)) if np.size(count) else 0.0
    if means.shape[0] < 2 or draws < 2:
        return np.full(means.shape[1:], np.nan)
    within = variances.mean(axis=0)
    pooled = (draws - 1) / draws * within + means.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(within > 0, np.sqrt(pooled / within), np.nan)


def observation_warnings(run: LLCResult, rhats: dict[str, np.ndarray]) -> tuple[str, ...]:
    """The run's warnings, then one per group of observables whose largest R-hat exceeds
    MAX_RHAT (`ChainsDisagree`) or whose R-hat is undefined everywhere (`TooFewDraws`: fewer
    than two observations per chain, or fewer than two chains); each also issued as a Python
    warning of its category."""
    own = []
    for what, values in rhats.items():
        if not np.isfinite(values).any():
            own.append((TooFewDraws, f"TooFewDraws: R-hat of the {what} is undefined (fewer "
                        "than two observations per chain, or one chain): the chains cannot "
                        "be compared and the statistics rest on too few draws; observe more "
                        "often (RunPlan.observe_every), draw more, or run more chains"))
        elif np.nanmax(values) > MAX_RHAT:
            own.append((ChainsDisagree, f"ChainsDisagree: R-hat of the {what} up to "
                        f"{np.nanmax(values):.2f} > {MAX_RHAT}: the chains disagree; run and "
                        "warm up longer"))
    for category, message in own:
        warn_caller(message, category)
    return (*run.warnings, *(message for _, message in own))


def cluster_order(rows: np.ndarray) -> np.ndarray:
    """The rows of a matrix in the leaf order of an average-linkage hierarchical clustering
    of them (Euclidean distance between rows; NaN read as 0; SciPy): rows alike end up next
    to each other. For a correlation matrix, rows are the examples' correlation profiles."""
    rows = np.nan_to_num(np.asarray(rows, np.float64))
    if rows.shape[0] < 3:
        return np.arange(rows.shape[0])
    from scipy.cluster.hierarchy import leaves_list, linkage

    return leaves_list(linkage(rows, method="average"))
