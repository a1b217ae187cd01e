"""The free energy F = -log Z: from posterior draws (the default), tempered SMC, importance
sampling, TI, nested sampling.

The default ("auto" with no sampler, or a `FromDraws` value; method "draws") is the fast path
of `slt.estimators.evidence.draws`: MAP restarts, NUTS chains started at the distinct optima,
importance and bridge sampling from two proposals fitted to the halves of the draws, and a
self-check (Pareto k-hat, standard error, the proposals agree, the bridge agrees, every optimum
covered). When a check fails, F comes from the tempered path below (`FromDraws.fallback`) and
the result says why (`path`, `checks`). `free_energy(problem, key, draws=...)` does the same
from draws the user already has (a dict of site values, NumPyro's `MCMC`, an ArviZ
`InferenceData`). Measured on Old Faithful (benchmarks/RESULTS.md, "Evidence in a minute"):
K = 1, 2, 3 within 0.001, 0.005 and 0.027 nats of the outside references over five keys each
(standard errors 0.001–0.013; on K = 3 one key of five fell back to the tempered path);
conjugate regression (tests/estimators/test_evidence_draws.py) within 0.006 nats (se 0.003,
float32).

The first three estimates come from the same runs of `slt.samplers.tempering.tempered_smc`
(independent copies, each with its own ESS-driven ladder 0 = beta_0 < ... < beta_K = 1 from
exact prior draws):

* "smc": -log of the product of the mean incremental weights, sum_k log (1/N) sum_j
  exp((beta_{k+1} - beta_k) l(w_j)) (unbiased for Z within a copy);
* "importance": importance sampling from a Gaussian mixture fitted to the final particles
  of all copies, symmetrised over the label orders of the problem's exchangeable sites
  (`slt.samplers.importance`): unbiased for Z whatever the particles' weights between modes,
  as long as the mixture covers them. The default ("auto") for problems that declare
  exchangeable sites (mixtures) and have d <= 16: there the SMC's own estimate rests on the
  particles carrying the right mass between non-equivalent modes through every stage, and it
  does not quite (Old Faithful K = 3: +0.10 nats on average over five keys, its standard
  errors not covering it; importance sampling from the same particles: within 0.03).
  `tempered_smc`'s `interim_correlation_threshold=0.5` (move the particles less between the
  measured temperatures) halves the time of such a run but not at today's accuracy: on Old
  Faithful K = 3, keys 0-3, Pareto k-hat rose to 0.43-0.72 and the standard errors to 0.04
  (benchmarks/RESULTS.md), so it is an option, not the default.
* "ti": thermodynamic integration F = ∫_0^1 E_beta[n L_n] dbeta over the same ladder, with
  the Euler–Maclaurin end correction that d/dbeta E_beta[n L_n] = -Var_beta[n L_n] makes
  available: each interval contributes h/2 (f_a + f_b) - h^2/12 (V_a - V_b), so the
  discretisation error is O(h^5) per interval instead of O(h^3). Where a diffuse prior makes
  n L_n heavy-tailed near beta = 0 (h^2 Var > 1: the quadrature cannot resolve the integrand),
  those first intervals come from the SMC increments instead (`thermodynamic_integral`).

The "smc" and "ti" estimates are the mean over copies and their standard error the copies'
standard deviation over sqrt(num_copies) (2–4 copies, DESIGN.md); "importance" has its own
(delta-method) standard error and the Pareto k-hat of its weights: above 0.7, or when it
disagrees with the SMC estimate beyond their errors, a warning says so, and with k-hat above
0.7 (also after a second fit with half the components) the SMC estimate is reported instead.

A second, independent reference: "nested" runs nested sampling
(`slt.samplers.nested.nested_sampling`, BlackJAX's nested slice sampler), which integrates L over
the prior mass enclosed by rising likelihood contours instead of over temperatures. Tempered SMC
fails where the tempered posterior jumps from one region to another as beta grows (a first-order
phase transition: a narrow, high-likelihood region that no particle reaches before it carries the
mass); nested sampling does not, since its contours close in on that region whatever the
temperature would be (Skilling 2006, "spike and slab"). `disagreement(a, b)` says when two
references differ by more than their errors; `slt.compare` runs it for every model where both were
computed.

Accuracy measured against exact answers (tests/estimators/test_free_energy.py and
benchmarks/evidence_accuracy.py, fixed keys) with the earlier defaults (1000 particles, 4
copies, target ESS 0.95, 2 HMC moves of 5 leapfrog steps per stage; the current defaults,
500 particles and adaptive moves of 10 leapfrog steps, are in benchmarks/RESULTS.md):

* conjugate linear regression (d = 3, n = 200): error 0.05 nats (standard error 0.03); over
  16 copies the per-copy standard deviation is 0.053 nats and the mean error -0.02 ± 0.013;
* product model y = abx + eps, n = 1000, truth ab = 0: error 0.02 nats (se 0.02); per-copy
  standard deviation 0.042 nats over 16 copies;
* two-component mixture (1 - a) N(0, 1) + a N(b, 1), n = 500, truth N(0, 1): error 0.004
  nats (se 0.02);
* three-component mixture, K = 3, n = 500 (six label modes): within 0.25 nats of Laplace
  + log 3!, the standard errors 0.05–0.2 nats. Multimodal posteriors are the noisy case: more
  particles reduce the spread.

TI over the same ladder agrees with SMC to 0.02 nats on all of these.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.evidence.draws import (
    DrawsRun,
    FromDraws,
    draws_free_energy,
    fitted_importance,
    summary_of_failures,
)
from slt.problem import Problem
from slt.results import Persistable, warnings_note
from slt.samplers.empty_component import component_structure, fitted_cover, reduced_draws_from
from slt.samplers.importance import (
    PARETO_K_LIMIT,
    ImportanceRun,
    default_components,
)
from slt.samplers.nested import NestedRun, NestedSampling, nested_sampling
from slt.samplers.tempering import INDEPENDENCE_MAX_DIM, SMCRun, Tempering, tempered_smc
from slt.validation import InputError, require_instance, require_int, require_one_of

__all__ = [
    "FreeEnergyResult", "disagreement", "free_energy", "from_draws_or_fallback",
    "thermodynamic_integral",
]

METHODS = ("auto", "draws", "smc", "importance", "ti", "nested")
# Two estimates of one F disagree when their gap exceeds this many combined standard errors
# and MIN_DISAGREEMENT nats: between SMC and TI (same particles) it says the ladder or the
# MCMC moves are inadequate; between tempered SMC and nested sampling, that one of the two
# references missed part of the posterior mass.
DISAGREEMENT_SE = 4.0
MIN_DISAGREEMENT = 0.1
_NAN_PAIR = (float("nan"), float("nan"))


@dataclass(frozen=True)
class FreeEnergyResult(Persistable):
    """F = -log Z with its standard error, both estimators, and the tempering ladders.

    Attributes:
      free_energy: the chosen method's estimate (lower is better): the mean over copies for
        "smc" and "ti", the importance-sampling estimate from the pooled particles for
        "importance", the merged runs' estimate for "nested".
      std_error: for "smc" and "ti" the standard deviation over copies / sqrt(num_copies);
        for "importance" its delta-method error; for "nested" the larger of nested
        sampling's own error and the runs' spread.
      method: the method that gave `free_energy`: "smc", "importance", "ti" or "nested".
      per_copy: the SMC estimate of each copy for the tempered methods (each run's, for
        "nested").
      smc, ti: (estimate, standard error) of both tempered methods; NaN for "nested".
      num_particles: particles per copy (live points per run, for "nested").
      target_ess: the tempering ladder's ESS fraction (NaN for "nested").
      run: the raw `SMCRun` (ladders, E_beta[n L_n], acceptance, final particles) or, for
        "nested", the `NestedRun` (weighted posterior draws, information, evaluations).
      warnings: plain-language diagnostics (also issued as Python warnings).
      nested: (estimate, standard error) of nested sampling; NaN unless method="nested".
      importance: (estimate, standard error) of importance sampling; NaN unless it ran.
      importance_run: its `ImportanceRun` (Pareto k-hat, ESS, draws), or None.
      path: "draws" (the fast path's F stood: `run` is its `DrawsRun`, method "importance")
        or "tempered" (tempered SMC or nested sampling gave F).
      checks: why the fast path's F was not taken, one "check: reason" per failed check
        (then path is "tempered": the fallback); empty otherwise.
      bridge: (estimate, standard error) of the fast path's bridge sampling; NaN unless it ran.
      draws_run: the fast path's `DrawsRun` when it ran (also when it failed), else None.
    """

    free_energy: float
    std_error: float
    method: str
    per_copy: np.ndarray
    smc: tuple[float, float]
    ti: tuple[float, float]
    num_particles: int
    target_ess: float
    run: SMCRun | NestedRun | DrawsRun = field(repr=False)
    warnings: tuple[str, ...] = ()
    nested: tuple[float, float] = _NAN_PAIR
    importance: tuple[float, float] = _NAN_PAIR
    importance_run: ImportanceRun | None = field(default=None, repr=False)
    path: str = "tempered"
    checks: tuple[str, ...] = ()
    bridge: tuple[float, float] = _NAN_PAIR
    draws_run: DrawsRun | None = field(default=None, repr=False)

    @property
    def log_evidence(self) -> float:
        """log Z = -F."""
        return -self.free_energy

    @property
    def num_copies(self) -> int:
        return self.per_copy.size

    def summary(self) -> pd.DataFrame:
        """One-row table."""
        run = self.run
        tempered = isinstance(run, SMCRun)
        return pd.DataFrame([{
            "free_energy": self.free_energy, "se": self.std_error, "method": self.method,
            "smc": self.smc[0], "smc_se": self.smc[1], "ti": self.ti[0], "ti_se": self.ti[1],
            "nested": self.nested[0], "nested_se": self.nested[1],
            "importance": self.importance[0], "importance_se": self.importance[1],
            "pareto_k": (self.importance_run.pareto_k if self.importance_run
                         else float("nan")),
            "copies": self.num_copies, "particles": self.num_particles,
            "stages": float(np.mean(run.num_stages)) if tempered else float("nan"),
            "min_acceptance": float(np.nanmin(run.acceptance)) if tempered else float("nan"),
            "nested_iterations": (float(run.num_iterations) if isinstance(run, NestedRun)
                                  else float("nan")),
            "run_s": run.run_time,
            "path": self.path, "bridge": self.bridge[0], "bridge_se": self.bridge[1],
            "checks": "; ".join(self.checks),
        }])

    def to_xarray(self) -> xr.Dataset:
        """The tempering ladders, dims (copy, stage); for "nested", each run's log Z and the
        weighted posterior draws, dims (run,) and (point, dim)."""
        run = self.run
        attrs = {"free_energy": self.free_energy, "std_error": self.std_error,
                 "method": self.method}
        if self.importance_run is not None:
            attrs |= {"importance": self.importance[0], "importance_se": self.importance[1],
                      "pareto_k": self.importance_run.pareto_k,
                      "importance_ess": self.importance_run.ess}
        attrs |= {"path": self.path, "checks": "; ".join(self.checks)}
        if isinstance(run, DrawsRun):
            return xr.Dataset(
                {"positions": (("chain", "draw", "dim"), run.positions),
                 "importance": (("proposal",), [-r.log_evidence for r in run.importance]),
                 "importance_se": (("proposal",), [r.std_error for r in run.importance]),
                 "pareto_k": (("proposal",), [r.pareto_k for r in run.importance]),
                 "bridge": (("proposal",), -run.bridge),
                 "bridge_se": (("proposal",), run.bridge_errors),
                 "optimum_gap": (("optimum",), run.optimum_gaps)},
                attrs=attrs | {"bridge_free_energy": self.bridge[0],
                               "bridge_std_error": self.bridge[1]},
            )
        if not isinstance(run, SMCRun):
            return xr.Dataset(
                {"log_evidence": (("run",), run.log_evidence),
                 "samples": (("point", "dim"), run.samples),
                 "log_weights": (("point",), run.log_weights)},
                attrs=attrs | {"information": run.information},
            )
        dims = ("copy", "stage")
        return xr.Dataset(
            {
                "beta": (dims, run.betas), "log_evidence": (dims, run.log_evidence_path),
                "mean_nll": (dims, run.mean_nll), "var_nll": (dims, run.var_nll),
                "acceptance": (dims, run.acceptance), "step_size": (dims, run.step_size),
                "num_moves": (dims, run.num_moves),
                "independence_acceptance": (dims, run.independence_acceptance),
            },
            attrs=attrs,
        )

    def plot(self, **kwargs):
        """Tempered: E_beta[n L_n] along each copy's ladder, and log Z(beta) accumulated.
        Nested: each run's F with its error, and the merged estimate."""
        from slt.plots.evidence import plot_free_energy

        return plot_free_energy(self, **kwargs)

    def __repr__(self) -> str:
        flags = warnings_note(self.warnings)
        head = f"FreeEnergyResult({self.method}: F={self.free_energy:.6g} ± {self.std_error:.2g}; "
        if isinstance(self.run, DrawsRun):
            return (f"{head}path=draws, bridge={self.bridge[0]:.6g} ± {self.bridge[1]:.2g}, "
                    f"pareto_k={self.run.pareto_k:.2f}, draws={self.run.positions.shape[:2]}"
                    f"{flags})")
        if self.checks:
            flags += f", fallback: {len(self.checks)} failed check(s)"
        if not isinstance(self.run, SMCRun):
            return (f"{head}runs={self.num_copies}, live points={self.num_particles}, "
                    f"H={self.run.information:.3g} nats{flags})")
        importance = (f", importance={self.importance[0]:.6g}"
                      if np.isfinite(self.importance[0]) else "")
        return (
            f"{head}smc={self.smc[0]:.6g}, ti={self.ti[0]:.6g}{importance}; "
            f"copies={self.num_copies}, "
            f"particles={self.num_particles}, stages~{np.mean(self.run.num_stages):.0f}{flags})"
        )


def disagreement(a: tuple[float, float], b: tuple[float, float]) -> float | None:
    """The gap |F_a - F_b| between two estimates (value, standard error) of one free energy
    when it exceeds `DISAGREEMENT_SE` combined standard errors and `MIN_DISAGREEMENT` nats,
    else None (they agree, as far as their errors can tell)."""
    gap = abs(a[0] - b[0])
    if not np.isfinite(gap):
        return None
    return gap if gap > max(DISAGREEMENT_SE * np.hypot(a[1], b[1]), MIN_DISAGREEMENT) else None


def thermodynamic_integral(betas, mean_nll, var_nll, log_evidence_path=None) -> float:
    """∫_0^1 E_beta[n L_n] dbeta from a ladder, trapezoid plus the end-point correction.

    Each interval [a, b], h = b - a, contributes h/2 (f_a + f_b) - h^2/12 (V_a - V_b), where
    f = E_beta[n L_n] and V = Var_beta[n L_n] = -df/dbeta (Euler–Maclaurin). NaN padding at
    the end of the arrays is ignored.

    The quadrature needs the integrand resolved: h^2 V <= 1 at both ends of an interval (the
    ESS-adapted ladder gives h^2 V ≈ 0.05 where n L_n is roughly normal). Near beta = 0 a
    diffuse prior can make n L_n heavy-tailed (a Poisson log-rate with prior N(0, 10^2):
    E_prior[n L_n] is of order e^50), and there the trapezoid is meaningless while the
    integral itself is finite. Given `log_evidence_path` (log Z(beta_k) accumulated by the
    SMC increments log E_{beta_k}[exp(h l)], the exact identity for the same integral), the
    intervals up to the last unresolved one are taken from it, and the quadrature covers
    the rest. Without it, every interval is integrated by the quadrature.
    """
    keep = np.isfinite(betas)
    b, f, v = (np.asarray(a, np.float64)[keep] for a in (betas, mean_nll, var_nll))
    h = np.diff(b)
    pieces = 0.5 * h * (f[:-1] + f[1:]) - h**2 / 12.0 * (v[:-1] - v[1:])
    if log_evidence_path is None:
        return float(np.sum(pieces))
    path = np.asarray(log_evidence_path, np.float64)[keep]
    unresolved = ~(h**2 * np.maximum(v[:-1], v[1:]) <= 1.0)
    start = int(np.flatnonzero(unresolved)[-1]) + 1 if unresolved.any() else 0
    return float(-path[start] + np.sum(pieces[start:]))


def free_energy(
    problem: Problem,
    key: jax.Array,
    sampler: FromDraws | Tempering | NestedSampling | None = None,
    *,
    method: str = "auto",
    waypoints=(),
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    draws=None,
) -> FreeEnergyResult:
    """The free energy F = -log Z with a standard error: from posterior draws, checked, or a
    tempered / nested reference.

    Args:
      problem: model and data with a proper prior (the prior is sampled exactly at beta = 0).
      key: PRNG key.
      sampler: a `FromDraws` value for the fast path (MAP restarts, NUTS, importance and
        bridge sampling, the self-check and its tempered fallback: its fields stated there);
        a `Tempering` value (the particles per copy, 2–4 copies whose spread is the
        standard error, the ladder's target ESS of 0.9–0.95, the moves, the prior draws of a
        `Problem.from_loss`: its fields stated there) for the tempered methods, or a
        `NestedSampling` value (live points, runs, ...) for "nested". None: `FromDraws()`;
        `Tempering()` with a tempered method, waypoints or a checkpoint; `NestedSampling()`
        with method="nested".
      method: "draws" (the fast path, module doc; its F is importance sampling's, reported as
        method "importance" with path "draws"); "smc" (the SMC normalising-constant
        estimate), "importance" (importance sampling from a mixture fitted to the SMC's final
        particles) or "ti" (thermodynamic integration over the same ladder), all from one
        tempered run; "auto" (default): "draws", unless a `Tempering` sampler, waypoints or a
        checkpoint ask for the tempered run: then "importance" when the problem declares
        exchangeable sites and d <= 16, else "smc" (module doc); "nested" when the sampler is
        a `NestedSampling` value; or "nested": nested sampling (module doc), a second,
        independent reference.
      waypoints: inverse temperatures the ladder must pass through; the particles there give
        WBIC and lambda from the same run (`slt.estimators.evidence.wbic.smc_draws(result.run)`).
        Tempered methods only.
      progress: show a progress bar.
      checkpoint: a file (.npz) where the SMC state (particles, log-likelihoods, each copy's
        beta, log Z and step size, the ladder so far) is saved after every tempering stage. A
        run stopped by Ctrl-C (which raises `Interrupted`, the finished stages saved) or killed
        resumes from it when called again with the same arguments, to the bitwise same
        result; a finished run's file is kept and returns the result without sampling. A file
        from other arguments raises `CheckpointError`. See `slt.samplers.checkpoint`.
        Tempered methods only.
      draws: posterior draws the user already has, for the fast path instead of its NUTS
        chains: a dict {site: constrained values (draw, ...) or (chain, draw, ...)} (NumPyro's
        `MCMC.get_samples()`), a NumPyro `MCMC`, an ArviZ `InferenceData`, or flat
        unconstrained (chain, draw, dim) draws (`slt.estimators.evidence.draws.posterior_draws`).

    Returns:
      A `FreeEnergyResult`; `path` says whether the fast path's F stood ("draws") or the
      tempered path gave it ("tempered"), `checks` why. Its accuracy with the defaults is
      stated in this module's docstring and in benchmarks/RESULTS.md.

    Raises:
      InputError (a ValueError, `slt.validation`): the sampler's num_copies (num_runs) not an
        integer >= 2, a sampler of the wrong kind for the method, draws with a tempered or
        nested method, draws that do not fit the problem, and what `tempered_smc` rejects
        (problem, key, the sampler's prior_sampler returning the wrong shape).
      ValueError: an unknown method, no proper prior, the log-likelihood not finite at any
        prior draw; waypoints with "nested" or "draws".
      RuntimeError: beta = 1 not reached within the stage limit.
      Interrupted (a KeyboardInterrupt, `slt.samplers.runner`): a KeyboardInterrupt during a
        checkpointed run; every finished stage is saved.
      CheckpointError (a ValueError): the file at `checkpoint` belongs to another run.

    Example:
      >>> result = slt.free_energy(problem, key, slt.Tempering(num_particles=100),
      ...                          progress=False)
      >>> round(result.free_energy, 2), round(result.std_error, 2)
      (141.54, 0.03)
      >>> x, y = problem.data["x"], problem.data["y"]
      >>> round(-slt.truth.linear_regression_log_evidence(x, y, 1.0, 1.0), 2)   # exact F
      141.55
    """
    require_one_of("method", method, METHODS)
    tempered_asked = (isinstance(sampler, Tempering) or len(np.atleast_1d(waypoints))
                      or checkpoint is not None)
    if method == "auto" and (isinstance(sampler, FromDraws)
                             or (sampler is None and not tempered_asked)):
        method = "draws"
    if draws is not None and method != "draws":
        raise InputError(f"draws are for the fast path (method='draws'), not {method!r}")
    if method == "draws":
        options = FromDraws() if sampler is None else sampler
        require_instance("sampler", options, FromDraws,
                         "a FromDraws value with method='draws'")
        if len(np.atleast_1d(waypoints)) or checkpoint is not None:
            raise InputError("waypoints and checkpoint belong to the tempered methods, not "
                             "the fast path ('draws')")
        return from_draws_or_fallback(
            problem, key, options, draws=draws, progress=progress,
            tempered=lambda fallback_key: _tempered_free_energy(
                problem, fallback_key, options.fallback, "auto", (), progress, None),
        )
    if method == "auto" and isinstance(sampler, NestedSampling):
        method = "nested"
    if method == "nested":
        sampler = NestedSampling() if sampler is None else sampler
        require_instance("sampler", sampler, NestedSampling,
                         "a NestedSampling value with method='nested'")
        require_int("num_runs (>= 2 for a standard error)", sampler.num_runs, minimum=2)
        if len(np.atleast_1d(waypoints)):
            raise InputError("waypoints belong to the tempered methods ('smc', 'ti'), not "
                             "'nested'")
        return _nested_free_energy(problem, key, sampler, progress)
    return _tempered_free_energy(problem, key, sampler, method, waypoints, progress, checkpoint)


def _tempered_free_energy(problem, key, sampler, method, waypoints, progress, checkpoint):
    """The tempered methods of `free_energy` ("auto" chooses "importance" or "smc")."""
    sampler = Tempering() if sampler is None else sampler
    require_instance("sampler", sampler, Tempering,
                     f"a Tempering value with method={method!r}")
    require_int("num_copies (>= 2 for a standard error)", sampler.num_copies, minimum=2)
    if method == "auto":
        method = ("importance" if problem.exchangeable and problem.dim <= INDEPENDENCE_MAX_DIM
                  else "smc")
    run = tempered_smc(problem, key, sampler, waypoints=waypoints, progress=progress,
                       checkpoint=checkpoint)
    estimates = {
        "smc": -run.log_evidence,
        "ti": np.array([
            thermodynamic_integral(b, f, v, path)
            for b, f, v, path in zip(run.betas, run.mean_nll, run.var_nll,
                                     run.log_evidence_path, strict=True)
        ]),
    }
    summary = {
        name: (float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size)))
        for name, values in estimates.items()
    }
    messages = _diagnose(run, summary)
    importance_run = None
    if method == "importance":
        importance_run = _importance(problem, key, run.particles)
        summary["importance"] = (-importance_run.log_evidence, importance_run.std_error)
        messages += _diagnose_importance(importance_run, summary)
        if importance_run.pareto_k > PARETO_K_LIMIT:
            method = "smc"
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return FreeEnergyResult(
        free_energy=summary[method][0], std_error=summary[method][1], method=method,
        per_copy=estimates["smc" if method == "importance" else method], smc=summary["smc"],
        ti=summary["ti"], num_particles=sampler.num_particles, target_ess=sampler.target_ess,
        run=run, warnings=tuple(messages), importance=summary.get("importance", _NAN_PAIR),
        importance_run=importance_run,
    )


def from_draws_or_fallback(problem: Problem, key, options: FromDraws, *, draws=None, fit=None,
                           progress: bool = False, tempered=None,
                           temperatures=(), smaller=None) -> FreeEnergyResult:
    """The fast path's F when its self-check passes; else `tempered(key)`'s result (the
    fallback) with the failed checks recorded, or, without a fallback (`options.fallback`
    None), the fast path's F with them as warnings. `draws`, `fit`, `progress`,
    `temperatures` and `smaller` go to `draws_free_energy`."""
    run_key, fallback_key = jax.random.split(key)
    run = draws_free_energy(problem, run_key, options, draws=draws, fit=fit,
                            progress=progress, temperatures=temperatures, smaller=smaller)
    checks = tuple(f"{name}: {why}" for name, why in run.failed.items())
    bridge = (-run.bridge_log_evidence, run.bridge_std_error)
    if checks and options.fallback is not None and tempered is not None:
        result = tempered(fallback_key)
        warnings.warn(f"the fast path's self-check failed ({summary_of_failures(run.failed)}); "
                      f"F comes from the tempered path", stacklevel=3)
        return dataclasses.replace(result, checks=checks, bridge=bridge, draws_run=run,
                                   warnings=(*result.warnings, *checks))
    for message in checks:
        warnings.warn(f"fast path check failed, no fallback: {message}", stacklevel=3)
    per_copy = np.array([-r.log_evidence for r in run.importance])
    return FreeEnergyResult(
        free_energy=-run.log_evidence, std_error=run.std_error, method="importance",
        per_copy=per_copy, smc=_NAN_PAIR, ti=_NAN_PAIR,
        num_particles=int(np.prod(run.positions.shape[:2])), target_ess=float("nan"), run=run,
        warnings=checks, importance=(-run.log_evidence, run.std_error),
        importance_run=run.importance[0], path="draws",
        checks=checks, bridge=bridge, draws_run=run,
    )


def _nested_free_energy(problem, key, sampler: NestedSampling, progress):
    """`free_energy(method="nested")`: F = -log Z of the merged nested-sampling runs."""
    run = nested_sampling(problem, key, sampler, progress=progress)
    estimate = (-run.combined_log_evidence, run.std_error)
    return FreeEnergyResult(
        free_energy=estimate[0], std_error=estimate[1], method="nested",
        per_copy=-np.asarray(run.log_evidence), smc=_NAN_PAIR, ti=_NAN_PAIR,
        num_particles=sampler.num_live, target_ess=float("nan"), run=run, nested=estimate,
    )


def _importance(problem: Problem, key, particles) -> ImportanceRun:
    """Importance sampling from the particles (`slt.estimators.evidence.draws.
    fitted_importance`, the fast path's own step): if its Pareto k-hat exceeds the limit,
    once more with half the components (a mixture over-fitted to too few particles per
    component has thin tails: measured on Old Faithful with 800 particles, RESULTS.md),
    keeping the run with the smaller k-hat. Each is unbiased for Z given its mixture. For a
    mixture model (`slt.samplers.empty_component.component_structure`) the proposal holds the
    empty-component cover as the fast path's do (its K - 1 part fitted to the particles with
    their emptiest component removed): measured on Old Faithful K = 4, k-hat 0.43-0.60 where
    it was up to 0.73, and F within 0.026 of the reference (RESULTS.md)."""
    flat = jnp.asarray(particles, problem.dtype).reshape(-1, problem.dim)
    structure = component_structure(problem)
    cover = None if structure is None else fitted_cover(
        problem, structure, jax.random.fold_in(key, 3),
        reduced_draws_from(problem, structure, flat))
    return fitted_importance(problem, jax.random.fold_in(key, 1), flat,
                             default_components(flat.shape[0], problem.dim), FromDraws(),
                             cover)[1]


def _diagnose(run: SMCRun, summary: dict) -> list[str]:
    messages = []
    smc, ti = summary["smc"][0], summary["ti"][0]
    gap = disagreement(summary["smc"], summary["ti"])
    if gap is not None:
        messages.append(
            f"SMC ({smc:.4g}) and TI ({ti:.4g}) disagree by {gap:.3g} nats: the tempering "
            f"ladder or the MCMC moves are inadequate; raise num_particles or num_mcmc_steps"
        )
    lowest = float(np.nanmin(run.acceptance))
    if lowest < 0.1:
        messages.append(
            f"HMC acceptance fell to {lowest:.2f} at some stage: particles barely moved there"
        )
    return messages


def _diagnose_importance(run: ImportanceRun, summary: dict) -> list[str]:
    """Warnings on the importance-sampling estimate: a heavy weight tail, or a gap to SMC."""
    messages = []
    if run.pareto_k > PARETO_K_LIMIT:
        messages.append(
            f"importance sampling is unreliable here (Pareto k-hat {run.pareto_k:.2f} > "
            f"{PARETO_K_LIMIT}): the mixture fitted to the particles does not cover the "
            f"posterior's tails; the SMC estimate is reported"
        )
    gap = disagreement(summary["importance"], summary["smc"])
    if gap is not None:
        messages.append(
            f"importance sampling ({summary['importance'][0]:.6g}) and SMC "
            f"({summary['smc'][0]:.6g}) disagree by {gap:.3g} nats: the SMC's particles "
            f"carried the wrong mass between modes, or the mixture missed a mode they visited"
        )
    return messages
