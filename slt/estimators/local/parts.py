"""lambda_hat of the parts of a network: the weight-refined LLC (Wang et al. 2024), as a table.

The weight-refined LLC of a part V (a layer, a head, any set of weights) is the LLC of the local
posterior of the weights in V, the others held at w*:

    lambda_hat_V(w*) = n beta (E_V[L_n(w)] - L_n(w*)),
    pi_V(w_V) ∝ exp(-n beta L_n(w_V, w*_rest) - (gamma / 2) ||w_V - w*_V||^2).

It is `slt.llc(..., posterior=slt.LocalPosterior(restrict_to=mask))` for one part. `llc_table` runs
every part at once: the masks are runtime arguments of the chains' compiled program
(`slt.samplers.local_chains`), so all parts' chains are vmapped in one program, compiled once
whatever the parts' shapes, and the calibrations (step_size="auto", one per part: a part's stiffest
direction sets its step) share one program too.

Exact values to check against (TRUTH.md): restricted to one layer W_l of a deep linear network
y = C W_l D x (C, D the products of the layers above and below), the model is linear in W_l,
a regular model in the rank(C) rank(D) directions that change C W_l D, so
lambda_V = rank(C) rank(D) / 2 (exactly, at any n, when w* minimises L_n: a trained network).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.llc import (
    LLCResult,
    LocalPart,
    LocalRun,
    chosen_settings,
    local_runs,
)
from slt.estimators.local.posterior import LocalPosterior, check_local_run, restriction_mask
from slt.prediction import leaf_names
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.config import SGLD, RunPlan, Sampler
from slt.samplers.local_chains import ChainTrace
from slt.validation import InputError, require_instance

__all__ = ["LLCTable", "leaf_parts", "llc_table", "part_entry", "part_masks", "part_runs"]


@dataclass(frozen=True)
class LLCTable(Persistable):
    """lambda_hat of every part, each with its own `LLCResult`.

    Attributes:
      parts: the parts' names, in order.
      results: their `LLCResult`s (restricted runs: `sampled_weights` is the part's size).
    """

    parts: tuple[str, ...]
    results: tuple[LLCResult, ...]

    def __getitem__(self, part: str) -> LLCResult:
        return part_entry(self.parts, self.results, part)

    def summary(self) -> pd.DataFrame:
        """One row per part (index: its name): `LLCResult.summary` and a ``warnings`` count."""
        rows = [result.summary().assign(warnings=len(result.warnings))
                for result in self.results]
        return pd.concat(rows, ignore_index=True).set_axis(
            pd.Index(self.parts, name="part"), axis=0)

    def to_xarray(self) -> xr.Dataset:
        """The summary's numeric columns over dim ``part``, and every part's per-draw
        estimates ``llc`` over (part, chain, draw)."""
        summary = self.summary().select_dtypes("number")
        return xr.Dataset.from_dataframe(summary).assign(
            llc_trace=(("part", "chain", "draw"),
                       np.stack([result.llc_trace() for result in self.results])))

    def plot(self, **kwargs):
        """lambda_hat of every part with its +-2 standard-error bar, beside half its number of
        weights (the regular value d_V / 2); returns the figure."""
        from slt.plots.llc import plot_llc_table

        return plot_llc_table(self, **kwargs)

    def __repr__(self) -> str:
        cells = ", ".join(f"{part}: {result.llc_mean:.3g} ± {result.std_error:.2g}"
                          for part, result in zip(self.parts, self.results, strict=True))
        return f"LLCTable({cells})"


def part_entry(parts: tuple[str, ...], entries: tuple, part: str):
    """The entry of part `part` among `entries` (one per part, in the order of `parts`): what
    ``result[part]`` returns for a result over parts (`LLCTable`, `PartsTrajectory`).

    Raises:
      KeyError: no part of that name (the message lists the parts).
    """
    if part not in parts:
        raise KeyError(f"no part {part!r}; the parts are {list(parts)}")
    return entries[parts.index(part)]


def leaf_parts(params: Params) -> dict[str, Params]:
    """One part per leaf of `params` (a layer's weights, its bias): {leaf name: mask}, the
    names of `slt.prediction.leaf_names` ("W1", "params/Dense_0/kernel")."""
    leaves, structure = jax.tree_util.tree_flatten(params)
    return {
        name: jax.tree_util.tree_unflatten(structure, [i == j for j in range(len(leaves))])
        for i, name in enumerate(leaf_names(params))
    }


def llc_table(
    problem: Problem,
    params: Params,
    key: jax.Array,
    parts: dict[str, Params] | None = None,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler = SGLD(),
    plan: RunPlan = RunPlan(),
) -> LLCTable:
    """The weight-refined lambda_hat of several parts of a network, in one compiled run.

    Args:
      problem, params, key: as for `slt.llc` (params = w*).
      parts: {name: mask}, each mask as `LocalPosterior`'s `restrict_to` (a pytree of
        booleans shaped like params: one per leaf, or an array per leaf); default
        `leaf_parts(params)`, one part per leaf.
      posterior, sampler, plan: as for `slt.llc`, applied to every part (the posterior's
        restrict_to must be None: the parts are the restrictions). SGLD's step size "auto"
        calibrates each part on its own (`llc_calibrate` with the part's mask: its own step
        size, and with `Calibration(gammas=...)` its own gamma; one compiled program serves
        every part's sweep) and checks each part's run as `llc` does (a part that diverged
        or ran hot is repeated at half its step, such parts together); an exact sampler
        adapts every chain's step during its warmup. Every part draws from `key` as
        `slt.llc(..., posterior=LocalPosterior(restrict_to=mask))` would: with a fixed
        plan, each part's result is that call's, whatever parts run beside it. A checkpoint
        file holds the whole table's run.

    Returns:
      An `LLCTable`.

    Raises:
      InputError (a ValueError): as for `llc`; parts not a non-empty dict of masks, a mask as
        `restrict_to` refuses it (naming the part), a posterior with restrict_to set.

    Example:
      >>> parts = {"w0": {"w": np.array([True, False])}, "w1": {"w": np.array([False, True])}}
      >>> table = slt.llc_table(problem, params, key, parts,
      ...                       sampler=slt.samplers.SGLD(step_size=1e-3),
      ...                       plan=slt.RunPlan(num_samples=200, num_warmup=100,
      ...                                        progress=False))
      >>> table.parts, list(table.summary()["sampled_weights"])   # a regular weight each
      (('w0', 'w1'), [1, 1])
    """
    resolved = check_local_run(problem, params, key, posterior, sampler, plan)
    if resolved.restrict_to is not None:
        raise InputError("llc_table restricts every part itself: give the masks as parts, "
                         "with posterior.restrict_to=None")
    parts = leaf_parts(params) if parts is None else require_instance(
        "parts", parts, dict, "a dict {name: mask shaped like params}")
    if not parts:
        raise InputError("parts is empty: give at least one {name: mask}")
    runs = part_runs(problem, params, key, LocalRun(resolved, sampler, plan), parts,
                     description="llc table")
    return LLCTable(parts=tuple(parts), results=tuple(result for result, _ in runs))


def part_runs(problem: Problem, params: Params, key: jax.Array, run: LocalRun,
              parts: dict[str, Params | None], *, description: str, observables=None
              ) -> list[tuple[LLCResult, ChainTrace]]:
    """The local runs of several parts of a network around w* = `params`, in one program.

    Args:
      problem, params, key: as for `slt.llc`.
      run: the posterior (n beta resolved), sampler and plan (`LocalRun`).
      parts: {name: restrict_to} (a mask as `LocalPosterior`'s `restrict_to`, or None: every
        weight). With SGLD's step size "auto" each part is calibrated on its own
        (`llc_calibrate` with its mask and the calibration key `llc` would use: its step
        size and gamma) and the warmup raised to what the calibrations needed (a note in
        every result's warnings).
      description: the progress bar's label.
      observables: summarised along every chain (`local_runs`).

    Returns:
      One (`LLCResult`, `ChainTrace` of its chains) per part, in order (`local_runs`).

    Raises:
      InputError: a mask `restriction_mask` refuses (the message names the part).
    """
    masks = part_masks(problem, params, parts)
    chosen, plan, notes, key = chosen_settings(problem, params, key, run, list(parts.values()))
    runs = local_runs(
        problem, [params],
        [LocalPart(0, mask, settings.step_size, settings.gamma)
         for mask, settings in zip(masks, chosen, strict=True)],
        key, run._replace(plan=plan), description=description, notes=notes,
        observables=observables,
    )
    return [(replace(result, gradients=result.gradients + settings.gradients), trace)
            for (result, trace), settings in zip(runs, chosen, strict=True)]


def part_masks(problem: Problem, params: Params, parts: dict[str, Params | None], *,
               named: bool = True) -> list[np.ndarray | None]:
    """The flat mask of every part's restrict_to (`restriction_mask`), in order.

    Raises:
      InputError: a mask `restriction_mask` refuses; the message names the part unless
        `named` is False (a single unnamed part).
    """
    masks = []
    for name, part in parts.items():
        try:
            masks.append(restriction_mask(problem, params, part))
        except InputError as error:
            raise InputError(f"part {name!r}: {error}" if named else str(error)) from None
    return masks
