"""The local learning coefficient lambda_hat(w*) by localized SGLD (Lau et al., AISTATS 2025).

    lambda_hat(w*) = n beta (E_{beta, gamma}[L_n(w)] - L_n(w*)),

the expectation over the local tempered posterior
pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2), beta = 1 / log n by default. Conventions
(DESIGN.md): L_n is the per-example negative log-likelihood with its constants; L_n(w*) is
computed on the **full** data and reported as `init_loss`; every chain draws its own minibatches
by shuffled epochs; warmup draws are excluded.

Variance reduction. E[L_n(w)] - L_n(w*) is estimated by the mean over draws of the *paired*
difference L_b(w_t) - L_b(w*), both on the step's minibatch b. Since E_b[L_b(w*)] = L_n(w*), it
is unbiased exactly like the unpaired L_b(w_t) - L_n(w*) (devinterp's estimator), but the
minibatch noise, which dominates the unpaired trace (n beta sd(loss) / sqrt(b), hundreds of
units of lambda per draw at n = 2e4, b = 256), cancels between the two terms: measured on
reduced-rank regression the standard error shrinks by more than 10x. It costs no forward pass:
the per-example losses at w* are computed once on the full data (which L_n(w*) needs anyway) and
L_b(w*) is their mean over the step's minibatch indices. (A loss whose value for one example
depends on the others in its batch, such as batch normalisation in training mode, is not a
per-example loss and is not supported.)
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import arviz as az
import jax
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.llc_calibration import llc_calibrate
from slt.estimators.local_run import (
    MAX_DRIFT,
    default_nbeta,
    drifting,
    restriction_mask,
    trace_drift,
    trace_statistics,
    validate_local_run,
)
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.local_chains import (
    ChainTrace,
    Observables,
    configurational_temperature,
    run_chains,
)
from slt.validation import (
    InputError,
    require_instance,
    require_step_size,
    warn_caller,
)

__all__ = ["LLC_DEFAULTS", "LLCResult", "LocalPart", "llc", "llc_settings", "local_llcs",
           "local_runs"]

# Acceptance below this, or more than this fraction of draws under L_n(w*), earns a warning.
LOW_ACCEPTANCE = 0.5
NEGATIVE_FRACTION = 0.5
# A configurational temperature further than this from 1 (and 3 standard errors) earns a warning.
HOT_TEMPERATURE = 0.1
# step_size="auto" halves a calibrated step whose run is hot at most this many times.
AUTO_HALVINGS = 3


@dataclass(frozen=True)
class LLCResult(Persistable):
    """lambda_hat with its uncertainty, the loss traces and the diagnostics of the run.

    Attributes:
      llc_mean: lambda_hat over all non-diverged chains and post-warmup draws.
      std_error: its standard error, sd / sqrt(ESS) of the pooled per-draw estimates
        n beta (L_b(w_t) - L_b(w*)), ESS their effective sample size (ArviZ).
      llc_per_chain: lambda_hat of each chain (NaN for a diverged chain).
      loss_trace: (chain, draw) minibatch losses L_b(w_t) after warmup (NaN after divergence).
      center_loss_trace: L_b(w*) on the same minibatches.
      init_loss: L_n(w*) on the full data.
      nbeta, step_size, gamma, batch_size, preconditioner: the configuration.
      num_warmup: the steps each chain ran before the kept draws (twice the argument after
        each `step_size="auto"` repetition); num_chains, num_samples (properties): the
        traces' shape, chains by draws kept per chain.
      mala_acceptance: mean MALA acceptance probability (measured every `mala_every` steps).
      fraction_below_init: fraction of draws with L_b(w_t) < L_b(w*): near 1/2 or more means
        w* is not a local minimum (lambda_hat near or below 0).
      rhat, ess: R-hat and bulk ESS of the per-draw estimates (ArviZ).
      temperature, temperature_std_error: the configurational temperature
        T = E[|grad U|^2] / E[Laplacian U] of the draws (U = -log of the local posterior;
        `slt.samplers.local_chains.configurational_temperature`), measured every `mala_every`
        steps: 1 when the chains sample the local posterior. T > 1: the chains run hot (step
        size too large, or minibatch noise), and lambda_hat is biased upward by up to a
        fraction T - 1 (exactly T - 1 when every direction has the same curvature; on a
        Gaussian target lambda_hat / T <= lambda <= lambda_hat). T < 1: the chains have not
        reached the local posterior yet. NaN when not measured.
      drift_z: the change of lambda_hat between the first and second half of the draws in
        standard errors (`trace_drift`); above 3 a warning says the chains have not settled
        (lambda_hat still rising: warmup too short for the step size).
      diverged_at: per chain, the step of divergence (-1 if none); suggested_step_size: a
        smaller step size when any chain diverged, else None.
      compile_time, run_time: seconds.
      warnings: the diagnostics' plain-language warnings.
      distance_trace: (chain, draw) ||w_t - w*||.
      extrapolated: whether the run used Richardson extrapolation over twin chains at
        step_size and step_size / 2 (`llc(extrapolate=True)`); each chain is then a twin pair
        and its traces are the combinations 2 x_{eps/2} - x_eps.
      sampled_weights: how many weights the chains moved: all d, or those `restrict_to`
        selected (the weight-refined LLC; the others stayed at w*).
    """

    llc_mean: float
    std_error: float
    llc_per_chain: np.ndarray
    loss_trace: np.ndarray = field(repr=False)
    center_loss_trace: np.ndarray = field(repr=False)
    init_loss: float
    nbeta: float
    step_size: float
    gamma: float
    batch_size: int
    preconditioner: str | None
    num_warmup: int
    mala_acceptance: float
    fraction_below_init: float
    rhat: float
    ess: float
    diverged_at: np.ndarray
    suggested_step_size: float | None
    compile_time: float
    run_time: float
    warnings: tuple[str, ...] = ()
    distance_trace: np.ndarray = field(default=None, repr=False)
    extrapolated: bool = False
    temperature: float = float("nan")
    temperature_std_error: float = float("nan")
    drift_z: float = float("nan")
    sampled_weights: int | None = None

    @property
    def num_chains(self) -> int:
        return self.loss_trace.shape[0]

    @property
    def num_samples(self) -> int:
        return self.loss_trace.shape[1]

    def llc_trace(self) -> np.ndarray:
        """n beta (L_b(w_t) - L_b(w*)) per chain and draw: the per-draw lambda estimates."""
        return self.nbeta * (self.loss_trace - self.center_loss_trace)

    def summary(self) -> pd.DataFrame:
        """One-row table of the estimate and its diagnostics."""
        return pd.DataFrame(
            [
                {
                    "llc": self.llc_mean,
                    "se": self.std_error,
                    "chains": self.num_chains,
                    "sampled_weights": self.sampled_weights,
                    "draws": self.num_samples,
                    "step_size": self.step_size,
                    "extrapolated": self.extrapolated,
                    "gamma": self.gamma,
                    "nbeta": self.nbeta,
                    "mala_acceptance": self.mala_acceptance,
                    "temperature": self.temperature,
                    "temperature_se": self.temperature_std_error,
                    "below_init": self.fraction_below_init,
                    "rhat": self.rhat,
                    "ess": self.ess,
                    "drift_z": self.drift_z,
                    "diverged_chains": int(np.sum(self.diverged_at >= 0)),
                    "compile_s": self.compile_time,
                    "run_s": self.run_time,
                }
            ]
        )

    def to_xarray(self) -> xr.Dataset:
        """The traces as an xarray Dataset with dims (chain, draw), configuration in attrs."""
        dims = ("chain", "draw")
        data = {
            "loss": (dims, self.loss_trace),
            "center_loss": (dims, self.center_loss_trace),
            "llc": (dims, self.llc_trace()),
        }
        if self.distance_trace is not None:
            data["distance"] = (dims, self.distance_trace)
        return xr.Dataset(
            data,
            coords={"chain": np.arange(self.num_chains), "draw": np.arange(self.num_samples)},
            attrs={
                "llc_mean": self.llc_mean,
                "std_error": self.std_error,
                "init_loss": self.init_loss,
                "nbeta": self.nbeta,
                "step_size": self.step_size,
                "gamma": self.gamma,
                "batch_size": self.batch_size,
                "num_warmup": self.num_warmup,
                "extrapolated": int(self.extrapolated),
                "temperature": self.temperature,
                "temperature_std_error": self.temperature_std_error,
            },
        )

    def to_inference_data(self) -> az.InferenceData:
        """The traces as ArviZ InferenceData (group "sample_stats": loss, llc)."""
        return az.from_dict(sample_stats={"loss": self.loss_trace, "llc": self.llc_trace()})

    def plot(self, **kwargs):
        """Loss traces per chain (with L_n(w*)) and lambda_hat per chain; returns the figure."""
        from slt.plots.llc import plot_llc

        return plot_llc(self, **kwargs)

    def __repr__(self) -> str:
        flags = "" if not self.warnings else f", {len(self.warnings)} warning(s)"
        return (
            f"LLCResult(llc={self.llc_mean:.4g} ± {self.std_error:.2g}, "
            f"chains={self.num_chains}, draws={self.num_samples}, "
            f"mala_acceptance={self.mala_acceptance:.2f}, rhat={self.rhat:.3f}{flags})"
        )


def llc(  # 18 user parameters (Args), flat for help(); 84/171 lines docstring
    problem: Problem,
    params: Params,
    key: jax.Array,
    *,
    num_chains: int = 4,
    num_samples: int = 1000,
    num_warmup: int = 1000,
    step_size: float | str = "auto",
    gamma: float = 1.0,
    nbeta: float | None = None,
    batch_size: int = 256,
    preconditioner: str | None = None,
    include_prior: bool = False,
    mala_every: int = 10,
    chunk_size: int = 500,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    extrapolate: bool = False,
    calibration: dict | None = None,
    restrict_to=None,
) -> LLCResult:
    """Estimate the local learning coefficient lambda_hat(w*) by localized SGLD.

    Args:
      problem: model and data (`Problem` or `Problem.from_loss`).
      params: w*, the trained parameters (unconstrained pytree), ideally a local minimum of L_n.
        lambda(w*) is defined at a minimum of the population loss; at a minimum of L_n (a
        trained network, an MLE) lambda_hat comes out higher by about
        beta n (L_n(w0) - L_n(w*)), the overfitting divided by log n (measured: +5 to +15% on
        reduced-rank regression at n = 20 000; benchmarks/RESULTS.md).
      key: PRNG key.
      num_chains: independent chains (vmapped; sharded over devices when it divides evenly).
      num_samples: draws per chain kept for the estimate (one per step).
      num_warmup: steps per chain discarded first.
      step_size: SGLD step size eps, or "auto": choose it with `llc_calibrate` (the largest
        step size that passes its criterion; see its docstring), then check the run: if a
        chain diverged (it reached a stiffer region than the short calibration runs saw) or
        the configurational temperature T exceeds 1 + 0.1 by more than one standard error (the
        chains ran hot: lambda_hat too high), halve the step and run again with twice the
        warmup (the chains move half as far per step); if the chains had not settled
        (lambda_hat drifting between the halves of the draws by more than 3 standard errors
        and 1%: `slt.estimators.local_run.drifting`), run again at the same step with twice
        the warmup; at most 3 repetitions, each noted in `warnings` (not with a checkpoint,
        whose file belongs to one step size; the temperature check not with mala_every=0,
        which measures no temperature). The warmup is at least what the calibration's
        chains needed to settle (its sweep is lengthened when none settles, as on wide
        networks whose curvatures spread over decades: `llc_calibrate`). A short calibration
        run measures T roughly, the full run more precisely (one standard error, not two:
        a needless repetition costs only time, a hot run costs accuracy). On a
        one-hidden-layer tanh network at f = 0 the default calibration can pick steps with
        T = 1.4-2 and lambda_hat 25-65% above the exact finite-n value.
      gamma: localization strength (gamma / 2) ||w - w*||^2. The default 1 is small against
        n beta times the curvature of L_n in identifiable directions, so it barely biases
        lambda_hat there; measured, gamma = 100 shrank lambda_hat of a 3-parameter linear
        regression at n = 5000 by 25% and of the normal-crossing toys by over 90%. Where the
        set of minima through w* is unbounded (multiplicity m > 1), the length ~1 / sqrt(gamma)
        of it that the localizer admits is part of the estimand: on the normal crossings at
        n = 5000 the exact expectation of lambda_hat is 35-43% below lambda at gamma = 1 and
        20-22% below at gamma = 0.01, but SGLD needs of order n beta / gamma^2 steps to cover
        that valley (benchmarks/RESULTS.md, "Finite-n values").
      nbeta: n beta; default n / log n (beta = 1 / log n).
      batch_size: minibatch size (capped at n).
      preconditioner: None (SGLD) or "rmsprop" (pSGLD; on reduced-rank regression and deep
        linear networks a lower median error but hotter chains than SGLD: see
        `slt.samplers.sgld`).
      include_prior: add the model's log prior to the local posterior (off, as in Lau et al.).
      mala_every: measure the MALA acceptance every this many steps.
      chunk_size: steps per compiled chunk; progress is reported between chunks.
      progress: show progress bars.
      checkpoint: a file (.npz) where the chains' state and traces are saved after every
        chunk; a run stopped by Ctrl-C (which raises `Interrupted`, the finished chunks saved) or
        killed resumes from it when called again with the same arguments, to the bitwise same
        result; a finished run's file is kept and returns the result without sampling. A file
        from other arguments raises `CheckpointError`. `step_size="auto"` calibration is not
        checkpointed: it is repeated (to the same step size). Each save costs about 15 ms
        plus writing the traces so far. See `slt.samplers.checkpoint`.
      extrapolate: remove the O(eps) step-size bias by Richardson extrapolation: every chain
        gets a twin at step_size / 2 and lambda_hat is computed from 2 x_{eps/2} - x_eps
        (`run_chains(extrapolate=True)`). Twice the work and a standard error about three
        times as large at equal draws (tests/samplers/test_local_chains.py: on a Gaussian
        target at eps h = 0.5, lambda_hat 14% high without, 1% low with). It needs both
        twins in equilibrium: where the eps / 2 chains mix too slowly for the run (highly
        singular w*), the combination overshoots downward (measured on a one-hidden-layer
        tanh network at f = 0, n = 5000: 0.38 ± 0.08 against the exact finite-n value 0.53,
        plain 0.87). A `temperature` far above 1 says the bias is worth removing.
      calibration: options for `llc_calibrate` when step_size="auto" (for example
        {"chains_per_candidate": 4, "num_samples": 3000}: a longer sweep measures each
        candidate's temperature more precisely, so the hot side of the criterion bites;
        measured on a one-hidden-layer tanh network at f = 0 it then rejects the step the
        default sweep picks, whose T is 2.06 ± 0.14). Ignored for a numeric step_size.
      restrict_to: the weight-refined LLC (Wang et al. 2024): a pytree of booleans shaped like
        `params`, a `True` / `False` per leaf (a layer) or a boolean array per leaf (single
        weights, a head); only the selected weights are sampled and localized, the others
        stay at w*. n beta, the calibration and the diagnostics keep their meaning, for the
        local posterior of the selected weights. None (default): all weights. A table over
        several parts in one run: `slt.llc_table`.

    Returns:
      An `LLCResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problem not a Problem, params not a finite
        point of it, key not a PRNG key, a count not an integer in range, gamma < 0, nbeta or
        step_size not finite and positive, an unknown preconditioner, restrict_to not
        booleans shaped like params or selecting nothing.
      ValueError: n < 2 without nbeta, L_n(w*) not finite, or (step_size="auto") no step
        size passes the calibration.
      FloatingPointError: every chain diverged (the message suggests a step size).
      Interrupted (a KeyboardInterrupt, `slt.samplers.runner`): a KeyboardInterrupt during a
        checkpointed run; every finished chunk is saved.
      CheckpointError (a ValueError): the file at `checkpoint` belongs to another run.

    Example:
      >>> result = slt.llc(problem, params, key, step_size=1e-2, num_samples=200,
      ...                  num_warmup=200, progress=False)     # at the true parameters
      >>> round(result.llc_mean, 2), round(result.std_error, 2)  # lambda = d/2 = 1 (regular)
      (0.92, 0.08)
    """
    settings = llc_settings(problem, params, key, {
        "num_chains": num_chains, "num_samples": num_samples, "num_warmup": num_warmup,
        "step_size": step_size, "gamma": gamma, "nbeta": nbeta, "batch_size": batch_size,
        "preconditioner": preconditioner, "include_prior": include_prior,
        "mala_every": mala_every, "chunk_size": chunk_size, "progress": progress,
        "checkpoint": checkpoint, "extrapolate": extrapolate, "calibration": calibration,
    })
    mask = restriction_mask(problem, params, restrict_to)
    step_size = settings["step_size"]
    notes = ()
    if step_size == "auto":
        calibration_key, key = jax.random.split(key)
        step_size, settle = calibrated_step_size(problem, params, calibration_key, settings,
                                                 restrict_to=restrict_to)
        settings, notes = with_settling_warmup(settings, [settle])
    (result,) = local_llcs(problem, [params], [LocalPart(0, mask, float(step_size))], key,
                           description="llc", notes=notes, **run_settings(settings))
    return result


def llc_settings(problem, params, key, options: dict) -> dict:
    """`llc`'s keyword arguments (all but restrict_to), checked and resolved: n beta (default
    n / log n), batch_size (capped at n), calibration (a dict). Options missing from `options`
    take llc's defaults, so `llc_table` and `llc_trajectory` pass their users' options here.

    Raises:
      InputError: an unknown option, or the first bad value (as `llc` documents).
    """
    unknown = sorted(set(options) - set(LLC_DEFAULTS))
    if unknown:
        raise InputError(f"unknown llc option(s) {unknown}; the options are {sorted(LLC_DEFAULTS)}")
    settings = {**LLC_DEFAULTS, **options}
    settings["step_size"] = require_step_size("step_size", settings["step_size"])
    calibration = settings["calibration"]
    settings["calibration"] = {} if calibration is None else dict(
        require_instance("calibration", calibration, dict, "a dict of llc_calibrate options")
    )
    validate_local_run(
        problem, params, key, gamma=settings["gamma"], nbeta=settings["nbeta"],
        batch_size=settings["batch_size"], preconditioner=settings["preconditioner"],
        counts={name: (settings[name], minimum) for name, minimum in (
            ("num_chains", 1), ("num_samples", 1), ("num_warmup", 0), ("mala_every", 0),
            ("chunk_size", 1))},
    )
    nbeta = settings["nbeta"]
    settings["nbeta"] = default_nbeta(problem.n) if nbeta is None else float(nbeta)
    settings["batch_size"] = min(int(settings["batch_size"]), problem.n)
    return settings


def run_settings(settings: dict) -> dict:
    """The keyword arguments of `local_llcs` from resolved `llc_settings` (the calibrated
    step size excepted: it goes in the parts)."""
    names = ("num_chains", "num_samples", "num_warmup", "gamma", "nbeta", "batch_size",
             "preconditioner", "include_prior", "mala_every", "chunk_size", "progress",
             "checkpoint", "extrapolate")
    return {name: settings[name] for name in names} | {
        "repeat_when_hot": settings["step_size"] == "auto"}


class LocalPart(NamedTuple):
    """One estimate of a batched local run (`local_llcs`): chains around the centre with index
    `center`, moving the weights `mask` selects (flat booleans; None: all), at `step_size`."""

    center: int
    mask: np.ndarray | None
    step_size: float


def local_llcs(problem: Problem, centers: list[Params], parts: list[LocalPart], key: jax.Array,
               **settings) -> list[LLCResult]:
    """lambda_hat for several parts (centres, restrictions, step sizes) in one compiled run:
    `local_runs`' results without their traces (same arguments)."""
    return [result for result, _ in local_runs(problem, centers, parts, key, **settings)]


def local_runs(  # the settings of llc, batched; see llc's Args
    problem: Problem,
    centers: list[Params],
    parts: list[LocalPart],
    key: jax.Array,
    *,
    num_chains: int,
    num_samples: int,
    num_warmup: int,
    repeat_when_hot: bool,
    gamma: float,
    nbeta: float,
    batch_size: int,
    preconditioner: str | None,
    include_prior: bool,
    mala_every: int,
    chunk_size: int,
    progress: bool,
    description: str,
    checkpoint,
    extrapolate: bool,
    notes: tuple[str, ...] = (),
    observables: Observables | None = None,
) -> list[tuple[LLCResult, ChainTrace]]:
    """lambda_hat for several parts (centres, restrictions, step sizes) in one compiled run,
    with each part's chains.

    Every part gets `num_chains` chains; all chains of all parts are vmapped in one
    `run_chains` program (the centres, masks and step sizes are its runtime arguments), and
    each part's chains are summarised on their own (`summarise_trace`). With
    `repeat_when_hot` (`step_size="auto"`), a part whose chains diverged or ran hot is run
    again at half its step with twice the warmup (`llc`'s Args), and a part whose chains
    had not settled (`drifting`) at the same step with twice the warmup, all such parts
    together, at most `AUTO_HALVINGS` times; not with a checkpoint (the file belongs to one
    run). `notes` start every part's warnings. `llc` is the case of one part. `observables`
    (`slt.samplers.local_chains.Observables`, its `start` set here to the warmup of each
    run) are summarised along every chain (`slt.estimators.observed`).

    Returns:
      One (`LLCResult`, the `ChainTrace` of its chains: warmup included, `moments` with
      `observables`) per part, in order.
    """
    parts = list(parts)
    results: list[tuple[LLCResult, ChainTrace] | None] = [None] * len(parts)
    repeats = [0] * len(parts)
    notes: list[list[str]] = [list(notes) for _ in parts]
    pending = list(range(len(parts)))
    while pending:
        trace = _run_parts(
            problem, centers, [parts[i] for i in pending], key, num_chains=num_chains,
            num_steps=num_warmup + num_samples, gamma=gamma, nbeta=nbeta,
            batch_size=batch_size, preconditioner=preconditioner, include_prior=include_prior,
            mala_every=mala_every, chunk_size=chunk_size, progress=progress,
            description=description, checkpoint=checkpoint, extrapolate=extrapolate,
            observables=None if observables is None else observables._replace(start=num_warmup),
        )
        repeat = []
        for row, index in enumerate(pending):
            part = parts[index]
            own = _chains_of(trace, slice(row * num_chains, (row + 1) * num_chains), part.center)
            found, halve = None, False
            if repeat_when_hot and checkpoint is None and repeats[index] < AUTO_HALVINGS:
                found, halve = _auto_run_problem(own, num_warmup, nbeta)
            if found is not None:
                step_size = part.step_size / 2 if halve else part.step_size
                notes[index].append(
                    f"step_size='auto': the run at the calibrated step {part.step_size:.3g} "
                    f"{found}; repeated at {step_size:.3g} with {2 * num_warmup} warmup steps"
                )
                parts[index] = part._replace(step_size=step_size)
                repeats[index] += 1
                repeat.append(index)
                continue
            results[index] = summarise_trace(
                own, init_loss=own.center_full_loss, nbeta=nbeta, step_size=part.step_size,
                gamma=float(gamma), batch_size=batch_size, preconditioner=preconditioner,
                num_warmup=num_warmup, extrapolated=bool(extrapolate), notes=notes[index],
                sampled_weights=problem.dim if part.mask is None else int(part.mask.sum()),
            ), own
        pending, num_warmup = repeat, 2 * num_warmup
    return results


# llc's keyword arguments (restrict_to aside) and their defaults, for `llc_settings`.
LLC_DEFAULTS = {
    name: parameter.default for name, parameter in inspect.signature(llc).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name != "restrict_to"
}


def _run_parts(problem, centers, parts, key, *, num_chains, **options):
    """`run_chains` with `num_chains` chains per part, the parts' chains one after another."""
    several = len(centers) > 1
    masks = [part.mask for part in parts]
    restricted = any(mask is not None for mask in masks)
    return run_chains(
        problem, centers if several else centers[0], key, num_chains=num_chains * len(parts),
        step_size=np.repeat([part.step_size for part in parts], num_chains),
        center_of_chain=np.repeat([part.center for part in parts], num_chains) if several
        else None,
        mask=np.repeat(np.stack([np.ones(problem.dim, bool) if mask is None else mask
                                 for mask in masks]), num_chains, axis=0) if restricted else None,
        **options,
    )


def _chains_of(trace, rows: slice, center: int):
    """The part of a `ChainTrace` that belongs to the chains `rows` around centre `center`."""
    per_chain = ("loss", "center_loss", "log_acceptance", "gradient_product", "laplacian",
                 "distance", "diverged_at", "final_position")
    full_loss = trace.center_full_loss
    return trace._replace(
        **{name: getattr(trace, name)[rows] for name in per_chain},
        center_full_loss=float(np.ravel(full_loss)[center]),
        moments=None if trace.moments is None else type(trace.moments)(
            *(field[rows] for field in trace.moments)),
    )


def calibrated_step_size(problem, params, key, settings, *, restrict_to=None
                         ) -> tuple[float, int]:
    """The step size `llc_calibrate` chooses for resolved `llc_settings` (gamma, nbeta,
    batch_size, preconditioner, include_prior, progress, and the further options
    `calibration`) and the restriction `restrict_to`, and the warmup its chains needed to
    settle (`CalibrationResult.num_warmup`)."""
    fixed = {name: settings[name] for name in (
        "gamma", "nbeta", "batch_size", "preconditioner", "include_prior", "progress")}
    calibration = settings["calibration"]
    clashing = sorted(set(calibration) & {*fixed, "gammas", "restrict_to"})
    if clashing:
        raise InputError(
            f"calibration options {clashing} are set by llc's own arguments; pass them there"
        )
    result = llc_calibrate(problem, params, key, **fixed, restrict_to=restrict_to,
                           **calibration)
    return result.step_size, result.num_warmup


def with_settling_warmup(settings: dict, settle: list[int]) -> tuple[dict, tuple[str, ...]]:
    """`settings` with num_warmup raised to the longest warmup the calibration's chains
    needed to settle (`settle`, one per calibration), and the note that says so (none when
    num_warmup was long enough)."""
    needed = max(settle)
    if needed <= settings["num_warmup"]:
        return settings, ()
    note = (f"step_size='auto': the calibration's chains needed {needed} warmup steps to "
            f"settle; num_warmup raised from {settings['num_warmup']} to {needed}")
    return settings | {"num_warmup": needed}, (note,)


def _auto_run_problem(trace, num_warmup, nbeta) -> tuple[str | None, bool]:
    """Why a run at a calibrated step size must be repeated, and whether at half the step:
    diverged chains, or chains hotter than 1 + HOT_TEMPERATURE by more than one standard
    error (halve); chains that had not settled (`drifting`; the same step, a longer
    warmup). (None, False) when the run stands."""
    diverged = trace.diverged_at[trace.diverged_at >= 0]
    if diverged.size:
        return f"{diverged.size} chain(s) diverged (first at step {int(diverged.min())})", True
    temperature, temperature_se = _temperature(trace, num_warmup)
    if temperature - 1 > HOT_TEMPERATURE + temperature_se:
        return (f"was hot (configurational temperature {temperature:.2f} ± "
                f"{temperature_se:.2f})"), True
    values = nbeta * (trace.loss[:, num_warmup:] - trace.center_loss[:, num_warmup:])
    if drifting(values, trace_drift(values)):
        return "had not settled (lambda_hat drifting between the halves of the draws)", False
    return None, False


def _temperature(trace, num_warmup) -> tuple[float, float]:
    """Configurational temperature (and its se) of the non-diverged chains after warmup."""
    healthy = trace.diverged_at < 0
    return configurational_temperature(
        trace.gradient_product[:, num_warmup:][healthy], trace.laplacian[:, num_warmup:][healthy]
    )


def summarise_trace(
    trace,
    *,
    init_loss,
    nbeta,
    step_size,
    gamma,
    batch_size,
    preconditioner,
    num_warmup,
    extrapolated=False,
    notes=(),
    sampled_weights=None,
) -> LLCResult:
    """Turn a `ChainTrace` into an `LLCResult` (estimate, standard error, diagnostics)."""
    loss = trace.loss[:, num_warmup:]
    center_loss = trace.center_loss[:, num_warmup:]
    healthy = trace.diverged_at < 0
    if not healthy.any():
        raise FloatingPointError(
            f"every chain diverged (first at step {int(trace.diverged_at.min())}); "
            f"try step_size={step_size / 10:.3g}"
        )
    per_draw = nbeta * (loss - center_loss)
    per_chain = np.where(healthy, per_draw.mean(axis=1), np.nan)
    kept = per_draw[healthy]
    mean, std_error, ess, rhat = trace_statistics(kept)
    acceptance = np.exp(trace.log_acceptance[:, num_warmup:][healthy])
    mala = float(np.nanmean(acceptance)) if np.isfinite(acceptance).any() else float("nan")
    temperature, temperature_se = _temperature(trace, num_warmup)
    return _with_warnings(LLCResult(
        llc_mean=mean,
        std_error=std_error,
        llc_per_chain=per_chain,
        loss_trace=loss,
        init_loss=init_loss,
        nbeta=nbeta,
        step_size=step_size,
        gamma=gamma,
        batch_size=batch_size,
        preconditioner=preconditioner,
        num_warmup=num_warmup,
        center_loss_trace=center_loss,
        mala_acceptance=mala,
        fraction_below_init=float(np.mean(kept < 0)),
        rhat=rhat,
        ess=ess,
        diverged_at=trace.diverged_at,
        suggested_step_size=None if healthy.all() else step_size / 10,
        compile_time=trace.compile_time,
        run_time=trace.run_time,
        distance_trace=trace.distance[:, num_warmup:],
        extrapolated=extrapolated,
        temperature=temperature,
        temperature_std_error=temperature_se,
        drift_z=trace_drift(kept),
        sampled_weights=sampled_weights,
    ), kept, notes)


def _with_warnings(result: LLCResult, kept: np.ndarray, notes) -> LLCResult:
    """`result` with its warnings: `notes`, then what its diagnostics earn (`_diagnostics`),
    each also issued as a Python warning (attributed to the caller of `llc`, `llc_table`,
    ...: `warn_caller`)."""
    messages = [*notes, *_diagnostics(result, kept)]
    for message in messages:
        warn_caller(message)
    return replace(result, warnings=tuple(messages))


def _diagnostics(result: LLCResult, kept: np.ndarray) -> list[str]:
    """The plain-language warnings a run earns: diverged chains, low MALA acceptance, draws
    below L_n(w*), hot or cold chains, R-hat, drift between the halves of `kept` (the
    non-diverged chains' per-draw estimates)."""
    messages = []
    diverged = result.diverged_at >= 0
    if diverged.any():
        steps = ", ".join(str(int(s)) for s in result.diverged_at[diverged])
        messages.append(
            f"{int(diverged.sum())} chain(s) diverged (at step {steps}) and were stopped; "
            f"try step_size={result.suggested_step_size:.3g}"
        )
    if result.mala_acceptance < LOW_ACCEPTANCE:
        messages.append(
            f"MALA acceptance {result.mala_acceptance:.2f} is low: the step size is too large"
        )
    if result.fraction_below_init > NEGATIVE_FRACTION:
        messages.append(
            f"{result.fraction_below_init:.0%} of draws lie below L_n(w*): w* is not a local "
            f"minimum (lambda_hat {result.llc_mean:.3g}); fit it first or increase gamma"
        )
    temperature, temperature_se = result.temperature, result.temperature_std_error
    if temperature - 1 > max(HOT_TEMPERATURE, 3 * temperature_se):
        messages.append(
            f"the chains run hot (configurational temperature {temperature:.2f} ± "
            f"{temperature_se:.2f}): lambda_hat may be up to {temperature - 1:.0%} too high; "
            "use a smaller step size or extrapolate=True"
        )
    elif 1 - temperature > max(HOT_TEMPERATURE, 3 * temperature_se):
        messages.append(
            f"the chains are cold (configurational temperature {temperature:.2f} ± "
            f"{temperature_se:.2f}): they have not reached the local posterior; warm up "
            "longer or use a larger step size"
        )
    if result.rhat > 1.1:
        messages.append(f"R-hat {result.rhat:.2f} > 1.1: chains disagree; run and warm up longer")
    if result.drift_z > MAX_DRIFT:
        first, second = (kept[:, part].mean() for part in np.array_split(
            np.arange(kept.shape[1]), 2))
        messages.append(
            f"lambda_hat drifts from {first:.3g} (first half of the draws) to {second:.3g} "
            f"(second half), {result.drift_z:.1f} standard errors: the chains have not "
            "settled; warm up longer (num_warmup) or draw more"
        )
    return messages
