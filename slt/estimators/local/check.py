"""An exact cross-check of lambda_hat: the same local posterior drawn by an exact sampler.

SGLD is biased by its step size and its minibatch noise (the configurational temperature sees
part of it); MALA and HMC (`slt.samplers`) are Metropolis-adjusted and full-batch, so their
draws have the local posterior as their exact law whatever their step. `llc_check` runs one of
them on the posterior a result was computed at and says whether the two agree:

    z = (lambda_hat - lambda_exact) / sqrt(se^2 + se_exact^2),    agree when |z| <= 3.

Cost: one full-data gradient per leapfrog step (HMC, the default reference: about 16 a step)
or per step (MALA) and chain, against SGLD's minibatch gradient: for n = 10^4 and d = 10^3
minutes on a CPU, for n = 10^5 and d = 10^6 hours to days; it is a check to run where d and
n allow it (the small networks of a study, the first checkpoint of a trajectory), not a
replacement for SGLD.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from slt.estimators.local.diagnostics import LocalRunWarning
from slt.estimators.local.llc import LLCResult, llc
from slt.estimators.local.posterior import LocalPosterior, check_local_run
from slt.problem import Params, Problem
from slt.samplers.config import HMC, MALA, RunPlan
from slt.validation import InputError, require_instance, warn_caller

__all__ = ["AGREEMENT_Z", "DisagreesWithExact", "LLCCheck", "llc_check"]

AGREEMENT_Z = 3.0


class DisagreesWithExact(LocalRunWarning):
    """lambda_hat differs from an exact sampler's on the same local posterior."""


@dataclass(frozen=True)
class LLCCheck:
    """A lambda_hat beside the exact sampler's on the same local posterior.

    Attributes:
      estimate: the result checked.
      reference: the exact sampler's `LLCResult` (its own warnings included: a reference
        that warns is no reference).
      z: (estimate - reference) in standard errors of the difference.
      agree: |z| <= AGREEMENT_Z (3) and the reference raised no warning.
    """

    estimate: LLCResult
    reference: LLCResult
    z: float
    agree: bool

    def summary(self) -> pd.DataFrame:
        """Two rows (the estimate, the reference): lambda_hat, se, sampler, warnings; and z."""
        rows = [{"sampler": result.sampler, "llc": result.llc_mean, "se": result.std_error,
                 "warnings": ", ".join(result.warning_names)}
                for result in (self.estimate, self.reference)]
        return pd.DataFrame(rows, index=["estimate", "reference"]).assign(z=[self.z, np.nan])

    def __repr__(self) -> str:
        return (f"LLCCheck({self.estimate.sampler} {self.estimate.llc_mean:.4g} ± "
                f"{self.estimate.std_error:.2g} vs {self.reference.sampler} "
                f"{self.reference.llc_mean:.4g} ± {self.reference.std_error:.2g}: z = "
                f"{self.z:+.2f}, {'agree' if self.agree else 'DISAGREE'})")


def llc_check(
    problem: Problem,
    params: Params,
    key: jax.Array,
    result: LLCResult,
    *,
    posterior: LocalPosterior = LocalPosterior(),
    reference: MALA | HMC = HMC(),
    plan: RunPlan = RunPlan(num_warmup=1000, num_samples=2000),
) -> LLCCheck:
    """Check `result` (an `slt.llc` of `params`) against an exact sampler (module doc).

    Args:
      problem, params: those `result` was computed for.
      key: PRNG key of the exact run.
      result: the `LLCResult` to check.
      posterior: the local posterior `result` was computed at (its gamma and n beta must
        match the result's).
      reference: the exact sampler: `slt.samplers.HMC()` (the default), or `MALA()`, one
        gradient a step instead of about 16 but slower to cross a local posterior's soft
        directions: on reduced-rank regression at its true parameter (n = 10^4, 4 x 5000
        draws) MALA was 4.2 se from the exact value where HMC was 0.7, and on small nonlinear
        networks 18-24% low where HMC was within 8% (benchmarks/RESULTS.md).
      plan: the exact run's length (default 4 chains, 1000 warmup steps, 2000 draws).

    Returns:
      An `LLCCheck`; when the two disagree, a `DisagreesWithExact` warning too.

    Raises:
      InputError: a bad argument, or a posterior other than the result's.

    Example:
      >>> found = slt.llc(problem, params, key, sampler=slt.samplers.SGLD(step_size=1e-2),
      ...                 plan=slt.RunPlan(num_samples=200, num_warmup=200, progress=False))
      >>> check = slt.llc_check(problem, params, key, found,
      ...                       plan=slt.RunPlan(num_samples=200, num_warmup=200,
      ...                                        progress=False))
      >>> check.reference.sampler
      'HMC'
    """
    require_instance("result", result, LLCResult, "an slt.LLCResult")
    require_instance("reference", reference, MALA | HMC,
                     "slt.samplers.MALA() or slt.samplers.HMC()")
    resolved = check_local_run(problem, params, key, posterior, reference, plan)
    for name in ("gamma", "nbeta"):
        if not np.isclose(getattr(resolved, name), getattr(result, name), rtol=1e-9):
            raise InputError(f"posterior.{name} is {getattr(resolved, name):.6g} but the result "
                             f"was computed at {name} = {getattr(result, name):.6g}: give the "
                             "posterior the result was computed at")
    exact = llc(problem, params, key, posterior=posterior, sampler=reference, plan=plan)
    if exact.sampled_weights != result.sampled_weights:
        raise InputError(f"the result sampled {result.sampled_weights} weights but the posterior "
                         f"selects {exact.sampled_weights}: give the result's restrict_to")
    z = float((result.llc_mean - exact.llc_mean) / np.hypot(result.std_error, exact.std_error))
    agree = bool(abs(z) <= AGREEMENT_Z and not exact.warnings)
    check = LLCCheck(result, exact, z, agree)
    if not agree:
        why = (f"the exact sampler's own run raised {', '.join(exact.warning_names)}"
               if exact.warnings else f"{abs(z):.1f} standard errors apart")
        warn_caller(f"DisagreesWithExact: {check!r} ({why}); trust the exact sampler's value "
                    "once its run is clean, and run SGLD with a smaller step size or "
                    "SGLD(extrapolate=True)", DisagreesWithExact)
    return check
