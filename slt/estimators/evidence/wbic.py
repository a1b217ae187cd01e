"""WBIC: the posterior mean of n L_n(w) at inverse temperature beta = 1 / log n (Watanabe 2013).

    WBIC = E_beta[n L_n(w)],   E_beta the mean over pi_beta(w) ∝ exp(-beta n L_n(w)) prior(w),

with L_n(w) = -(1/n) sum_i log p(y_i | x_i, w) (constants included) and the model's own prior
(no localization). For regular and singular models alike WBIC = F_n + O_p(sqrt(log n)), where
F_n = -log Z is the free energy; at any other beta the same expectation is the derivative
d/dbeta of -log Z(beta), which `slt.rlct` uses.

A sampler is a frozen value, `Tempering` (adaptive tempered SMC from the prior, the default),
`NUTS` or `TemperedSGLD`, run by a small function `(problem, key, betas, sampler, *, init,
progress, checkpoint) -> TemperedDraws` registered in `SAMPLERS` under the value's type: the
value's chains (SMC: its copies) at each entry of `betas`. `checkpoint` is a file path or None,
which the function passes to its chunked loop (`slt.samplers.checkpoint`: progress saved after
every chunk, resumed on the next call).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local.calibration import llc_calibrate
from slt.estimators.local.posterior import LocalPosterior, trace_statistics
from slt.fit import MAPFit, fit_map
from slt.problem import Problem, require_problem
from slt.results import Persistable, leaf_name, warnings_note
from slt.samplers.config import SGLD, RunPlan
from slt.samplers.local_chains import ChainTargets, run_chains
from slt.samplers.nuts import NUTS, sample_nuts
from slt.samplers.tempering import SMCRun, Tempering, tempered_smc
from slt.validation import (
    InputError,
    require_instance,
    require_key,
    require_params,
    require_positive,
)

__all__ = [
    "DEFAULT_SAMPLER", "SAMPLERS", "TemperedDraws", "TemperedSGLD", "WBICResult", "wbic",
    "wbic_beta", "tempered_draws",
]

# R-hat above this earns a warning. Vehtari et al. (2021) ask for 1.01 before trusting final
# results; beyond 1.05 chains visibly disagree about E_beta[n L_n].
RHAT_WARNING = 1.05
# The sampler of `wbic` and `rlct` unless they are given another: tempered SMC, its 4 copies as
# the chains, 1000 particles each as the draws (as many as `NUTS` keeps per chain by default).
DEFAULT_SAMPLER = Tempering(num_particles=1000)


@dataclass(frozen=True)
class TemperedSGLD:
    """Stochastic-gradient Langevin dynamics on the tempered posterior pi_beta, with the
    model's prior and no localization: the sampler of `slt.wbic` and `slt.rlct` for models too
    large for NUTS (`_sgld`).

    One step from w with step size eps, a minibatch B of b examples and a diagonal
    preconditioner G (the identity, or RMSprop's):

        w' = w + (eps / 2) G (beta (n / b) sum_{i in B} grad log p(y_i | x_i, w)
                              + grad log prior(w)) + sqrt(eps G) xi,    xi ~ N(0, I).

    SGLD never rejects, so its stationary law is off by O(eps); `extrapolate` removes that
    term (`_sgld`). Every chain starts at the MAP (or the `init` given to the estimator).

    Attributes:
      sgld: the SGLD step (`slt.samplers.SGLD`: step size, batch size, preconditioner,
        extrapolation). Its step size "auto" (or a `Calibration`) is chosen by
        `llc_calibrate` at gamma = 0, prior included, at the largest n beta asked for (the
        sharpest posterior, whose stable step size is the smallest); one step size serves
        every chain. Its extrapolation is on by default here: SGLD's stationary law is off
        by O(eps) (discretisation and minibatch noise): measured on conjugate regression at
        the calibrated step, E_beta[n L_n] comes out 0.7–1.0 nats (about 10% of d / 2 beta)
        too high, falling linearly with eps. Each chain then has a twin at eps / 2 and the
        recorded draws are 2 x_{eps/2}(t) - x_eps(t), whose mean is free of the O(eps) term;
        the price is about twice the work and a standard error about 3 times larger at
        equal draws (measured: 0.7 instead of 0.22 nats with 4 x 2000 draws, errors within
        one standard error over four keys).
      plan: `slt.RunPlan`: its num_chains (chains at each inverse temperature), num_warmup,
        num_samples and chunk_size; the estimator's own `progress` and `checkpoint` take the
        place of the plan's.

    Example:
      >>> TemperedSGLD(slt.samplers.SGLD(step_size=1e-3, batch_size=64, extrapolate=True))
      TemperedSGLD(sgld=SGLD(step_size=0.001, batch_size=64, preconditioner=None, \
mala_every=10, extrapolate=True), plan=RunPlan(num_chains=4, num_warmup=1000, \
num_samples=1000, target_se=0.05, min_ess=0, max_steps=10000, chunk_size=500, checkpoint=None, \
progress=True, observe_every=1, start='dispersed', max_chains=None))
      >>> TemperedSGLD(sgld=slt.samplers.MALA())
      Traceback (most recent call last):
      slt.validation.InputError: sgld must be a slt.samplers.SGLD, got MALA

    References:
      Welling & Teh, "Bayesian learning via stochastic gradient Langevin dynamics", ICML 2011;
      Li, Chen, Carlson & Carin, "Preconditioned stochastic gradient Langevin dynamics for
      deep neural networks", AAAI 2016.
    """

    name: ClassVar[str] = "sgld"  # how results name the sampler (`WBICResult.sampler`)

    sgld: SGLD = SGLD(extrapolate=True)
    plan: RunPlan = RunPlan(num_warmup=1000, num_samples=1000)

    def __post_init__(self):
        require_instance("sgld", self.sgld, SGLD, "a slt.samplers.SGLD")
        require_instance("plan", self.plan, RunPlan, "a slt.RunPlan")
        if self.plan.adaptive:  # the "auto" lengths are judged on lambda_hat's trace
            raise InputError("TemperedSGLD's plan needs numbers for num_warmup and "
                             f"num_samples, got {self.plan.num_warmup!r} and "
                             f"{self.plan.num_samples!r}")

    @property
    def num_chains(self) -> int:
        """Chains at each inverse temperature (the plan's)."""
        return self.plan.num_chains


Sampler = Tempering | NUTS | TemperedSGLD


class TemperedDraws(NamedTuple):
    """What a sampler returns: draws from pi_beta, one row per chain.

    nll: (chain, draw) n L_n(w) = -sum_i log p(y_i | x_i, w) at each draw, over the full data.
    betas: (chain,) the inverse temperature of each chain.
    positions: (chain, draw, dim) flat unconstrained draws, or None when not kept.
    sample_stats: per-draw diagnostics, each (chain, draw); "diverging" (bool) when the
      sampler can diverge.
    compile_time, run_time: seconds.
    """

    nll: np.ndarray
    betas: np.ndarray
    positions: np.ndarray | None
    sample_stats: dict
    compile_time: float
    run_time: float

    def select(self, chains: np.ndarray) -> TemperedDraws:
        """The draws of the chains in `chains` (indices or a boolean mask)."""
        return self._replace(
            nll=self.nll[chains],
            betas=self.betas[chains],
            positions=None if self.positions is None else self.positions[chains],
            sample_stats={name: value[chains] for name, value in self.sample_stats.items()},
        )


def _nuts(problem, key, betas, sampler: NUTS, *, init, progress, checkpoint) -> TemperedDraws:
    """NumPyro NUTS on pi_beta (`slt.samplers.nuts.sample_nuts`), `sampler.num_chains`
    chains at each beta."""
    draws = sample_nuts(problem, key, betas, sampler, init=init, progress=progress,
                        checkpoint=checkpoint)
    return TemperedDraws(
        nll=draws.nll,
        betas=draws.betas,
        positions=draws.positions,
        sample_stats={
            "diverging": draws.diverging,
            "n_steps": draws.num_steps,
            "acceptance_rate": draws.accept_prob,
        },
        compile_time=draws.compile_time,
        run_time=draws.run_time,
    )


def _sgld(
    problem, key, betas, sampler: TemperedSGLD, *, init, progress, checkpoint
) -> TemperedDraws:
    """SGLD on pi_beta (`slt.samplers.local_chains.run_chains` with gamma = 0 and the prior
    included), `sampler.num_chains` chains at each beta: for models too large for NUTS.
    Minibatch gradients, no accept/reject step (`TemperedSGLD`: the step, its step size and
    the extrapolation).

    `init` is the unconstrained start of every chain (pytree); default the MAP (`fit_map`, 4
    restarts). Starting in the posterior's bulk keeps the warm-up short.

    The recorded n L_n(w_t) is the paired minibatch estimate
        n (L_b(w_t) - L_b(w_0)) + n L_n(w_0),
    unbiased for n L_n(w_t) (w_0 the start, L_n(w_0) on the full data); its extra minibatch
    noise is part of the draws' variance and hence of the standard error.

    Raises:
      InputError (a ValueError): init not a finite point of the problem, no proper prior.
      FloatingPointError: a chain diverged (the message suggests a smaller step size).
    """
    betas = np.repeat(np.asarray(betas, dtype=np.float64), sampler.plan.num_chains)
    sgld, num_warmup = sampler.sgld, sampler.plan.num_warmup
    if not problem.has_prior:
        raise InputError(
            "sampling a tempered posterior needs a proper prior: pass log_prior= to "
            "Problem.from_loss"
        )
    if init is not None:
        require_params(problem, init, "init")
    else:
        init = fit_map(problem, key, MAPFit(num_restarts=4)).params
    start = problem.unconstrain(problem.constrain(init))
    nbetas = problem.n * betas
    step_size = sgld.step_size
    if sgld.calibration is not None:
        step_size = llc_calibrate(
            problem, start, jax.random.fold_in(key, 1),
            posterior=LocalPosterior(gamma=0.0, nbeta=float(nbetas.max()), include_prior=True),
            sampler=replace(sgld, extrapolate=False), progress=progress,
        ).step_size
    trace = run_chains(
        problem, start, key,
        ChainTargets(step_size=np.full(betas.size, float(step_size)),
                     gamma=np.zeros(betas.size), nbeta=nbetas, include_prior=True),
        sampler=sgld,
        plan=replace(sampler.plan, num_chains=1, checkpoint=checkpoint, progress=progress),
        description="SGLD at beta",
    )
    diverged = trace.diverged_at >= 0
    if diverged.any():
        raise FloatingPointError(
            f"SGLD diverged in {int(diverged.sum())} of {betas.size} chain(s) (first at step "
            f"{int(trace.diverged_at[diverged].min())}) with step_size={float(step_size):.3g}; "
            f"try step_size={float(step_size) / 10:.3g}"
        )
    kept = slice(num_warmup, None)
    nll = problem.n * (trace.loss[:, kept] - trace.center_loss[:, kept] + trace.center_full_loss)
    return TemperedDraws(
        nll=np.asarray(nll, dtype=np.float64), betas=betas, positions=None,
        sample_stats={"distance": trace.distance[:, kept]},
        compile_time=trace.compile_time, run_time=trace.run_time,
    )


def _smc(problem, key, betas, sampler: Tempering, *, init, progress, checkpoint
         ) -> TemperedDraws:
    """Adaptive tempered SMC from the prior (`slt.samplers.tempering.tempered_smc`), its ladder
    forced through every distinct beta: chains are its independent copies (`num_copies` for
    each entry of `betas`), draws its `num_particles` particles. Right on multimodal
    posteriors (a mixture's label-switched modes), where NUTS chains each see one mode; the
    path also yields log Z (`slt.free_energy`). It starts from exact prior draws: no `init`."""
    if init is not None:
        raise InputError("init: tempered SMC starts from exact prior draws and takes no "
                         "starting point; give init to NUTS() or TemperedSGLD() sampling")
    betas = np.repeat(np.asarray(betas, dtype=np.float64), sampler.num_copies)
    distinct, counts = np.unique(betas, return_counts=True)
    if np.any(counts != counts[0]):
        raise InputError(f"SMC needs the same number of chains at every beta, got {counts}")
    if distinct[-1] > 1.0:
        raise InputError(
            f"the tempered SMC path runs from beta = 0 to 1 and cannot reach beta = "
            f"{distinct[-1]:.4g} (n = {problem.n}: a multiplier c gives beta = c / log n = "
            f"c / {np.log(problem.n):.3g}); use betas <= 1 (smaller multipliers, or more data) "
            f"or sampler=NUTS()"
        )
    run = tempered_smc(problem, key, replace(sampler, num_copies=int(counts[0])),
                       waypoints=distinct, progress=progress, checkpoint=checkpoint)
    draws = smc_draws(run)
    order = np.argsort(betas, kind="stable")  # draws come sorted by beta, copies within
    return draws.select(np.argsort(order))


def smc_draws(run: SMCRun) -> TemperedDraws:
    """The particles of an SMC run at its waypoints as draws: one chain per (waypoint, copy),
    sorted by beta, copies within a beta."""
    copies, num_waypoints, particles = run.waypoint_nll.shape
    nll = np.swapaxes(run.waypoint_nll, 0, 1).reshape(num_waypoints * copies, particles)
    return TemperedDraws(
        nll=nll, betas=np.repeat(run.waypoints, copies), positions=None,
        sample_stats={"copy": np.broadcast_to(
            np.tile(np.arange(copies), num_waypoints)[:, None], nll.shape).copy()},
        compile_time=run.compile_time, run_time=run.run_time,
    )


def copies_std_error(nll: np.ndarray) -> float:
    """Standard error of the mean of n L_n over independent copies (rows) of particles: the
    copies' spread over sqrt(copies), but never below sd / sqrt(all particles), the error of
    independent draws, which a spread of few copies can underestimate by chance."""
    spread = nll.mean(axis=1).std(ddof=1) / np.sqrt(nll.shape[0]) if nll.shape[0] > 1 else 0.0
    return float(max(spread, nll.std() / np.sqrt(nll.size)))


SAMPLERS: dict[type, Callable[..., TemperedDraws]] = {
    Tempering: _smc, NUTS: _nuts, TemperedSGLD: _sgld,
}


def wbic_beta(n: int) -> float:
    """Watanabe's inverse temperature beta = 1 / log n (n >= 2)."""
    if n < 2:
        raise ValueError(f"beta = 1 / log n needs n >= 2, got n = {n}")
    return 1.0 / float(np.log(n))


def tempered_draws(
    problem: Problem,
    key: jax.Array,
    betas,
    sampler: Sampler = NUTS(),
    *,
    init=None,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> TemperedDraws:
    """Draws from pi_beta: the sampler's chains (SMC: its copies) at each entry of `betas`,
    those of one beta adjacent.

    `init` (NUTS, SGLD: the start of every chain) and `checkpoint` (a file path or None) go
    to the sampler: see `slt.wbic`.

    Raises:
      InputError (a ValueError): problem not a Problem, key not a PRNG key, sampler not a
        sampler value (the message lists them), or what the sampler rejects.
    """
    require_sampler(sampler)
    require_problem(problem)
    require_key(key)
    return SAMPLERS[type(sampler)](
        problem, key, np.asarray(betas, dtype=np.float64).reshape(-1), sampler, init=init,
        progress=progress, checkpoint=checkpoint,
    )


def require_sampler(sampler, name: str = "sampler") -> Sampler:
    """`sampler` if it is one of the values in `SAMPLERS`.

    Raises:
      InputError: anything else (a string such as "nuts" included); the message lists them.
    """
    if type(sampler) not in SAMPLERS:
        available = ", ".join(f"{cls.__name__}()" for cls in SAMPLERS)
        raise InputError(f"{name} must be a sampler value; available: {available}; got "
                         f"{sampler!r}")
    return sampler


@dataclass(frozen=True)
class WBICResult(Persistable):
    """E_beta[n L_n] with its Monte Carlo standard error and the sampler's diagnostics.

    Attributes:
      wbic: E_beta[n L_n(w)], the mean of n L_n over all draws (on the free-energy scale).
      std_error: sd(n L_n) / sqrt(ESS), ESS the bulk effective sample size of the n L_n draws.
      beta: the inverse temperature; n: the number of examples; sampler: its name.
      nll: (chain, draw) n L_n at each draw.
      ess, rhat: bulk ESS and rank-normalised R-hat of the n L_n draws (ArviZ). Label
        switching between chains does not move them: n L_n is invariant under relabelling.
      num_divergences: divergent transitions after warm-up (NUTS).
      compile_time, run_time: seconds.
      inference_data: ArviZ InferenceData: "posterior" (constrained values of every site, when
        the sampler keeps positions) and "sample_stats" (nll and the sampler's diagnostics).
        The tempered draws carry no "log_likelihood" group: LOO on them would be meaningless.
      warnings: plain-language diagnostics (also issued as Python warnings).
    """

    wbic: float
    std_error: float
    beta: float
    n: int
    sampler: str
    nll: np.ndarray = field(repr=False)
    ess: float
    rhat: float
    num_divergences: int
    compile_time: float
    run_time: float
    inference_data: az.InferenceData = field(repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def num_chains(self) -> int:
        return self.nll.shape[0]

    @property
    def num_samples(self) -> int:
        return self.nll.shape[1]

    @property
    def per_chain(self) -> np.ndarray:
        """E_beta[n L_n] estimated by each chain alone."""
        return self.nll.mean(axis=1)

    def summary(self) -> pd.DataFrame:
        """One-row table of the estimate and its diagnostics."""
        return pd.DataFrame([{
            "wbic": self.wbic, "se": self.std_error, "beta": self.beta, "n": self.n,
            "sampler": self.sampler, "chains": self.num_chains, "draws": self.num_samples,
            "ess": self.ess, "rhat": self.rhat, "divergences": self.num_divergences,
            "run_s": self.run_time,
        }])

    def to_xarray(self) -> xr.Dataset:
        """The estimate as an xarray Dataset.

        Returns:
          ``nll`` (n L_n at each draw, nats) over dims (chain, draw); 0-d variables wbic and
          std_error (nats), ess and rhat; attrs beta, n, sampler, num_divergences,
          compile_time and run_time (seconds). The site values are in `to_inference_data`.
        """
        chains, draws = self.nll.shape
        return xr.Dataset(
            {"nll": (("chain", "draw"), self.nll), "wbic": self.wbic,
             "std_error": self.std_error, "ess": self.ess, "rhat": self.rhat},
            coords={"chain": np.arange(chains), "draw": np.arange(draws)},
            attrs={"beta": self.beta, "n": self.n, "sampler": self.sampler,
                   "num_divergences": self.num_divergences,
                   "compile_time": self.compile_time, "run_time": self.run_time},
        )

    def to_inference_data(self) -> az.InferenceData:
        """The draws as ArviZ InferenceData (see `inference_data`)."""
        return self.inference_data

    def plot(self, **kwargs):
        """Trace of n L_n per chain and its histogram, with the estimate ± 2 se."""
        from slt.plots.evidence import plot_wbic

        return plot_wbic(self, **kwargs)

    def __repr__(self) -> str:
        flags = warnings_note(self.warnings)
        return (
            f"WBICResult(wbic={self.wbic:.6g} ± {self.std_error:.2g}, beta={self.beta:.4g}, "
            f"sampler={self.sampler!r}, chains={self.num_chains}, draws={self.num_samples}, "
            f"rhat={self.rhat:.3f}, divergences={self.num_divergences}{flags})"
        )


def wbic(
    problem: Problem,
    key: jax.Array,
    *,
    sampler: Sampler = DEFAULT_SAMPLER,
    beta: float | None = None,
    init=None,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
) -> WBICResult:
    """WBIC = E_beta[n L_n(w)] at beta = 1 / log n (or any beta), with a standard error.

    The tempered posterior pi_beta(w) ∝ exp(-beta n L_n(w)) prior(w) is sampled with the
    model's own prior in unconstrained coordinates; only the likelihood is tempered.

    Args:
      problem: model and data with a proper prior; n >= 2 when beta is not given.
      key: PRNG key.
      sampler: a `Tempering` value (the default, `DEFAULT_SAMPLER`: adaptive tempered SMC from
        the prior, `_smc`; chains are its copies and its particles the draws per copy; right
        on multimodal posteriors), `NUTS` (NumPyro NUTS, `slt.samplers.nuts.sample_nuts`:
        exact up to Monte Carlo error) or `TemperedSGLD` (minibatch SGLD, `_sgld`: for models
        too large for NUTS; step size calibrated automatically; a small discretisation bias);
        each value states its fields (chains, warmup, draws, ...).
      beta: inverse temperature > 0; default 1 / log n.
      init: NUTS and SGLD: the start of every chain (unconstrained pytree); default: NUTS's
        `problem.init` points, SGLD's MAP. Tempered SMC starts from the prior and takes none.
      progress: show a progress bar.
      checkpoint: a file (.npz) where the sampler saves its state and draws after every chunk
        (NUTS: every chain's position, adaptation state and PRNG key; SGLD: as `slt.llc`). A
        run stopped by Ctrl-C (which raises `Interrupted`, the finished chunks saved) or killed
        resumes from it when called again with the same arguments, to the bitwise same
        result; a finished run's file is kept and returns the result without sampling. A file
        from other arguments raises `CheckpointError`. Preparation (SGLD's MAP start and
        step-size calibration) is repeated on resume. See `slt.samplers.checkpoint`.

    Returns:
      A `WBICResult`; compare `result.wbic` with other free-energy estimates (lower is
      better).

    Raises:
      InputError (a ValueError, `slt.validation`): beta not finite and > 0, sampler not a
        sampler value (the message lists them), and the bad arguments `tempered_draws` and the
        sampler reject.
      ValueError: n < 2 without beta, no proper prior.
      FloatingPointError: the sampler diverged or n L_n is not finite at a draw.
      Interrupted (a KeyboardInterrupt, `slt.samplers.runner`): a KeyboardInterrupt during a
        checkpointed run; every finished chunk is saved.
      CheckpointError (a ValueError): the file at `checkpoint` belongs to another run.

    Example:
      >>> nuts = slt.NUTS(num_warmup=100, num_samples=100)
      >>> result = slt.wbic(problem, key, sampler=nuts, progress=False)
      >>> round(result.wbic, 1), round(result.std_error, 1)   # close to F = -log Z = 141.55
      (141.1, 0.4)

    References:
      Watanabe, "A widely applicable Bayesian information criterion", JMLR 14:867–897, 2013.
    """
    require_problem(problem)
    require_sampler(sampler)
    beta = wbic_beta(problem.n) if beta is None else require_positive("beta", beta)
    draws = tempered_draws(problem, key, [beta], sampler, init=init, progress=progress,
                           checkpoint=checkpoint)
    return summarise_draws(problem, draws, sampler=sampler.name)


def summarise_draws(
    problem: Problem, draws: TemperedDraws, *, sampler: str, warn: bool = True
) -> WBICResult:
    """A `WBICResult` from draws whose chains all share one beta; `warn=False` leaves the
    diagnostics in the result without issuing them. For SMC draws (chains = copies) the
    standard error is `copies_std_error` and the ESS the one it implies."""
    beta = float(draws.betas[0])
    nll = np.asarray(draws.nll, dtype=np.float64)
    if not np.all(np.isfinite(nll)):
        raise FloatingPointError(
            f"n L_n is not finite at {int(np.sum(~np.isfinite(nll)))} draw(s): the sampler left "
            f"the region where the model is defined"
        )
    mean, std_error, ess, rhat = trace_statistics(nll)
    if sampler == "smc":
        std_error = copies_std_error(nll)
        ess = float(nll.var() / std_error**2) if std_error > 0 else float(nll.size)
    divergences = int(np.sum(draws.sample_stats.get("diverging", 0)))
    messages = []
    if divergences:
        messages.append(
            f"{divergences} divergent transition(s) ({divergences / nll.size:.1%} of draws) at "
            f"beta={beta:.4g}: the estimate may be biased; raise NUTS(target_acceptance=...)"
        )
    if rhat > RHAT_WARNING:
        messages.append(
            f"R-hat of n L_n is {rhat:.3f} > {RHAT_WARNING} at beta={beta:.4g}: chains disagree; "
            f"run longer"
        )
    for message in messages if warn else ():
        warnings.warn(message, stacklevel=3)
    return WBICResult(
        wbic=mean, std_error=std_error, beta=beta, n=problem.n, sampler=sampler, nll=nll,
        ess=ess, rhat=rhat, num_divergences=divergences, compile_time=draws.compile_time,
        run_time=draws.run_time, inference_data=draws_inference_data(problem, draws),
        warnings=tuple(messages),
    )


def draws_inference_data(
    problem: Problem, draws: TemperedDraws, log_likelihood: dict | None = None
) -> az.InferenceData:
    """ArviZ InferenceData of draws: "posterior" (constrained values, when positions exist),
    "sample_stats" (nll, beta and the sampler's diagnostics) and, if given, "log_likelihood"
    (a dict of (chain, draw, n) arrays; give it only for untempered draws)."""
    chains, num_samples = draws.nll.shape
    sample_stats = {"nll": draws.nll, "beta": np.repeat(draws.betas[:, None], num_samples, 1)}
    sample_stats.update(draws.sample_stats)
    groups = {"sample_stats": sample_stats}
    if draws.positions is not None:
        flat = jnp.asarray(draws.positions).reshape(chains * num_samples, problem.dim)
        values = jax.vmap(lambda row: problem.constrain(problem.unravel(row)))(flat)
        groups["posterior"] = {
            leaf_name(path): np.asarray(leaf).reshape(chains, num_samples, *leaf.shape[1:])
            for path, leaf in jax.tree_util.tree_flatten_with_path(values)[0]
        }
    if log_likelihood is not None:
        groups["log_likelihood"] = log_likelihood
    return az.from_dict(**groups)
