"""How the local estimators sample: the sampler and the run plan, as frozen values.

As BlackJAX builds a sampler once (`blackjax.mala(logdensity_fn, step_size)`) and Optax an
optimiser (`optax.adam(learning_rate)`), slt's local estimators (`slt.llc`, `llc_table`,
`llc_trajectory`, `loss_kernel`, `bif`, `susceptibilities`) take what they sample with and for
how long as values, each with its defaults in its definition and its fields checked when it is
built (`InputError` naming the field):

- the sampler: `SGLD` (stochastic gradients on minibatches; the default), `SGHMC` (momentum
  and control variates on minibatches), or an exact, full-batch sampler of the same local
  posterior, `MALA` or `HMC` (Metropolis-adjusted, built on BlackJAX's kernels, step size and
  mass matrix adapted during the warmup): run one beside SGLD to see whether SGLD's answer is
  right;
- `Calibration`: how `SGLD(step_size="auto")` (and SGHMC's) chooses its step size
  (`slt.llc_calibrate`);
- `RunPlan`: how many chains, how long, in what chunks, with what checkpoint and progress.

Each sampler says whether the MALA acceptance of its steps is a check on them
(`has_mala_check`, a class attribute): only SGLD's. SGLD never rejects, and its step is a
Langevin proposal whose MALA acceptance measures the step's discretisation error: its chains
measure it, `llc_calibrate` bounds it and a low one earns `LowAcceptance`. SGHMC's momentum
step has no such acceptance; an exact sampler's own acceptance is its Metropolis test, which
costs no bias.

The estimand itself (gamma, n beta, the prior, the weights sampled) is a third value,
`slt.LocalPosterior`.

Example:
  >>> SGLD(step_size=1e-3, batch_size=128)
  SGLD(step_size=0.001, batch_size=128, preconditioner=None, mala_every=10, extrapolate=False)
  >>> RunPlan(num_chains=8).num_samples
  'auto'
  >>> RunPlan(num_warmup=1000, num_samples=1000).num_steps
  2000
  >>> MALA(step_size=-1.0)
  Traceback (most recent call last):
  slt.validation.InputError: step_size must be a finite number > 0, got -1.0
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from slt.samplers.run_length import MIN_DRAWS, MIN_WARMUP
from slt.samplers.sgld import PRECONDITIONERS
from slt.validation import (
    InputError,
    require_bool,
    require_in_interval,
    require_instance,
    require_int,
    require_one_of,
    require_positive,
    require_step_size,
    set_field,
)

__all__ = ["HMC", "MALA", "SGHMC", "SGLD", "Calibration", "RunPlan", "Sampler",
           "StochasticGradient"]

MASS_MATRICES = (None, "diagonal")
# SGHMC(step_size="auto") calibrates to |T - 1| <= this. Without the MALA acceptance, which
# bounds SGLD's step first, the temperature is its only bound on the heat; minibatch noise
# heats the tails, where lambda_hat's second moment sits, more than T weighs them: measured
# on a Gaussian linear regression at T - 1 = 0.08, lambda_hat +5% to +19% (RESULTS.md).
SGHMC_MAX_HEATING = 0.03
STARTS = ("dispersed", "center")
CHOICES = ("fitted", "largest")



@dataclass(frozen=True)
class Calibration:
    """How `SGLD(step_size="auto")` chooses its step size: the sweep of `slt.llc_calibrate`.

    For every candidate step size (and gamma) `chains_per_candidate` short chains run
    (`num_warmup` + `num_samples` steps), all candidates in one compiled program; a candidate
    passes when no chain diverges, the mean MALA acceptance is at least `min_acceptance`, the
    trace is stationary, the minibatch-noise ratio r(eps) is at most `max_noise_ratio`, and the
    configurational temperature satisfies |T - 1| <= `max_temperature_deviation` + 2 standard
    errors. The step is then read from curves fitted through every candidate, the largest at
    which each fitted statistic meets its bound (`choice`; the full criterion and the reasons
    for each number: `slt.estimators.local.calibration`).

    Attributes:
      step_sizes: the candidate step sizes; None: a geometric grid scaled by n beta and the
        minibatch-noise limit (`slt.estimators.local.calibration.default_step_sizes`).
      gammas: candidate localization strengths to calibrate as well; None: the local
        posterior's gamma only. With several, the smallest gamma with a passing step wins.
      chains_per_candidate, num_warmup, num_samples: the size of each candidate's run (4
        chains: with 2, the fitted step varied by up to 2.21x over 5 keys, with 4 by at most
        1.74x on the same 12 networks: the short runs' temperatures set it).
      min_acceptance: the MALA acceptance a candidate needs (0.9: each step's discretisation
        error is small).
      max_noise_ratio: the largest r(eps) = (eps / 4d) sum_j G_j (n beta)^2 Var_b(g_j)
        (0.02: measured, minibatch noise then biases lambda_hat by about 5%).
      max_temperature_deviation: the largest |T - 1| beyond two standard errors (0.1).
      max_lengthenings: how many times a sweep with no passing candidate is repeated with
        twice the warmup and draws for the candidates that had not settled (0: never).
      choice: how the step size is chosen from the sweep. "fitted" (the default): read
        from curves fitted through every candidate (noise ratio r = rho eps; MALA's
        log-acceptance spread a power of eps; 1 - 1/T = c eps), the largest step at which
        each meets its bound, with an interval (`CalibrationResult.interval`;
        `slt.estimators.local.calibration.fitted_step_size`); its default grid ends one grid
        factor above the noise limit. "largest": the former rule, grid included: the largest
        passing candidate. Measured over 5 keys on 12 networks (benchmarks/RESULTS.md, "The
        calibrated step over keys"; float64 builds): "fitted" varied by 1.06x to 1.74x
        with 4 chains a candidate (1.10x to 2.21x with 2); "largest", on float32 builds, by
        2.15x to 4.64x at 7 of them and found no passing candidate on some keys at 2.
    """

    step_sizes: tuple[float, ...] | None = None
    gammas: tuple[float, ...] | None = None
    chains_per_candidate: int = 4
    num_warmup: int = 500
    num_samples: int = 1000
    min_acceptance: float = 0.9
    max_noise_ratio: float = 0.02
    max_temperature_deviation: float = 0.1
    max_lengthenings: int = 3
    choice: str = "fitted"

    def __post_init__(self):
        for name in ("step_sizes", "gammas"):
            values = getattr(self, name)
            if values is not None:
                set_field(self, name, _positive_tuple(name, values, allow_zero=name == "gammas"))
        for name, minimum in (("chains_per_candidate", 1), ("num_warmup", 0),
                              ("num_samples", 1), ("max_lengthenings", 0)):
            set_field(self, name, require_int(name, getattr(self, name), minimum=minimum))
        set_field(self, "min_acceptance", require_in_interval(
            "min_acceptance", self.min_acceptance, 0.0, 1.0, closed=True))
        for name in ("max_noise_ratio", "max_temperature_deviation"):
            set_field(self, name, require_positive(name, getattr(self, name)))
        require_one_of("choice", self.choice, CHOICES)


@dataclass(frozen=True)
class SGLD:
    """Stochastic-gradient Langevin dynamics on minibatches (the default sampler).

    One step from w with step size eps, the minibatch estimate g of grad log pi(w) and a
    diagonal preconditioner G (`slt.samplers.sgld`):

        w' = w + (eps / 2) G g + sqrt(eps G) xi,      xi ~ N(0, I),

    G = I (plain SGLD, Welling & Teh 2011) or RMSprop's 1 / (delta + sqrt(v)) (pSGLD, Li et
    al. 2016). SGLD never rejects, so its stationary law is off by O(eps) (discretisation and
    minibatch noise): the MALA acceptance its proposal would have had and the configurational
    temperature, measured every `mala_every` steps, say how far.

    Attributes:
      step_size: eps; "auto" (the default): chosen by `slt.llc_calibrate` with the default
        `Calibration`, then checked on the run (`slt.llc`'s docstring); or a `Calibration`
        value: chosen by that sweep.
      batch_size: minibatch size b (capped at n); chains draw their minibatches by shuffled
        epochs, independently.
      preconditioner: None (SGLD) or "rmsprop" (pSGLD: on reduced-rank regression and deep
        linear networks a lower median error but hotter chains; RESULTS.md).
      mala_every: measure the diagnostics (MALA acceptance, configurational temperature)
        every this many steps; 0: never (no temperature, no "auto" temperature check).
      extrapolate: Richardson extrapolation over twin chains at eps and eps / 2, removing the
        O(eps) bias at twice the work (`slt.samplers.local_chains`).
      has_mala_check: True: the MALA acceptance of its proposals is measured and checked
        (module doc).
    """

    has_mala_check: ClassVar[bool] = True
    step_size: float | str | Calibration = "auto"
    batch_size: int = 256
    preconditioner: str | None = None
    mala_every: int = 10
    extrapolate: bool = False

    def __post_init__(self):
        if not isinstance(self.step_size, Calibration):
            set_field(self, "step_size", require_step_size("step_size", self.step_size))
        set_field(self, "batch_size", require_int("batch_size", self.batch_size, minimum=1))
        require_one_of("preconditioner", self.preconditioner, PRECONDITIONERS)
        set_field(self, "mala_every", require_int("mala_every", self.mala_every, minimum=0))
        set_field(self, "extrapolate", require_bool("extrapolate", self.extrapolate))

    @property
    def calibration(self) -> Calibration | None:
        """The sweep that chooses the step size (None for a numeric step size)."""
        return _calibration(self.step_size)

    @property
    def measure_every(self) -> int:
        """Steps between the diagnostics' measurements (`mala_every`)."""
        return self.mala_every

    @property
    def gradients_per_step(self) -> int:
        """Minibatch gradients a chain step costs: 2 with `extrapolate` (the twin), else 1."""
        return 2 if self.extrapolate else 1


@dataclass(frozen=True)
class SGHMC:
    """Stochastic-gradient Hamiltonian Monte Carlo on minibatches, with control variates.

    Underdamped Langevin dynamics (unit mass) integrated by the BAOAB splitting
    (`slt.samplers.sghmc`), time step h = sqrt(eps) and friction a per step:

        p += (h/2) g(w);  w += (h/2) p;  p = e^-a p + sqrt(1 - e^-2a) xi;  w += (h/2) p;
        p += (h/2) g(w),

    one minibatch gradient g a step; on a Gaussian target its positions are exactly
    distributed as pi at any stable step. With `control_variates` (the default), the
    minibatch gradient is taken relative to the centre w* (Baker et al. 2019):

        g = -n beta (grad L_b(w) - grad L_b(w*) + grad L_n(w*)) - gamma (w - w*) [+ prior],

    unbiased for grad log pi(w), with a noise that vanishes at w* and grows with |w - w*|
    (it costs a second minibatch gradient a step, at w*; grad L_n(w*) is computed once).
    Without them the minibatch noise, which heats the chains by about eps Var(g) / (1 -
    e^-2a), is amplified by 1 / a against SGLD's. The momentum crosses the local posterior's
    soft directions (curvature K) in about 1 / sqrt(eps K) steps where SGLD needs
    1 / (eps K). Like SGLD it never rejects: the minibatch noise's heat and the O(eps) error
    of a non-Gaussian target remain, and the configurational temperature, measured every
    `measure_every` steps, says how large (there is no MALA acceptance for a momentum step).

    Attributes:
      step_size: eps; "auto" (the default): chosen by `slt.llc_calibrate` with the default
        `Calibration` but |T - 1| <= `SGHMC_MAX_HEATING` (0.03; the criterion without the
        MALA acceptance: temperature, stationarity, divergence, and with control variates no
        noise-ratio bound, the noise being 0 at w*), then checked on the run; or a
        `Calibration` value.
      friction: a, in (0, 1] (0.1).
      batch_size: minibatch size b (capped at n).
      control_variates: take the minibatch gradient relative to w* (above).
      measure_every: measure the configurational temperature every this many steps; 0: never.
      has_mala_check: False: a momentum step has no MALA acceptance (module doc).
    """

    has_mala_check: ClassVar[bool] = False
    step_size: float | str | Calibration = "auto"
    friction: float = 0.1
    batch_size: int = 256
    control_variates: bool = True
    measure_every: int = 10

    def __post_init__(self):
        if not isinstance(self.step_size, Calibration):
            set_field(self, "step_size", require_step_size("step_size", self.step_size))
        set_field(self, "friction", require_positive("friction", self.friction))
        if self.friction > 1:
            raise InputError(f"friction must be a number in (0, 1], got {self.friction!r}")
        set_field(self, "batch_size", require_int("batch_size", self.batch_size, minimum=1))
        set_field(self, "control_variates", require_bool("control_variates",
                                                         self.control_variates))
        set_field(self, "measure_every", require_int("measure_every", self.measure_every,
                                                     minimum=0))

    @property
    def calibration(self) -> Calibration | None:
        """The sweep that chooses the step size (None for a numeric step size); "auto":
        the default `Calibration` with |T - 1| <= `SGHMC_MAX_HEATING`."""
        return _calibration(self.step_size, Calibration(
            max_temperature_deviation=SGHMC_MAX_HEATING))

    @property
    def gradients_per_step(self) -> int:
        """Minibatch gradients a chain step costs: 2 with control variates (the second at
        w*), else 1."""
        return 2 if self.control_variates else 1


def _calibration(step_size, default: Calibration | None = None) -> Calibration | None:
    """The sweep a stochastic-gradient sampler's `step_size` asks for (None for a number):
    `step_size` itself, or for "auto" `default` (None: `Calibration()`)."""
    if isinstance(step_size, Calibration):
        return step_size
    if step_size != "auto":
        return None
    return Calibration() if default is None else default


@dataclass(frozen=True)
class MALA:
    """The Metropolis-adjusted Langevin algorithm on the full data: an exact sampler.

    Proposal w' = w + tau grad log pi(w) + sqrt(2 tau) xi, xi ~ N(0, I) (BlackJAX's
    `blackjax.mala`, tau its `step_size`), accepted with the Metropolis-Hastings probability
    min(1, pi(w') q(w | w') / (pi(w) q(w' | w))): the chain's law is exactly the local
    posterior, whatever tau, at the price of one full-data gradient per step. With
    step_size="auto", tau is adapted during the warmup by Nesterov dual averaging
    (`blackjax.adaptation.step_size.dual_averaging_adaptation`) to the acceptance rate
    `target_acceptance` (0.574, optimal for MALA in high dimension: Roberts & Rosenthal 1998)
    and then held fixed.

    Attributes:
      step_size: tau, or "auto" (adapted during the warmup).
      target_acceptance: the mean acceptance probability the adaptation aims at.
      has_mala_check: False: its own acceptance is its Metropolis test (module doc).
    """

    has_mala_check: ClassVar[bool] = False
    step_size: float | str = "auto"
    target_acceptance: float = 0.574

    def __post_init__(self):
        set_field(self, "step_size", require_step_size("step_size", self.step_size))
        set_field(self, "target_acceptance", require_in_interval(
            "target_acceptance", self.target_acceptance, 0.0, 1.0))


@dataclass(frozen=True)
class HMC:
    """Hamiltonian Monte Carlo on the full data: an exact sampler.

    Each step draws a momentum p ~ N(0, M), integrates Hamilton's equations for
    H(w, p) = -log pi(w) + p' M^-1 p / 2 with L leapfrog steps of size eps, L drawn uniformly
    between about half and 1.5 times `num_integration_steps` (a fixed L can return every
    proposal to its start on a near-Gaussian target: `slt.samplers.exact`), and accepts the
    end point with probability min(1, exp(-Delta H)) (BlackJAX's `blackjax.dynamic_hmc`):
    the chain's law is exactly the local posterior. During the warmup eps is
    adapted by dual averaging to `target_acceptance` (step_size="auto") and, with
    mass_matrix="diagonal", M^-1 is set to the draws' variances over the middle half of the
    warmup (Welford's estimate regularised towards 1e-3 as Stan does,
    `blackjax.adaptation.mass_matrix`), after which eps is adapted again. The local
    posterior's curvatures span decades (n beta times the loss's in identified directions,
    gamma in the flat ones): the mass matrix evens them out.

    Attributes:
      step_size: eps, or "auto" (adapted during the warmup).
      num_integration_steps: the mean number of leapfrog steps per proposal (each one
        full-data gradient).
      target_acceptance: the mean acceptance probability the adaptation aims at (0.8).
      mass_matrix: "diagonal" (adapted during the warmup) or None (the identity).
      has_mala_check: False: its own acceptance is its Metropolis test (module doc).
    """

    has_mala_check: ClassVar[bool] = False
    step_size: float | str = "auto"
    num_integration_steps: int = 16
    target_acceptance: float = 0.8
    mass_matrix: str | None = "diagonal"

    def __post_init__(self):
        set_field(self, "step_size", require_step_size("step_size", self.step_size))
        set_field(self, "num_integration_steps", require_int(
            "num_integration_steps", self.num_integration_steps, minimum=1))
        set_field(self, "target_acceptance", require_in_interval(
            "target_acceptance", self.target_acceptance, 0.0, 1.0))
        require_one_of("mass_matrix", self.mass_matrix, MASS_MATRICES)


Sampler = SGLD | SGHMC | MALA | HMC
# The samplers that step on minibatch gradients without rejection (the others are exact).
StochasticGradient = SGLD | SGHMC


def uses_control_variates(sampler: Sampler) -> bool:
    """Whether `sampler` takes its minibatch gradients relative to the centre w* (SGHMC with
    `control_variates`): its chains then need grad L_n(w*)
    (`slt.samplers.ChainTargets.center_gradient`), and its minibatch noise at w* is 0."""
    return isinstance(sampler, SGHMC) and sampler.control_variates


@dataclass(frozen=True)
class RunPlan:
    """How long the chains run, in what pieces, with what record.

    By default the run decides its own length (`slt.samplers.run_length`): it warms up until
    the chains look stationary (a sequential test on their loss traces: split R-hat and drift)
    and draws until lambda_hat's standard error is at most `target_se` of it, within a budget
    of `max_steps` steps per chain; the result says what was spent and why the run stopped.
    Numbers for num_warmup and num_samples fix the run's length instead.

    Attributes:
      num_chains: independent chains (per part, for the estimators of several parts);
        vmapped, sharded over the devices when their total divides evenly.
      num_warmup: steps per chain discarded first (with an exact sampler: its adaptation), or
        "auto" (the default): until the chains are stationary, at least 1000 steps (an exact
        sampler adapts over the first `EXACT_ADAPTATION`).
      num_samples: draws per chain kept for the estimate (one per step), or "auto" (the
        default): until the standard error reaches `target_se`, at least 1000.
      target_se: with num_samples="auto", the standard error to reach, as a fraction of
        |lambda_hat| (0.05).
      min_ess: with num_samples="auto", the run also draws until the chains' distance from
        w* (the slowest trace it records) has at least this effective sample size over all
        chains (ArviZ's bulk ESS); 0 (the default): no such goal. The estimators that observe
        example losses raise it to their `OBSERVED_ESS` (500; their batch-means standard
        errors need blocks of many autocorrelation times, `slt.estimators.local.observed`).
      max_steps: with an "auto" length, the most steps a chain runs, warmup included (10 000:
        five times the fixed 1000 + 1000).
      chunk_size: steps per compiled chunk; progress is reported, the checkpoint written and
        an "auto" length decided between chunks.
      checkpoint: a file (.npz) where the chains' state and traces are saved after every
        chunk; a run stopped by Ctrl-C (`slt.Interrupted`) or killed resumes from it when
        called again with the same arguments, to the bitwise same result
        (`slt.samplers.checkpoint`); None: no file.
      progress: show progress bars.
      observe_every: the estimators that observe example losses along the chains
        (`slt.loss_kernel`, `slt.bif`, `slt.susceptibilities`) observe them every this many
        steps after the warmup (each observation is a forward pass over the examples);
        `slt.llc` records every step whatever its value.
      start: "dispersed" (the default): every chain starts at w* plus a random offset over
        the local posterior's expected width (`slt.estimators.local.center`), so that chains
        which have not mixed disagree and the diagnostics see it; "center": every chain
        starts at w* (the earlier behaviour).
      max_chains: `slt.llc_trajectory` runs the chains of at most this many (checkpoint,
        part, chain) triples in one program, whole checkpoints at a time (at least one);
        None (the default): as many checkpoints as fit in 2 GiB. The numbers do not depend
        on it (every checkpoint draws from its own key).
    """

    num_chains: int = 4
    num_warmup: int | str = "auto"
    num_samples: int | str = "auto"
    target_se: float = 0.05
    min_ess: int = 0
    max_steps: int = 10_000
    chunk_size: int = 500
    checkpoint: str | os.PathLike | None = None
    progress: bool = True
    observe_every: int = 1
    start: str = "dispersed"
    max_chains: int | None = None

    def __post_init__(self):
        for name, minimum in (("num_chains", 1), ("num_warmup", 0), ("num_samples", 1),
                              ("chunk_size", 1), ("observe_every", 1), ("max_steps", 1),
                              ("min_ess", 0)):
            value = getattr(self, name)
            if name in ("num_warmup", "num_samples") and isinstance(value, str):
                require_one_of(name, value, ("auto",))
                continue
            set_field(self, name, require_int(name, value, minimum=minimum))
        set_field(self, "target_se", require_in_interval("target_se", self.target_se, 0.0,
                                                         1.0))
        if self.checkpoint is not None:
            require_instance("checkpoint", self.checkpoint, str | os.PathLike,
                             "a file path or None")
        set_field(self, "progress", require_bool("progress", self.progress))
        require_one_of("start", self.start, STARTS)
        if self.max_chains is not None:
            set_field(self, "max_chains", require_int("max_chains", self.max_chains, minimum=1))

    @property
    def adaptive(self) -> bool:
        """Whether the run decides its own length (either length "auto")."""
        return "auto" in (self.num_warmup, self.num_samples)

    @property
    def num_steps(self) -> int:
        """Steps per chain: warmup and kept draws; with an "auto" length, the most it may run
        (`max_steps`, or the fixed lengths and the floors `MIN_WARMUP`, `MIN_DRAWS` where that
        is more)."""
        if not self.adaptive:
            return self.num_warmup + self.num_samples
        fixed = (MIN_WARMUP if self.num_warmup == "auto" else self.num_warmup) + (
            MIN_DRAWS if self.num_samples == "auto" else self.num_samples)
        return max(self.max_steps, fixed)


def _positive_tuple(name: str, values, *, allow_zero: bool) -> tuple[float, ...]:
    """A non-empty sequence of finite numbers > 0 (>= 0 with allow_zero), as a tuple."""
    flat = np.ravel(np.asarray(values, dtype=object))
    if flat.size == 0:
        raise InputError(f"{name} must be a non-empty sequence of numbers, got {values!r}")
    return tuple(require_positive(name, value, allow_zero=allow_zero) for value in flat)
