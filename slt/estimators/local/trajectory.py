"""lambda_hat along training: one local learning coefficient per checkpoint, in batched runs.

Stagewise development (Hoogland et al. 2024/25) reads lambda_hat(w_t) over hundreds of
checkpoints w_t of one training run. `llc_trajectory` estimates them all with the chains of
many checkpoints vmapped together: the centres are runtime arguments of the chains' compiled
program (`slt.samplers.local_chains`), so the whole trajectory compiles one program, and a run
holds `checkpoints_per_run` checkpoints' chains at once (all of them when memory allows; the
last run is padded to the same size, so its program is the same).

The step size is calibrated once (`llc_calibrate` at the checkpoint `calibrate_at`, by
default the last: a trained network is usually stiffer than its initialisation, so a step that
suits it suits the earlier ones) and checked at every checkpoint: with step_size="auto" a
checkpoint whose chains diverged or ran hot is run again at half the step (as `slt.llc` does),
and every checkpoint's `LLCResult` carries its own diagnostics and warnings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.llc import (
    LLCResult,
    LocalPart,
    LocalRun,
    calibrates,
    chosen_step_sizes,
    local_runs,
)
from slt.estimators.local.posterior import LocalPosterior, check_local_run, restriction_mask
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.config import SGLD, RunPlan, Sampler
from slt.validation import InputError, require_int, require_params

__all__ = ["LLCTrajectory", "llc_trajectory"]

# Memory for one run's chain states when `checkpoints_per_run` is not given (bytes).
RUN_MEMORY = 2 * 1024**3
# Per chain and weight, the vectors a step holds (position, RMSprop average, gradient, noise,
# centre, mask and temporaries), in units of the float size: the estimate behind RUN_MEMORY.
VECTORS_PER_CHAIN = 8


@dataclass(frozen=True)
class LLCTrajectory(Persistable):
    """lambda_hat at every checkpoint of a training run.

    Attributes:
      steps: the training step of each checkpoint (what the plot's x axis shows).
      results: one `LLCResult` per checkpoint (its `init_loss` is L_n at the checkpoint).
      calibrated_at: the index of the checkpoint whose calibration chose the step size (None
        when the step size was given).
      checkpoints_per_run: how many checkpoints' chains ran together.
      compile_time, run_time: seconds, over the whole trajectory (calibration excluded).
    """

    steps: np.ndarray
    results: tuple[LLCResult, ...]
    calibrated_at: int | None
    checkpoints_per_run: int
    compile_time: float
    run_time: float

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> LLCResult:
        return self.results[index]

    @property
    def llc_means(self) -> np.ndarray:
        """lambda_hat at every checkpoint."""
        return np.array([result.llc_mean for result in self.results])

    @property
    def std_errors(self) -> np.ndarray:
        """Their standard errors."""
        return np.array([result.std_error for result in self.results])

    @property
    def losses(self) -> np.ndarray:
        """L_n(w_t) at every checkpoint (full data)."""
        return np.array([result.init_loss for result in self.results])

    def summary(self) -> pd.DataFrame:
        """One row per checkpoint (index: its training step): lambda_hat, se, L_n(w_t), the
        step size, and the diagnostics (temperature, MALA acceptance, R-hat, drift, the number
        of warnings)."""
        rows = [
            {
                "llc": result.llc_mean,
                "se": result.std_error,
                "loss": result.init_loss,
                "step_size": result.step_size,
                "temperature": result.temperature,
                "temperature_se": result.temperature_std_error,
                "mala_acceptance": result.mala_acceptance,
                "rhat": result.rhat,
                "drift_z": result.drift_z,
                "diverged_chains": int(np.sum(result.diverged_at >= 0)),
                "warnings": len(result.warnings),
            }
            for result in self.results
        ]
        return pd.DataFrame(rows, index=pd.Index(self.steps, name="step"))

    def to_xarray(self) -> xr.Dataset:
        """The summary over dim ``step``, and every checkpoint's per-draw estimates
        ``llc_trace`` over (step, chain, draw); attrs calibrated_at (-1: step size given),
        checkpoints_per_run."""
        return xr.Dataset.from_dataframe(self.summary()).assign(
            llc_trace=(("step", "chain", "draw"),
                       np.stack([result.llc_trace() for result in self.results])),
        ).assign_attrs(calibrated_at=-1 if self.calibrated_at is None else self.calibrated_at,
                       checkpoints_per_run=self.checkpoints_per_run)

    def plot(self, **kwargs):
        """lambda_hat (+-2 se) and L_n against the training step (`reference=`: exact values
        per checkpoint, drawn as a step line); returns the figure."""
        from slt.plots.llc import plot_llc_trajectory

        return plot_llc_trajectory(self, **kwargs)

    def __repr__(self) -> str:
        flagged = sum(bool(result.warnings) for result in self.results)
        return (
            f"LLCTrajectory({len(self)} checkpoints, steps {self.steps[0]:g}..{self.steps[-1]:g}, "
            f"llc {self.llc_means.min():.3g}..{self.llc_means.max():.3g}, "
            f"{flagged} with warnings)"
        )


def llc_trajectory(
    problem: Problem,
    checkpoints: Sequence[Params] | Mapping[float, Params],
    key: jax.Array,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler = SGLD(),
    plan: RunPlan = RunPlan(),
    calibrate_at: int = -1,
    checkpoints_per_run: int | None = None,
) -> LLCTrajectory:
    """lambda_hat(w_t) at every checkpoint w_t of a training run, compiled once.

    Args:
      problem: the model and data (the same for every checkpoint).
      checkpoints: the parameter pytrees w_t (each a point of `problem`) in training order: a
        sequence (training steps 0, 1, ...) or a mapping {training step: w_t}.
      key: PRNG key (the checkpoints' chains draw from it together; the calibration from a
        key split off it).
      posterior, sampler, plan: as for `slt.llc`, the same for every checkpoint (the
        posterior's restrict_to: the same part of the network at every checkpoint).
        `plan.checkpoint`: a file path for the runs' progress (run r > 0 of several writes
        next to it, with "-run<r>" added to the name); a trajectory stopped part-way resumes
        from it when called again with the same arguments, finished runs rebuilt without
        sampling.
      calibrate_at: with SGLD's step size "auto", the checkpoint whose calibration sets the
        step size for all (default -1, the last).
      checkpoints_per_run: how many checkpoints' chains to vmap in one run (default: all, or
        as many as fit in `RUN_MEMORY` = 2 GiB by the estimate chains x d x 8 vectors + the
        per-example losses at the centres). The last run is padded to the same size with
        copies of its last checkpoint (their results discarded), so every run is one program.

    Returns:
      An `LLCTrajectory`.

    Raises:
      InputError (a ValueError): checkpoints empty or a checkpoint not a point of the problem
        (naming its index), training steps that are not finite numbers, calibrate_at or
        checkpoints_per_run out of range, or a bad value (as for `llc`).
    """
    steps = None
    if isinstance(checkpoints, Mapping):
        steps, checkpoints = list(checkpoints), list(checkpoints.values())
    checkpoints = list(checkpoints) if isinstance(checkpoints, Sequence) else None
    if not checkpoints:
        raise InputError("checkpoints must be a non-empty sequence (list or tuple) of parameter "
                         "pytrees, or a mapping {training step: pytree}")
    for index, params in enumerate(checkpoints):
        require_params(problem, params, f"checkpoints[{index}]")
    count = len(checkpoints)
    steps = _training_steps(steps, count)
    calibrate_at = require_int("calibrate_at", calibrate_at)  # -1.0 -> -1, an index
    if not -count <= calibrate_at < count:
        raise InputError(f"calibrate_at must index the {count} checkpoints, got {calibrate_at}")
    posterior = check_local_run(problem, checkpoints[calibrate_at], key, posterior, sampler,
                                plan)
    mask = restriction_mask(problem, checkpoints[0], posterior.restrict_to)
    per_run = _checkpoints_per_run(problem, checkpoints_per_run, count, sampler, plan)
    calibrated_at, calibrations = None, []
    if calibrates(sampler):
        calibration_key, key = jax.random.split(key)
        calibrated_at = calibrate_at % count
        calibrations = [(checkpoints[calibrated_at], posterior.restrict_to, calibration_key)]
    (step_size,), plan, notes, _ = chosen_step_sizes(problem, posterior, sampler, plan,
                                                     calibrations)
    results, compile_time, run_time = [], 0.0, 0.0
    num_runs = -(-count // per_run)
    for run in range(num_runs):
        members = list(range(run * per_run, min((run + 1) * per_run, count)))
        centers = [checkpoints[i] for i in members]
        centers += [centers[-1]] * (per_run - len(centers))  # padding: one program for all runs
        run_plan = replace(plan, checkpoint=_run_file(plan.checkpoint, run))
        found = [result for result, _ in local_runs(
            problem, centers, [LocalPart(j, mask, float(step_size)) for j in range(per_run)],
            jax.random.fold_in(key, run), LocalRun(posterior, sampler, run_plan),
            description=f"llc trajectory {run + 1}/{num_runs}", notes=notes,
        )]
        results += found[: len(members)]
        compile_time += found[0].compile_time
        run_time += found[0].run_time
    return LLCTrajectory(steps=steps, results=tuple(results), calibrated_at=calibrated_at,
                         checkpoints_per_run=per_run, compile_time=compile_time,
                         run_time=run_time)


def _training_steps(steps, count: int) -> np.ndarray:
    """The training steps (a mapping's keys) as a float array of one finite value per
    checkpoint (default 0..count-1)."""
    if steps is None:
        return np.arange(count, dtype=float)
    try:
        values = np.asarray(steps, dtype=float) if np.ndim(steps) == 1 else None
    except (TypeError, ValueError):
        values = None
    if values is None or values.size != count or not np.all(np.isfinite(values)):
        raise InputError(f"the training steps (the checkpoints' keys) must be {count} finite "
                         f"numbers, one per checkpoint; got {steps!r}")
    return values


def _checkpoints_per_run(problem: Problem, requested, count: int, sampler: Sampler,
                         plan: RunPlan) -> int:
    """The run size: `requested` (checked), or all checkpoints if their chains fit in
    RUN_MEMORY, else as many as do (at least one)."""
    if requested is not None:
        return min(require_int("checkpoints_per_run", requested, minimum=1), count)
    itemsize = np.dtype(problem.dtype).itemsize
    chains = plan.num_chains * (2 if getattr(sampler, "extrapolate", False) else 1)
    per_checkpoint = itemsize * (chains * problem.dim * VECTORS_PER_CHAIN + problem.n)
    return int(max(1, min(count, RUN_MEMORY // per_checkpoint)))


def _run_file(path: str | os.PathLike | None, run: int) -> Path | None:
    """The checkpoint file of run `run`: `path` itself for the first, "<stem>-run<r><suffix>"
    beside it for the others."""
    if path is None:
        return None
    path = Path(path)
    return path if run == 0 else path.with_name(f"{path.stem}-run{run}{path.suffix}")
