"""What every local estimator shares: the local posterior (`LocalPosterior`, a value) and its
default temperature, the checks of a local run's arguments, and (from
`slt.samplers.run_length`, where the run's length is decided with them) the statistics of its
loss traces.

Both estimators sample the local tempered posterior pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2)
||w - w*||^2) with `slt.samplers.local_chains.run_chains`; the calibration runs candidate step
sizes and `llc` may call the calibration (step_size="auto"), so what both use lives here, below
both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import jax
import numpy as np

from slt.parts.select import leaf_masks
from slt.problem import require_problem
from slt.samplers.config import RunPlan, Sampler
from slt.samplers.run_length import (
    MAX_DRIFT,
    MIN_RELATIVE_DRIFT,
    drifting,
    trace_drift,
    trace_statistics,
)
from slt.validation import (
    InputError,
    require_bool,
    require_instance,
    require_key,
    require_params,
    require_positive,
    set_field,
)

__all__ = [
    "LocalPosterior",
    "MAX_DRIFT",
    "MIN_RELATIVE_DRIFT",
    "drifting",
    "default_nbeta",
    "restriction_mask",
    "trace_drift",
    "trace_statistics",
    "check_local_run",
]

def default_nbeta(n: int) -> float:
    """n beta at beta = 1 / log n (Watanabe's WBIC temperature): n / log n."""
    if n < 2:
        raise ValueError(f"n beta = n / log n needs n >= 2, got n = {n}")
    return n / np.log(n)


@dataclass(frozen=True, eq=False)
class LocalPosterior:
    """The local tempered posterior around w*: what every local estimator samples.

        pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2)   [x prior(w)],

    with L_n the per-example negative log-likelihood with its constants (DESIGN.md), over the
    weights `restrict_to` selects (the others held at w*). lambda_hat(w*) = n beta
    (E_pi[L_n(w)] - L_n(w*)) is its estimand (`slt.llc`); the loss kernel, the BIF and the
    susceptibilities read other statistics of the same draws.

    Attributes:
      gamma: localization strength (>= 0). The default 1 is small against n beta times the
        curvature of L_n in identifiable directions, so it barely biases lambda_hat there;
        measured, gamma = 100 shrank lambda_hat of a 3-parameter linear regression at
        n = 5000 by 25% and of the normal-crossing toys by over 90%. Where the set of minima
        through w* is unbounded, the length ~1 / sqrt(gamma) of it the localizer admits is
        part of the estimand (`slt.llc`'s docstring; benchmarks/RESULTS.md, "Finite-n
        values").
      nbeta: n beta (> 0); None: n / log n (beta = 1 / log n, Watanabe's WBIC temperature).
      include_prior: multiply by the model's prior (off, as in Lau et al.).
      restrict_to: the weight-refined posterior (Wang et al. 2024): a pytree of booleans
        shaped like the parameters, a True / False per leaf (a layer) or a boolean array per
        leaf (single weights, a head); only the selected weights are sampled and localized.
        None: all weights.

    Example:
      >>> slt.LocalPosterior(gamma=10.0)
      LocalPosterior(gamma=10.0, nbeta=None, include_prior=False, restrict_to=None)
      >>> slt.LocalPosterior(gamma=-1.0)
      Traceback (most recent call last):
      slt.validation.InputError: gamma must be a finite number >= 0, got -1.0
    """

    gamma: float = 1.0
    nbeta: float | None = None
    include_prior: bool = False
    restrict_to: Any = None

    def __post_init__(self):
        set_field(self, "gamma", require_positive("gamma", self.gamma, allow_zero=True))
        if self.nbeta is not None:
            set_field(self, "nbeta", require_positive("nbeta", self.nbeta))
        set_field(self, "include_prior", require_bool("include_prior",
                                                              self.include_prior))

    def __repr__(self) -> str:
        restricted = None if self.restrict_to is None else (
            f"<{len(jax.tree_util.tree_leaves(self.restrict_to))} mask leaves>")
        return (f"LocalPosterior(gamma={self.gamma!r}, nbeta={self.nbeta!r}, "
                f"include_prior={self.include_prior!r}, restrict_to={restricted})")

    def resolved(self, problem) -> LocalPosterior:
        """This posterior with n beta filled in for `problem` (`default_nbeta`), as a NumPy
        float64: the statistics of float32 loss traces (n beta times differences of losses)
        are then computed in float64."""
        resolved = replace(self)
        set_field(resolved, "nbeta", np.float64(
            default_nbeta(problem.n) if self.nbeta is None else self.nbeta))
        return resolved


def check_local_run(problem, params, key, posterior, sampler, plan=None) -> LocalPosterior:
    """Check the arguments every local estimator takes and return the posterior with n beta
    resolved (`LocalPosterior.resolved`).

    Raises:
      InputError: naming the first bad argument (a value of the wrong type included).
      ValueError: n < 2 without nbeta.
    """
    require_problem(problem)
    require_params(problem, params)
    require_key(key)
    require_instance("posterior", posterior, LocalPosterior, "a slt.LocalPosterior")
    require_instance("sampler", sampler, Sampler,
                     "slt.samplers.SGLD, SGHMC, MALA or HMC")
    if plan is not None:  # llc_calibrate plans its own sweep
        require_instance("plan", plan, RunPlan, "a slt.RunPlan")
    return posterior.resolved(problem)


def restriction_mask(problem, params, restrict_to) -> np.ndarray | None:
    """The flat boolean mask (length `problem.dim`, `Problem.ravel` order) of the weights a
    restricted local run samples; None when `restrict_to` is None (all of them).

    Args:
      problem, params: the run's problem and w* (already validated).
      restrict_to: a pytree with the structure of `params` whose leaves are booleans: a
        `True` / `False` for a whole leaf (a layer), or a boolean array of the leaf's shape
        (single weights, a head, a row).

    Raises:
      InputError: another structure, a leaf that is not boolean or has another shape, or a
        mask that selects no weight.
    """
    if restrict_to is None:
        return None
    structure = jax.tree_util.tree_structure(params)
    full = [leaf.astype(problem.dtype)
            for leaf in leaf_masks(params, restrict_to, name="restrict_to")]
    mask = np.asarray(problem.ravel(jax.tree_util.tree_unflatten(structure, full))) > 0.5
    if not mask.any():
        raise InputError("restrict_to selects no weight: at least one entry must be True")
    return mask
