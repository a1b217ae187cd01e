"""Susceptibilities: how a component of a network responds to a shift of the data towards a
subset (Baker, Wang, Hoogland, Murfet 2025, arXiv 2504.18274).

Shift the data distribution q (the reference examples) towards q' (a subset S of the training
data, or a second data set) along q_h = (1 - h) q + h q'. The loss becomes
L_h = L_q + h (L_S - L_q), and the local posterior pi_h ∝ exp(-n beta L_h(w) - (gamma / 2)
||w - w*||^2). For an observable phi, differentiating E_h[phi] at h = 0 gives

    d E_h[phi] / dh = -n beta Cov_pi(phi(w), Delta L_S(w)),   Delta L_S(w) = L_S(w) - L_q(w),

the fluctuation-dissipation form of linear response. Baker et al. define the susceptibility
without the factor n beta,

    chi_{C,S} = -Cov_C(phi_C(w), Delta L_S(w)),   so that  n beta chi = d E_h[phi_C] / dh,

for the component observable phi_C(w) = L_q(w) - L_q(w*) localised on a component C (a layer,
a head, any set of weights) by a delta function on the other weights: its expectation is taken
over the local posterior of C's weights with every other weight held at w*, the posterior of
the weight-refined LLC (`LocalPosterior(restrict_to=...)`, Wang et al. 2024); n beta E_C[phi_C] is
lambda_hat of C. (devinterp's implementation of their appendix C.4 computes the same
covariance, with the probe loss in place of L_S.) Here L_q is the mean loss over the
`reference` examples (default: all training data) and L_S the mean loss over the subset; both
are per-example means, so chi is on the scale of a covariance of mean losses. Positive chi:
shifting the data towards S raises C's expected loss on the reference data (n beta chi is that
rise per unit of h: S pulls C away from what the reference data ask of it); negative: it
lowers it.

Every component's chains run in one compiled program (the masks are runtime arguments, as in
`slt.llc_table`), each calibrated on its own with step_size="auto". At every
`plan.observe_every`-th draw after the warmup the chains evaluate the per-example losses of the
reference examples and of every subset once (a training index shared by the reference and subsets
is evaluated once) and keep, on device, the streaming moments of phi_C and of every Delta L_S,
linear readouts of those losses (`slt.samplers.moments`): memory O(number of subsets) per chain
and chunk of steps.
Standard errors are by batch means over every chain's blocks of draws, R-hat between chains
(`slt.estimators.local.observed`). """

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.llc import LLCResult
from slt.estimators.local.observed import (
    block_std_error,
    chain_summaries,
    example_batch,
    example_indices,
    losses_at,
    observation_warnings,
    observed_runs,
    rhat,
)
from slt.estimators.local.parts import leaf_parts
from slt.estimators.local.posterior import LocalPosterior
from slt.problem import Params, Problem, require_problem
from slt.results import Persistable, warnings_note
from slt.samplers import moments
from slt.samplers.config import RunPlan, Sampler
from slt.samplers.local_chains import Observables
from slt.validation import InputError, require_params, set_field

__all__ = ["DataShifts", "SusceptibilityResult", "susceptibilities"]


@dataclass(frozen=True)
class SusceptibilityResult(Persistable):
    """The susceptibility chi_{C,S} of every component C to every subset S (module doc).

    Attributes:
      components, subsets: their names, in order.
      susceptibility: chi, shape (components, subsets).
      std_error: its standard error (batch means).
      subset_sizes: examples per subset; reference_size: examples of the reference q.
      rhat_observable: R-hat of phi_C per component; rhat_shift: of Delta L_S, (C, S).
      num_samples: draws observed per chain; every: observed every this many steps.
      moments: per component, its chains' streaming summaries (x: phi_C + L_q(w*), y: the
        Delta L_S).
      runs: per component, the `LLCResult` of its restricted run (its lambda_hat is the
        weight-refined LLC of the component).
      warnings: per component, its run's warnings and R-hat above 1.1, each prefixed with
        the component's name.
    """

    components: tuple[str, ...]
    subsets: tuple[str, ...]
    susceptibility: np.ndarray
    std_error: np.ndarray
    subset_sizes: np.ndarray = field(repr=False)
    reference_size: int = field(repr=False)
    rhat_observable: np.ndarray = field(repr=False)
    rhat_shift: np.ndarray = field(repr=False)
    num_samples: int = field(repr=False)
    every: int = field(repr=False)
    moments: tuple[moments.Moments, ...] = field(repr=False)
    runs: tuple[LLCResult, ...] = field(repr=False)
    warnings: tuple[str, ...] = ()

    def table(self) -> pd.DataFrame:
        """chi as a table: one row per component, one column per subset."""
        return pd.DataFrame(self.susceptibility, index=pd.Index(self.components, name="component"),
                            columns=pd.Index(self.subsets, name="subset"))

    def summary(self) -> pd.DataFrame:
        """One row per (component, subset): chi, its standard error, chi / se, the component's
        lambda_hat, and the R-hat of Delta L_S on the component's chains."""
        rows = [{"component": component, "subset": subset,
                 "susceptibility": self.susceptibility[c, s], "se": self.std_error[c, s],
                 "z": self.susceptibility[c, s] / self.std_error[c, s],
                 "llc": self.runs[c].llc_mean, "rhat": self.rhat_shift[c, s]}
                for c, component in enumerate(self.components)
                for s, subset in enumerate(self.subsets)]
        return pd.DataFrame(rows).set_index(["component", "subset"])

    def to_xarray(self) -> xr.Dataset:
        """chi and its standard error over (component, subset), with the subsets' sizes, the
        components' lambda_hat and the R-hats."""
        pair = ("component", "subset")
        return xr.Dataset(
            {"susceptibility": (pair, self.susceptibility), "std_error": (pair, self.std_error),
             "rhat_shift": (pair, self.rhat_shift),
             "rhat_observable": ("component", self.rhat_observable),
             "llc": ("component", np.array([run.llc_mean for run in self.runs])),
             "subset_size": ("subset", self.subset_sizes)},
            coords={"component": list(self.components), "subset": list(self.subsets)},
            attrs={"reference_size": self.reference_size, "num_samples": self.num_samples,
                   "every": self.every, "nbeta": self.runs[0].nbeta},
        )

    def plot(self, **kwargs):
        """chi as a component x subset heat map, every cell annotated with chi and its
        standard error; returns the figure."""
        from slt.plots.influence import plot_susceptibilities

        return plot_susceptibilities(self, **kwargs)

    def __repr__(self) -> str:
        flags = warnings_note(self.warnings)
        return (f"SusceptibilityResult(components={list(self.components)}, "
                f"subsets={list(self.subsets)}, chains={self.moments[0].count.shape[0]}, "
                f"draws={self.num_samples}{flags})")


@dataclass(frozen=True, eq=False)
class DataShifts:
    """The shifts of the data distribution whose effect `susceptibilities` measures: from the
    base distribution q (the `reference` examples) towards each subset S, q_h = (1 - h) q + h S.

    Attributes:
      subsets: {name: examples} or a sequence (named "S0", ...); each a 1-D array of indices
        into the training data or a dict of arrays in the data's format (a second data set).
      reference: the examples of q: None (all training data: a forward pass over them at
        every observation) or a 1-D array of indices into the training data.

    Example:
      >>> slt.DataShifts({"first": np.arange(10)}, reference=np.arange(50))
      DataShifts(subsets=['first'], reference=<50 examples>)
    """

    subsets: Mapping | Sequence
    reference: Any = None

    def __post_init__(self):
        set_field(self, "subsets", _named(self.subsets, "subsets", "S"))
        if isinstance(self.reference, Mapping):
            raise InputError("reference must be None or a 1-D array of indices into the "
                             "training data")

    def __repr__(self) -> str:
        reference = "all" if self.reference is None else f"<{np.size(self.reference)} examples>"
        return f"DataShifts(subsets={list(self.subsets)}, reference={reference})"


def susceptibilities(
    problem: Problem,
    params: Params,
    key: jax.Array,
    shifts: DataShifts | Mapping | Sequence,
    *,
    components=None,
    posterior: LocalPosterior = LocalPosterior(),
    sampler: Sampler | str = "auto",
    plan: RunPlan = RunPlan(),
) -> SusceptibilityResult:
    """The susceptibilities chi_{C,S} = -Cov_C(phi_C, Delta L_S) of components C of a network
    to shifts of the data towards subsets S (module doc: the definitions and normalisation).

    Args:
      problem, params, key: as for `slt.llc` (params = w*).
      shifts: a `DataShifts` (the subsets and the reference examples), or just the subsets
        (a dict {name: examples} or a sequence; the reference is then all training data).
      components: {name: mask}, each mask as `LocalPosterior`'s `restrict_to` (a pytree of
        booleans shaped like params: one per leaf, or an array per leaf), or a sequence of
        masks (named "C0", "C1", ...); None: one component per leaf (`slt.leaf_parts`).
      posterior, plan: as for `slt.llc` (the posterior's restrict_to must be None: the
        components are the restrictions), for every component's chains; the losses are
        observed every `plan.observe_every` steps after the warmup.
      sampler: "auto" (the default): the exact `slt.samplers.MALA()` where n <= 4,096, else
        `SGLD()` with its calibrated step (`slt.estimators.local.observed.attribution_sampler`:
        SGLD's O(eps) bias shows in second moments); or a sampler value as for `slt.llc`
        (SGLD(extrapolate=True) excepted).

    Returns:
      A `SusceptibilityResult`.

    Raises:
      InputError (a ValueError): as for `llc`; components or subsets empty or of the wrong
        type, a mask `restrict_to` refuses (naming the component), a subset or the reference
        empty, out of range or not in the data's format (naming it).
      FloatingPointError: every chain of a component diverged.

    Example:
      >>> result = slt.susceptibilities(
      ...     problem, params, key, {"first": np.arange(10), "last": np.arange(90, 100)},
      ...     components={"w0": {"w": np.array([True, False])}},
      ...     sampler=slt.samplers.SGLD(step_size=1e-2, mala_every=0),
      ...     plan=slt.RunPlan(num_samples=400, num_warmup=100, progress=False))
      >>> result.table().shape
      (1, 2)
    """
    shifts = shifts if isinstance(shifts, DataShifts) else DataShifts(shifts)
    require_problem(problem)
    require_params(problem, params)
    components = _named(components, "components", "C") if components is not None else \
        leaf_parts(params)
    subsets = shifts.subsets
    examples, x_readout, y_readout, sizes = _readouts(problem, subsets, shifts.reference)
    losses_at(problem, params, examples, "reference and subset")
    runs = observed_runs(problem, params, key, (posterior, sampler, plan),
                         observables=Observables(examples, x_readout=x_readout,
                                                 y_readout=y_readout),
                         parts=components, description="susceptibilities")
    per_component, std_errors, rhat_phi, rhat_shift, notes = [], [], [], [], []
    runs = [(run, chain_summaries(blocks), blocks) for run, blocks in runs]
    for name, (run, chains, blocks) in zip(components, runs, strict=True):
        phi_variance, shift_variance = moments.variances(chains)
        per_component.append(-moments.covariance(moments.combine(chains))[0])
        std_errors.append(block_std_error(
            blocks, lambda summary: -moments.covariance(summary)[..., 0, :]))
        rhat_phi.append(rhat(chains.count, chains.mean_x, phi_variance)[0])
        rhat_shift.append(rhat(chains.count, chains.mean_y, shift_variance))
        notes.extend(f"{name}: {message}" for message in observation_warnings(
            run, {"component's loss": rhat_phi[-1:], "loss shifts": rhat_shift[-1]}))
    return SusceptibilityResult(
        components=tuple(components),
        subsets=tuple(subsets),
        susceptibility=np.stack(per_component),
        std_error=np.stack(std_errors),
        subset_sizes=sizes[1:],
        reference_size=int(sizes[0]),
        rhat_observable=np.array(rhat_phi),
        rhat_shift=np.stack(rhat_shift),
        num_samples=int(min(np.min(chains.count) for _, chains, _ in runs)),
        every=plan.observe_every,
        moments=tuple(chains for _, chains, _ in runs),
        runs=tuple(run for run, _, _ in runs),
        warnings=tuple(notes),
    )


def _named(values, name: str, prefix: str) -> dict:
    """A dict {name: value} from a non-empty dict, or from a sequence (named prefix + index)."""
    if isinstance(values, Mapping):
        named = dict(values)
    elif isinstance(values, Sequence) and not isinstance(values, str):
        named = {f"{prefix}{index}": value for index, value in enumerate(values)}
    else:
        raise InputError(f"{name} must be a dict {{name: ...}} or a list, got "
                         f"{type(values).__name__}")
    if not named:
        raise InputError(f"{name} is empty: give at least one")
    return named


def _readouts(problem: Problem, subsets: dict, reference):
    """The examples the chains observe and the readouts phi = L_q (x, one row) and
    Delta L_S = L_S - L_q (y, one row per subset), and the sizes (reference, *subsets).

    The examples are the union of the training indices of the reference and the subsets
    (each evaluated once), then every subset given as data."""
    reference_indices = (np.arange(problem.n) if reference is None
                         else example_indices(problem, reference, "reference"))
    checked = {}  # name: (batch, None) for a subset given as data, (None, indices) otherwise
    for name, subset in subsets.items():
        checked[name] = (example_batch(problem, subset, f"subset {name!r}")
                         if isinstance(subset, Mapping)
                         else (None, example_indices(problem, subset, f"subset {name!r}")))
    union = np.unique(np.concatenate(
        [reference_indices, *(indices for _, indices in checked.values() if indices is not None)]))
    parts = [problem.take(jnp.asarray(union))]
    positions = {}
    offset = len(union)
    for name, (batch, indices) in checked.items():
        if indices is None:
            size = len(next(iter(batch.values())))
            positions[name] = np.arange(offset, offset + size)
            parts.append(batch)
            offset += size
        else:
            positions[name] = np.searchsorted(union, indices)
    examples = {key: jnp.concatenate([part[key] for part in parts]) for key in parts[0]}
    base = _mean_row(np.searchsorted(union, reference_indices), offset)
    shifts = np.stack([_mean_row(positions[name], offset) - base for name in subsets])
    sizes = np.array([len(reference_indices), *(len(positions[name]) for name in subsets)])
    return examples, base[None], shifts, sizes


def _mean_row(positions: np.ndarray, size: int) -> np.ndarray:
    """The row vector that averages the losses at `positions` (repeats counted) of `size`."""
    return np.bincount(positions, minlength=size) / len(positions)
