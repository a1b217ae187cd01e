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

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.calibration import CalibrationResult, llc_calibrate
from slt.estimators.local.center import (
    CenterMeasurements,
    MinimumCheck,
    measure_center,
    minimum_check,
    start_scale,
)
from slt.estimators.local.diagnostics import RunNote, diagnose, warning_name
from slt.estimators.local.posterior import (
    LocalPosterior,
    check_local_run,
    drifting,
    restriction_mask,
    trace_drift,
    trace_statistics,
)
from slt.problem import Params, Problem
from slt.results import Persistable, warnings_note
from slt.samplers.config import SGLD, RunPlan, Sampler, StochasticGradient
from slt.samplers.local_chains import (
    ChainTargets,
    ChainTrace,
    Observables,
    configurational_temperature,
    run_chains,
    virial_temperature,
)
from slt.validation import warn_caller

__all__ = ["LLCResult", "LocalPart", "LocalRun", "PartSettings", "llc", "local_runs"]

# step_size="auto" repeats a run whose temperature exceeds 1 by this (and a standard error).
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
      loss_trace: (chain, draw) minibatch losses L_b(w_t) after warmup (NaN after divergence;
        an exact sampler's: L_n(w_t)).
      center_loss_trace: L_b(w*) on the same minibatches (an exact sampler's: L_n(w*)).
      init_loss: L_n(w*) on the full data.
      nbeta, step_size, gamma, batch_size, preconditioner: the configuration (an exact
        sampler's step_size: its adapted step, the median over chains; its batch_size: n).
      sampler: the sampler's name: "SGLD", "SGHMC", "MALA" or "HMC" (`slt.samplers`).
      num_warmup: the steps each chain ran before the kept draws (twice the argument after
        each `step_size="auto"` repetition); num_chains, num_samples (properties): the
        traces' shape, chains by draws kept per chain.
      mala_acceptance: SGLD: the mean MALA acceptance probability its proposals would have
        had (measured every `mala_every` steps); MALA, HMC: their own mean acceptance
        probability.
      fraction_below_init: fraction of draws with L_b(w_t) < L_b(w*): near 1/2 or more means
        w* is not a local minimum (lambda_hat near or below 0).
      rhat, ess: R-hat and bulk ESS of the per-draw estimates (ArviZ).
      temperature, temperature_std_error: the configurational temperature
        T = E[|grad U|^2] / E[Laplacian U] of the draws (U = -log of the local posterior;
        `slt.samplers.local_chains.configurational_temperature`), measured every `mala_every`
        steps (exact samplers: every 10): 1 when the chains sample the local posterior.
        T > 1: the chains run hot (step size too large, or minibatch noise), and lambda_hat
        is biased upward by up to a
        fraction T - 1 (exactly T - 1 when every direction has the same curvature; on a
        Gaussian target lambda_hat / T <= lambda <= lambda_hat). T < 1: the chains have not
        reached the local posterior yet. NaN when not measured.
      virial_temperature, virial_temperature_std_error: T_v = E[(w - w*) . grad U] / k over
        the draws (k the sampled weights; `slt.samplers.local_chains.virial_temperature`),
        measured every step: 1 when the chains sample the local posterior. It sees what the
        configurational temperature cannot: T_v < 1 when the chains have not spread along
        directions where L_n is flat (only gamma holds them), however well they sample the
        curved ones.
      drift_z: the change of lambda_hat between the first and second half of the draws in
        standard errors (`trace_drift`); above 3 a warning says the chains have not settled
        (lambda_hat still rising: warmup too short for the step size).
      diverged_at: per chain, the step of divergence (-1 if none); suggested_step_size: a
        smaller step size when any chain diverged, else None.
      compile_time, run_time: seconds.
      warnings: the diagnostics' plain-language warnings, each starting with its name
        (`warning_names`; `slt.estimators.local.diagnostics`: what each means, its
        threshold and its remedy).
      distance_trace: (chain, draw) ||w_t - w*||.
      extrapolated: whether the run used Richardson extrapolation over twin chains at
        step_size and step_size / 2 (`SGLD(extrapolate=True)`); each chain is then a twin pair
        and its traces are the combinations 2 x_{eps/2} - x_eps.
      sampled_weights: how many weights the chains moved: all d, or those `restrict_to`
        selected (the weight-refined LLC; the others stayed at w*).
      gradients: the per-example gradients the estimate cost: every chain step of its runs
        (repetitions included) times the batch size (n for an exact sampler; twice for
        extrapolated twins and for SGHMC's control variates), plus the calibration's
        (`CalibrationResult.gradients`).
      stop_reason: why the run stopped where it did (`slt.samplers.run_length`): the planned
        draws made, the standard error's target reached, or the budget spent first.
      gradient_z, shortfall: whether w* is a minimum of L_n (`slt.estimators.local.center`):
        the gradient's score statistic above its value at a population minimum, in its
        standard deviations, and the expected shortfall of lambda_hat it causes.
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
    virial_temperature: float = float("nan")
    virial_temperature_std_error: float = float("nan")
    drift_z: float = float("nan")
    sampled_weights: int | None = None
    sampler: str = "SGLD"
    gradient_z: float = float("nan")
    shortfall: float = float("nan")
    gradients: int = 0
    stop_reason: str = ""

    @property
    def num_chains(self) -> int:
        return self.loss_trace.shape[0]

    @property
    def num_samples(self) -> int:
        return self.loss_trace.shape[1]

    @property
    def warning_names(self) -> tuple[str, ...]:
        """The names of the warnings (`slt.estimators.local.diagnostics`), e.g. "ColdChains";
        empty for a run that raised none."""
        return tuple(warning_name(message) for message in self.warnings)

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
                    "warmup": self.num_warmup,
                    "gradients": self.gradients,
                    "step_size": self.step_size,
                    "extrapolated": self.extrapolated,
                    "gamma": self.gamma,
                    "nbeta": self.nbeta,
                    "mala_acceptance": self.mala_acceptance,
                    "temperature": self.temperature,
                    "temperature_se": self.temperature_std_error,
                    "virial_temperature": self.virial_temperature,
                    "virial_temperature_se": self.virial_temperature_std_error,
                    "below_init": self.fraction_below_init,
                    "rhat": self.rhat,
                    "ess": self.ess,
                    "drift_z": self.drift_z,
                    "diverged_chains": int(np.sum(self.diverged_at >= 0)),
                    "compile_s": self.compile_time,
                    "run_s": self.run_time,
                    "stopped": self.stop_reason,
                    "warnings": ", ".join(self.warning_names),
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
        flags = warnings_note(self.warnings)
        return (
            f"LLCResult(llc={self.llc_mean:.4g} ± {self.std_error:.2g}, "
            f"chains={self.num_chains}, draws={self.num_samples}, "
            f"mala_acceptance={self.mala_acceptance:.2f}, rhat={self.rhat:.3f}{flags})"
        )


def llc(
    problem: Problem,
    params: Params,
    key: jax.Array,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler = SGLD(),
    plan: RunPlan = RunPlan(),
) -> LLCResult:
    """Estimate the local learning coefficient lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*)).

    The expectation is over the local posterior `posterior` around w* = `params`
    (`slt.LocalPosterior`: gamma, n beta, the prior, the weights sampled), drawn by `sampler`
    (`slt.samplers.SGLD`, the default, or an exact full-batch sampler `slt.samplers.MALA` /
    `slt.samplers.HMC`) for as long as `plan` says (`slt.RunPlan`: chains, warmup, draws,
    chunks, checkpoint, progress).

    SGLD's step size "auto" (the default): chosen by `llc_calibrate` (the largest step size
    at which its criterion's bounds, read from curves fitted through the candidates, hold;
    `slt.samplers.Calibration`), then the run is checked: if a
    chain diverged (it reached a stiffer region than the short calibration runs saw) or the
    configurational temperature T exceeds 1 + 0.1 by more than one standard error (the chains
    ran hot: lambda_hat too high), the step is halved and the run repeated with twice the
    warmup (the chains move half as far per step); if the chains had not settled (lambda_hat
    drifting between the halves of the draws by more than 3 standard errors and 1%:
    `slt.estimators.local.posterior.drifting`), the run is repeated at the same step with twice the
    warmup; at most 3 repetitions, each noted in `warnings` (not with a checkpoint, whose file
    belongs to one step size; the temperature check not with mala_every=0, which measures no
    temperature). The warmup is at least what the calibration's chains needed to settle. On a
    one-hidden-layer tanh network at f = 0 the former rule (`Calibration(choice="largest")`,
    the largest passing candidate) can pick steps with
    T = 1.4-2 and lambda_hat 25-65% above the exact finite-n value: a longer sweep
    (`Calibration(chains_per_candidate=4, num_samples=3000)`) rejects them, and an exact
    sampler (`sampler=slt.samplers.MALA()`) has no step-size bias at all.

    w* should be a local minimum of L_n. lambda(w*) is defined at a minimum of the population
    loss; at a minimum of L_n (a trained network, an MLE) lambda_hat comes out higher by about
    beta n (L_n(w0) - L_n(w*)), the overfitting divided by log n (measured: +5 to +15% on
    reduced-rank regression at n = 20 000; benchmarks/RESULTS.md).

    Args:
      problem: model and data (`Problem` or `Problem.from_loss`).
      params: w*, the trained parameters (unconstrained pytree).
      key: PRNG key.
      posterior: the local posterior (`slt.LocalPosterior`; default gamma = 1,
        n beta = n / log n, no prior, every weight).
      sampler: `slt.samplers.SGLD()` (default), `SGHMC()`, `MALA()` or `HMC()`.
      plan: `slt.RunPlan()` (default 4 chains started apart, warmup until stationary and
        draws until the standard error is 5% of lambda_hat, at least 1000 of each, at most
        10 000 steps: `slt.samplers.run_length`).

    Returns:
      An `LLCResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problem not a Problem, params not a finite
        point of it, key not a PRNG key, posterior / sampler / plan not such values,
        restrict_to not booleans shaped like params or selecting nothing (the values check
        their own fields when built).
      ValueError: n < 2 without nbeta, L_n(w*) not finite, or (step_size="auto") no step
        size passes the calibration.
      FloatingPointError: every chain diverged (the message suggests a step size).
      Interrupted (a KeyboardInterrupt, `slt.samplers.runner`): a KeyboardInterrupt during a
        checkpointed run; every finished chunk is saved.
      CheckpointError (a ValueError): the file at `plan.checkpoint` belongs to another run.

    Example:
      >>> result = slt.llc(problem, params, key, sampler=slt.samplers.SGLD(step_size=1e-2),
      ...                  plan=slt.RunPlan(num_samples=200, num_warmup=200, progress=False))
      >>> round(result.llc_mean, 2), round(result.std_error, 2)  # lambda = d/2 = 1 (regular)
      (0.92, 0.08)
    """
    posterior = check_local_run(problem, params, key, posterior, sampler, plan)
    mask = restriction_mask(problem, params, posterior.restrict_to)
    (chosen,), plan, notes, key = chosen_settings(problem, params, key,
                                                  LocalRun(posterior, sampler, plan),
                                                  [posterior.restrict_to])
    ((result, _),) = local_runs(problem, [params],
                                [LocalPart(0, mask, chosen.step_size, chosen.gamma)], key,
                                LocalRun(posterior, sampler, plan), description="llc",
                                notes=notes)
    return replace(result, gradients=result.gradients + chosen.gradients)


class LocalRun(NamedTuple):
    """The three values of a local run, resolved: the posterior with n beta filled in, the
    sampler, the plan (its warmup raised to what calibration needed)."""

    posterior: LocalPosterior
    sampler: Sampler
    plan: RunPlan


def calibrates(sampler: Sampler) -> bool:
    """Whether `sampler`'s step size is chosen by `llc_calibrate` (SGLD or SGHMC with "auto"
    or a `Calibration`)."""
    return isinstance(sampler, StochasticGradient) and sampler.calibration is not None


class PartSettings(NamedTuple):
    """The step size and gamma one part's chains run at, and what choosing them cost: the
    per-example gradients of its calibration (`CalibrationResult.gradients`; 0 when given)
    and the calibration itself (None when the step size was given)."""

    step_size: float
    gamma: float
    gradients: int = 0
    calibration: CalibrationResult | None = None


def chosen_settings(problem: Problem, center: Params, key: jax.Array, run: LocalRun,
                    restrictions: list) -> tuple[list[PartSettings], RunPlan, tuple[str, ...],
                                                 jax.Array]:
    """The `PartSettings` of every part (one per `restrict_to` of `restrictions`), the plan,
    the notes for the results, and the key left for the chains.

    SGLD with a numeric step: that step and the posterior's gamma for every part (the key
    unchanged). SGLD calibrating: the key is split into (calibration key, chains' key) and
    `llc_calibrate` runs at `center` with the calibration key for every part's restriction
    (the chains' program is compiled once for all of them, the masks being its runtime
    arguments), each part at its own chosen step size and gamma (the posterior's, or with
    `Calibration(gammas=...)` the calibration's choice), and the plan's warmup raised to the
    longest the calibrations' chains needed to settle (with a note). An exact sampler: its
    fixed step, or with "auto" the first guess 1 / (n beta) that its warmup adapts
    (`slt.samplers.exact`), for every part.
    """
    posterior, sampler, plan = run
    if not calibrates(sampler):
        step = sampler.step_size if sampler.step_size != "auto" else 1.0 / posterior.nbeta
        return [PartSettings(float(step), posterior.gamma)] * len(restrictions), plan, (), key
    calibration_key, key = jax.random.split(key)
    found = [llc_calibrate(problem, center, calibration_key,
                           posterior=replace(posterior, restrict_to=restrict_to),
                           sampler=sampler, progress=plan.progress)
             for restrict_to in restrictions]
    needed = max(result.num_warmup for result in found)
    notes = ()
    if plan.num_warmup != "auto" and needed > plan.num_warmup:
        notes = (f"step_size='auto': the calibration's chains needed {needed} warmup steps to "
                 f"settle; num_warmup raised from {plan.num_warmup} to {needed}",)
        plan = replace(plan, num_warmup=needed)
    return ([PartSettings(result.step_size, result.gamma, result.gradients, result)
             for result in found], plan, notes, key)


class LocalPart(NamedTuple):
    """One estimate of a batched local run (`local_runs`): chains around the centre with index
    `center`, moving the weights `mask` selects (flat booleans; None: all), at `step_size`,
    localized by `gamma`."""

    center: int
    mask: np.ndarray | None
    step_size: float
    gamma: float


def local_runs(problem: Problem, centers: list[Params], parts: list[LocalPart],
               key: jax.Array, run: LocalRun, *, description: str, notes: tuple[str, ...] = (),
               observables: Observables | None = None, center_keys: list | None = None
               ) -> list[tuple[LLCResult, ChainTrace]]:
    """lambda_hat for several parts (centres, restrictions, step sizes, gammas) in one
    compiled run, with each part's chains.

    Every part gets `run.plan.num_chains` chains; all chains of all parts are vmapped in one
    `run_chains` program (the centres, masks, step sizes and gammas are its runtime
    arguments), and each part's chains are summarised on their own (`summarise_trace`).
    Every part draws from `key` itself, or with `center_keys` from its centre's key
    (`ChainTargets.keys`): with a fixed plan, a part's numbers are those of a run of that
    part alone with that key, whatever parts run beside it. (With an "auto" length every
    part keeps its own warmup and its draws until every part is done:
    `slt.samplers.run_length`.) When SGLD's step size
    was calibrated (`calibrates`), a part whose chains diverged or ran hot is run again at
    half its step with twice the warmup (`llc`'s docstring), and a part whose chains had not
    settled (`drifting`) at the same step with twice the warmup, all such parts together, at
    most `AUTO_HALVINGS` times; not with a checkpoint (the file belongs to one run). `notes`
    start every part's warnings. `llc` is the case of one part. `observables`
    (`slt.samplers.local_chains.Observables`) are summarised along every chain from the end
    of the warmup (`slt.estimators.local.observed`).

    Returns:
      One (`LLCResult`, the `ChainTrace` of its chains: warmup included, `moments` with
      `observables`) per part, in order.
    """
    posterior, sampler, plan = run
    parts = list(parts)
    results: list[tuple[LLCResult, ChainTrace] | None] = [None] * len(parts)
    repeats = [0] * len(parts)
    notes: list[list[str]] = [list(notes) for _ in parts]
    repeat_when_hot = calibrates(sampler) and plan.checkpoint is None
    batch_size = (min(sampler.batch_size, problem.n) if isinstance(sampler, StochasticGradient)
                  else problem.n)
    per_step = getattr(sampler, "gradients_per_step", 1)  # an exact sampler's: its batch, n
    spent = [0] * len(parts)
    measured = [measure_center(problem, center) for center in centers]
    scales = None if plan.start == "center" else [
        start_scale(measured[part.center], nbeta=posterior.nbeta, gamma=part.gamma)
        for part in parts]
    minima = [minimum_check(problem, measured[part.center], nbeta=posterior.nbeta,
                            gamma=part.gamma, mask=part.mask) for part in parts]
    pending = list(range(len(parts)))
    while pending:
        trace = run_chains(
            problem, centers if len(centers) > 1 else centers[0], key,
            _targets(problem, posterior, [parts[i] for i in pending],
                     None if scales is None else [scales[i] for i in pending],
                     [key if center_keys is None else center_keys[parts[i].center]
                      for i in pending], measured, several=len(centers) > 1),
            sampler=sampler, plan=plan, observables=observables, description=description,
        )
        num_chains = plan.num_chains
        repeat = []
        for row, index in enumerate(pending):
            part = parts[index]
            own = _chains_of(trace, slice(row * num_chains, (row + 1) * num_chains), part.center)
            spent[index] += own.loss.size * batch_size * per_step
            found, halve = None, False
            if repeat_when_hot and repeats[index] < AUTO_HALVINGS:
                found, halve = _auto_run_problem(own, posterior.nbeta,
                                                 settling=plan.num_warmup != "auto")
            if found is not None:
                step_size = part.step_size / 2 if halve else part.step_size
                longer = ("" if plan.num_warmup == "auto" else
                          f" with {2 * plan.num_warmup} warmup steps")
                notes[index].append(
                    f"step_size='auto': the run at the calibrated step {part.step_size:.3g} "
                    f"{found}; repeated at {step_size:.3g}{longer}"
                )
                parts[index] = part._replace(step_size=step_size)
                repeats[index] += 1
                repeat.append(index)
                continue
            used_step = part.step_size if own.step_size is None else float(
                np.median(own.step_size))
            results[index] = summarise_trace(
                own, LocalRun(replace(posterior, gamma=part.gamma), sampler, plan), used_step,
                batch_size=batch_size, notes=notes[index], gradients=spent[index],
                sampled_weights=problem.dim if part.mask is None else int(part.mask.sum()),
                minimum=minima[index],
            ), own
        pending = repeat
        if plan.num_warmup != "auto":
            plan = replace(plan, num_warmup=2 * plan.num_warmup)
    return results


def _targets(problem: Problem, posterior: LocalPosterior, parts: list[LocalPart],
             scales: list[np.ndarray] | None, keys: list, measured: list[CenterMeasurements],
             *, several: bool) -> ChainTargets:
    """The `ChainTargets` of `parts` (one entry each) under `posterior`, the chains started
    apart by their `start_scale` (`scales`, one per part; None: at the centre), each part
    drawing from its own key (`keys`), grad L_n at each centre from its `measure_center`
    (`measured`, one per centre)."""
    masks = [part.mask for part in parts]
    restricted = any(mask is not None for mask in masks)
    return ChainTargets(
        step_size=np.array([part.step_size for part in parts]),
        gamma=np.array([part.gamma for part in parts], dtype=float),
        nbeta=np.full(len(parts), posterior.nbeta),
        include_prior=posterior.include_prior,
        center_of_part=np.array([part.center for part in parts]) if several else None,
        mask=np.stack([np.ones(problem.dim, bool) if mask is None else mask for mask in masks])
        if restricted else None,
        start_scale=None if scales is None else np.stack(scales),
        keys=jnp.stack(keys),
        center_gradient=np.stack([center.gradient for center in measured]),
    )


def _chains_of(trace, rows: slice, center: int):
    """The part of a `ChainTrace` that belongs to the chains `rows` around centre `center`."""
    per_chain = ("loss", "center_loss", "log_acceptance", "gradient_product", "laplacian",
                 "distance", "virial", "diverged_at", "final_position", "warmup_steps",
                 "kept_steps", "stop_reason")
    full_loss = trace.center_full_loss
    return trace._replace(
        **{name: getattr(trace, name)[rows] for name in per_chain},
        step_size=None if trace.step_size is None else trace.step_size[rows],
        center_full_loss=float(np.ravel(full_loss)[center]),
        moments=None if trace.moments is None else type(trace.moments)(
            *(field[rows] for field in trace.moments)),
    )


def _auto_run_problem(trace, nbeta, *, settling: bool) -> tuple[str | None, bool]:
    """Why a run at a calibrated step size must be repeated, and whether at half the step:
    diverged chains, or chains hotter than 1 + HOT_TEMPERATURE by more than one standard
    error (halve); with `settling` (a fixed warmup), chains that had not settled
    (`drifting`; the same step, a longer warmup). (None, False) when the run stands."""
    diverged = trace.diverged_at[trace.diverged_at >= 0]
    if diverged.size:
        return f"{diverged.size} chain(s) diverged (first at step {int(diverged.min())})", True
    temperature, temperature_se = _temperature(trace)
    if temperature - 1 > HOT_TEMPERATURE + temperature_se:
        return (f"was hot (configurational temperature {temperature:.2f} ± "
                f"{temperature_se:.2f})"), True
    kept = _kept(trace)
    values = nbeta * (trace.loss[:, kept] - trace.center_loss[:, kept])
    if settling and drifting(values, trace_drift(values)):
        return "had not settled (lambda_hat drifting between the halves of the draws)", False
    return None, False


def _kept(trace) -> slice:
    """The steps of a part's chains kept as draws (`ChainTrace.warmup_steps`, `kept_steps`)."""
    warmup = int(trace.warmup_steps[0])
    return slice(warmup, warmup + int(trace.kept_steps[0]))


def _temperature(trace) -> tuple[float, float]:
    """Configurational temperature (and its se) of the non-diverged chains' kept draws."""
    healthy, kept = trace.diverged_at < 0, _kept(trace)
    return configurational_temperature(
        trace.gradient_product[:, kept][healthy], trace.laplacian[:, kept][healthy]
    )


def summarise_trace(trace: ChainTrace, run: LocalRun, step_size: float, *, batch_size: int,
                    notes=(), sampled_weights: int | None = None,
                    minimum: MinimumCheck | None = None, gradients: int = 0) -> LLCResult:
    """Turn a `ChainTrace` of `run` (warmup included) into an `LLCResult` (estimate,
    standard error, diagnostics) from its kept draws (`ChainTrace.warmup_steps`,
    `kept_steps`); `step_size` is the one the chains used (an exact sampler's adapted step:
    the median over its chains); `minimum`: the centre's `MinimumCheck`; `gradients`: the
    per-example gradients its runs spent."""
    posterior, sampler, _ = run
    nbeta, kept_steps = posterior.nbeta, _kept(trace)
    num_warmup = kept_steps.start
    loss = trace.loss[:, kept_steps]
    center_loss = trace.center_loss[:, kept_steps]
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
    acceptance = np.exp(trace.log_acceptance[:, kept_steps][healthy])
    mala = float(np.nanmean(acceptance)) if np.isfinite(acceptance).any() else float("nan")
    temperature, temperature_se = _temperature(trace)
    virial, virial_se = virial_temperature(
        trace.virial[:, kept_steps][healthy],
        trace.final_position.shape[1] if sampled_weights is None else sampled_weights)
    return _with_warnings(LLCResult(
        llc_mean=mean,
        std_error=std_error,
        llc_per_chain=per_chain,
        loss_trace=loss,
        init_loss=trace.center_full_loss,
        nbeta=nbeta,
        step_size=step_size,
        gamma=posterior.gamma,
        batch_size=batch_size,
        preconditioner=getattr(sampler, "preconditioner", None),
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
        distance_trace=trace.distance[:, kept_steps],
        extrapolated=bool(getattr(sampler, "extrapolate", False)),
        temperature=temperature,
        temperature_std_error=temperature_se,
        virial_temperature=virial,
        virial_temperature_std_error=virial_se,
        drift_z=trace_drift(kept),
        sampled_weights=sampled_weights,
        sampler=type(sampler).__name__,
        **({} if minimum is None else minimum._asdict()),
        gradients=int(gradients),
        stop_reason=str(trace.stop_reason[0]),
    ), kept, notes, sampler)


def _with_warnings(result: LLCResult, kept: np.ndarray, notes, sampler: Sampler) -> LLCResult:
    """`result` of a run with `sampler`, with its warnings: `notes` (`RunNote`), then what its
    diagnostics earn (`slt.estimators.local.diagnostics.diagnose`), each also issued as a
    Python warning of its category (attributed to the caller of `llc`, `llc_table`, ...:
    `warn_caller`)."""
    found = [(RunNote, note if note.startswith("RunNote: ") else f"RunNote: {note}")
             for note in notes] + diagnose(result, kept, sampler)
    for category, message in found:
        warn_caller(message, category)
    return replace(result, warnings=tuple(message for _, message in found))
