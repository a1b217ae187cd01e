"""lambda_hat along training: one local learning coefficient per checkpoint (and per part), in
batched runs.

Stagewise development (Hoogland et al. 2024/25) reads lambda_hat(w_t) over hundreds of
checkpoints w_t of one training run, and the refined lambda_hat of a network's parts (its
attention heads, its layers: Wang et al. 2024) along the same run. `llc_trajectory` estimates
them all with the chains of many checkpoints (and parts) vmapped together: the centres, masks,
step sizes and gammas are runtime arguments of the chains' compiled program
(`slt.samplers.local_chains`), so the whole trajectory, every part included, compiles one
program, and a run holds the chains of as many checkpoints as `RunPlan.max_chains` (or
memory) allows (the last run is padded to the same size, so its program is the same).

The step size (and, with `Calibration(gammas=...)`, gamma) is calibrated once per part
(`llc_calibrate` at the checkpoint `calibrate_at`, by default the last: a trained network is
usually stiffer than its initialisation, so a step that suits it suits the earlier ones; one
compiled sweep program serves every part) and checked at every checkpoint: with
step_size="auto" a checkpoint whose chains diverged or ran hot is run again at half the step
(as `slt.llc` does), and every (checkpoint, part) `LLCResult` carries its own diagnostics and
warnings.

Randomness (`ChainTargets.keys`): checkpoint t's chains draw from fold_in(k, t), k the key
(after the calibration's is split off, as in `slt.llc`), every part at that checkpoint from
the same one. With a fixed plan the result at checkpoint t for part p is therefore
`slt.llc(problem, w_t, fold_in(k, t), posterior=LocalPosterior(restrict_to=mask_p), ...)` at
the same settings, however the checkpoints are batched into runs and whatever parts run
beside it; checkpoints are independent of each other, and the parts of one checkpoint share
their random numbers (their differences are the more precise for it).
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
    chosen_settings,
    local_runs,
)
from slt.estimators.local.parts import part_entry, part_masks
from slt.estimators.local.posterior import LocalPosterior, check_local_run
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.config import SGLD, RunPlan, Sampler
from slt.validation import InputError, require_instance, require_int, require_params

__all__ = ["LLCTrajectory", "PartsTrajectory", "llc_trajectory"]

# Memory for one run's chain states when `RunPlan.max_chains` is not given (bytes).
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


@dataclass(frozen=True)
class PartsTrajectory(Persistable):
    """lambda_hat of several parts of a network at every checkpoint of a training run: a
    (checkpoint x part) result (`llc_trajectory` with `parts`).

    Attributes:
      parts: the parts' names, in order.
      trajectories: one `LLCTrajectory` per part (its `results`: that part at every
        checkpoint; `compile_time` and `run_time`: the whole run's, shared by all parts).
    """

    parts: tuple[str, ...]
    trajectories: tuple[LLCTrajectory, ...]

    def __getitem__(self, part: str) -> LLCTrajectory:
        return part_entry(self.parts, self.trajectories, part)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def steps(self) -> np.ndarray:
        """The training step of each checkpoint."""
        return self.trajectories[0].steps

    @property
    def llc_means(self) -> np.ndarray:
        """lambda_hat, (checkpoint, part)."""
        return np.stack([trajectory.llc_means for trajectory in self.trajectories], axis=1)

    @property
    def std_errors(self) -> np.ndarray:
        """Their standard errors, (checkpoint, part)."""
        return np.stack([trajectory.std_errors for trajectory in self.trajectories], axis=1)

    def settings(self) -> pd.DataFrame:
        """One row per part (index: its name): the step size and gamma its chains ran at (at
        the calibrated checkpoint, or the first; a checkpoint repeated at half the step shows
        its own in `summary`), its number of sampled weights, and how many of its checkpoints
        carry warnings, with their names."""
        rows = []
        for trajectory in self.trajectories:
            first = trajectory.results[trajectory.calibrated_at or 0]
            names = sorted({name for result in trajectory.results
                            for name in result.warning_names})
            rows.append({"step_size": first.step_size, "gamma": first.gamma,
                         "sampled_weights": first.sampled_weights,
                         "checkpoints_warned": sum(bool(result.warnings)
                                                   for result in trajectory.results),
                         "warnings": ", ".join(names)})
        return pd.DataFrame(rows, index=pd.Index(self.parts, name="part"))

    def summary(self) -> pd.DataFrame:
        """`LLCTrajectory.summary` of every part, stacked: index (part, step)."""
        return pd.concat([trajectory.summary() for trajectory in self.trajectories],
                         keys=list(self.parts), names=["part", "step"])

    def to_xarray(self) -> xr.Dataset:
        """The summary's numeric columns over dims (part, step)."""
        return xr.Dataset.from_dataframe(self.summary().select_dtypes("number"))

    def plot(self, **kwargs):
        """lambda_hat (+-2 se) of every part against the training step, one line each, and
        L_n at the checkpoints; returns the figure."""
        from slt.plots.llc import plot_parts_trajectory

        return plot_parts_trajectory(self, **kwargs)

    def __repr__(self) -> str:
        flagged = sum(bool(result.warnings) for trajectory in self.trajectories
                      for result in trajectory.results)
        return (f"PartsTrajectory({len(self)} checkpoints x {len(self.parts)} parts, "
                f"llc {self.llc_means.min():.3g}..{self.llc_means.max():.3g}, "
                f"{flagged} with warnings)")


def llc_trajectory(
    problem: Problem,
    checkpoints: Sequence[Params] | Mapping[float, Params],
    key: jax.Array,
    parts: Mapping[str, Params] | None = None,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler = SGLD(),
    plan: RunPlan = RunPlan(),
    calibrate_at: int = -1,
) -> LLCTrajectory | PartsTrajectory:
    """lambda_hat(w_t) at every checkpoint w_t of a training run (of every part, with `parts`),
    compiled once.

    Args:
      problem: the model and data (the same for every checkpoint).
      checkpoints: the parameter pytrees w_t (each a point of `problem`) in training order: a
        sequence (training steps 0, 1, ...) or a mapping {training step: w_t}.
      key: PRNG key (the calibration's split off it, as in `llc`; checkpoint t's chains
        draw from fold_in(key, t): module doc).
      parts: None (the whole network, or the posterior's restrict_to), or {name: mask} as
        `llc_table`'s (`slt.parts` builds them: heads, layers): every part at every
        checkpoint, in one program; the posterior's restrict_to must then be None.
      posterior, sampler, plan: as for `slt.llc`, the same for every checkpoint.
        SGLD's step size "auto" calibrates each part once (its own step size, and with
        `Calibration(gammas=...)` its own gamma). `plan.max_chains`: the most chains one run
        holds (default: as many checkpoints as fit in `RUN_MEMORY` = 2 GiB by the estimate
        chains x d x 8 vectors + the per-example losses at the centres); the last run is
        padded to the same size with copies of its last checkpoint (their results
        discarded), so every run is one program. `plan.checkpoint`: a file path for the
        runs' progress (run r > 0 of several writes next to it, with "-run<r>" added to the
        name); a trajectory stopped part-way resumes from it when called again with the same
        arguments, finished runs rebuilt without sampling.
      calibrate_at: with SGLD's step size "auto", the checkpoint whose calibration sets every
        part's settings for all checkpoints (default -1, the last).

    Returns:
      An `LLCTrajectory`; with `parts`, a `PartsTrajectory` (an `LLCTrajectory` per part).

    Raises:
      InputError (a ValueError): checkpoints empty or a checkpoint not a point of the problem
        (naming its index), training steps that are not finite numbers, calibrate_at out of
        range, parts not a non-empty mapping of masks (or a mask refused, naming the part),
        parts with the posterior's restrict_to set, or a bad value (as for `llc`).

    Example:
      >>> heads = {"w0": {"w": np.array([True, False])}, "w1": {"w": np.array([False, True])}}
      >>> along = slt.llc_trajectory(problem, [params, params], key, heads,
      ...                            sampler=slt.samplers.SGLD(step_size=1e-3),
      ...                            plan=slt.RunPlan(num_samples=100, num_warmup=100,
      ...                                             progress=False))
      >>> along.parts, along.llc_means.shape   # (checkpoint, part)
      (('w0', 'w1'), (2, 2))
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
    named = _named_parts(parts, posterior)
    masks = part_masks(problem, checkpoints[0], named, named=parts is not None)
    per_run = _checkpoints_per_run(problem, count, len(masks), sampler, plan)
    calibrated_at = calibrate_at % count if calibrates(sampler) else None
    chosen, plan, notes, key = chosen_settings(problem, checkpoints[calibrate_at], key,
                                               LocalRun(posterior, sampler, plan),
                                               list(named.values()))
    found, compile_time, run_time = [], 0.0, 0.0
    num_runs = -(-count // per_run)
    for run in range(num_runs):
        members = list(range(run * per_run, min((run + 1) * per_run, count)))
        centers = [checkpoints[i] for i in members]
        centers += [centers[-1]] * (per_run - len(centers))  # padding: one program for all runs
        run_plan = replace(plan, checkpoint=_run_file(plan.checkpoint, run))
        results = [result for result, _ in local_runs(
            problem, centers,
            [LocalPart(j, mask, settings.step_size, settings.gamma)
             for j in range(per_run) for mask, settings in zip(masks, chosen, strict=True)],
            key, LocalRun(posterior, sampler, run_plan),
            description=f"llc trajectory {run + 1}/{num_runs}", notes=notes,
            center_keys=[jax.random.fold_in(key, members[min(j, len(members) - 1)])
                         for j in range(per_run)],
        )]
        found += results[: len(members) * len(masks)]
        compile_time += results[0].compile_time
        run_time += results[0].run_time
    trajectories = tuple(
        LLCTrajectory(steps=steps, results=tuple(found[part::len(masks)]),
                      calibrated_at=calibrated_at, checkpoints_per_run=per_run,
                      compile_time=compile_time, run_time=run_time)
        for part in range(len(masks)))
    if parts is None:
        return trajectories[0]
    return PartsTrajectory(parts=tuple(named), trajectories=trajectories)


def _named_parts(parts, posterior: LocalPosterior) -> dict:
    """{name: restrict_to} of the run: `parts` (checked), or the posterior's own restriction
    as the one part when `parts` is None."""
    if parts is None:
        return {"": posterior.restrict_to}
    if posterior.restrict_to is not None:
        raise InputError("llc_trajectory restricts every part itself: give the masks as parts, "
                         "with posterior.restrict_to=None")
    parts = dict(require_instance("parts", parts, Mapping,
                                  "a mapping {name: mask shaped like params}"))
    if not parts:
        raise InputError("parts is empty: give at least one {name: mask}")
    return parts


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


def _checkpoints_per_run(problem: Problem, count: int, num_parts: int, sampler: Sampler,
                         plan: RunPlan) -> int:
    """The run size in checkpoints: as many as `plan.max_chains` chains allow (at least one),
    or, without it, all checkpoints if their chains fit in RUN_MEMORY, else as many as do."""
    chains = num_parts * plan.num_chains * (2 if getattr(sampler, "extrapolate", False) else 1)
    if plan.max_chains is not None:
        return int(max(1, min(count, plan.max_chains // chains)))
    itemsize = np.dtype(problem.dtype).itemsize
    per_checkpoint = itemsize * (chains * problem.dim * VECTORS_PER_CHAIN + problem.n)
    return int(max(1, min(count, RUN_MEMORY // per_checkpoint)))


def _run_file(path: str | os.PathLike | None, run: int) -> Path | None:
    """The checkpoint file of run `run`: `path` itself for the first, "<stem>-run<r><suffix>"
    beside it for the others."""
    if path is None:
        return None
    path = Path(path)
    return path if run == 0 else path.with_name(f"{path.stem}-run{run}{path.suffix}")
