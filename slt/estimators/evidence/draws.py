"""F = -log Z from posterior draws: importance and bridge sampling, checked, with a fallback.

The fast path of `slt.free_energy` and `slt.compare` (issue 37). Importance sampling from a
proposal q fitted to posterior draws is unbiased for Z whatever weights the draws carried
between modes, as long as q covers them (`slt.samplers.importance`); the draws need not come
from a tempered run. So:

1. MAP restarts (`slt.fit_map`): the distinct optima, and which of them lie within
   `FromDraws.optimum_window` nats (of log prior + log-likelihood) of the best;
2. NUTS (NumPyro's, `slt.samplers.nuts.sample_nuts`), `num_chains` chains vmapped in one
   program at beta = 1, started at the distinct optima (best first, round robin); or the
   user's own draws (`posterior_draws`: a dict of constrained site values, NumPyro's `MCMC`,
   an ArviZ `InferenceData`, or flat unconstrained arrays);
3. the draws split into halves A and B (the first and the second half of every chain); q_A
   fitted to A, q_B to B (Gaussian mixtures with a defensive component, symmetrised over the
   label orders of exchangeable sites: `slt.samplers.importance.fit_proposal`);
4. from each q: importance sampling with `num_samples` draws of q, and the Meng & Wong (1996)
   optimal bridge between q and the posterior, iterated to its fixed point on the *other*
   half's posterior draws (independent of q, as the bridge identity needs):

       r_{t+1} = mean_j [ w~_j / (s1 w~_j + s2 r_t) ] / mean_i [ 1 / (s1 w_i + s2 r_t) ],

   w~_j = p~(w~_j) / q(w~_j) at q's draws, w_i = p~(w_i) / q(w_i) at posterior draws,
   s1 = N1 / (N1 + N2), s2 = N2 / (N1 + N2); its relative error is Frühwirth-Schnatter's
   (2004) Var(f2) / (N2 E f2^2) + Var(f1) / (N1_eff E f1^2), N1_eff the posterior terms'
   ESS over chains (ArviZ).

The reported F is the importance estimate from both proposals (their mean Z; the standard
error combined by the delta method). It stands only when its self-check passes
(`CHECKS`, thresholds in `FromDraws`):

* "pareto_k": the Pareto k-hat of both proposals' weights <= `max_pareto_k` (0.7, Vehtari et
  al. 2024: above it the weights' variance is not to be trusted);
* "std_error": the combined standard error <= `max_std_error` (0.02 nats);
* "proposals": the two importance estimates agree (gap <= max(4 combined se, 0.02 nats)):
  two q fitted to different draws see the same Z;
* "bridge": the bridge and importance estimates agree (same rule). The bridge averages over
  the posterior draws, so draws mis-weighted between non-equivalent modes bias it and not the
  importance estimate: a gap says the draws' weights are wrong, hence q may be too;
* "optima": every optimum of the restarts within `optimum_window` nats of the best is
  covered: its log weight log p~(w*) - log q(w*) is at most `COVERAGE_GAP` nats above
  log Z under both proposals. A mode no chain visited has q(w*) from the defensive component
  only, and the weight there is many nats above log Z; importance weights drawn from q
  alone (and k-hat) cannot see such a mode. So before the check, a proposal that misses
  optima gets a Laplace component N(w*, H^-1) at each (`slt.samplers.importance.with_modes`,
  weighted by its Laplace share of Z) and its importance sampling runs again: unbiased
  whatever the weights, and the other checks then judge it. A missed mode that holds real
  mass shows in the bridge (the posterior draws never visited it: "bridge" fails) or in the
  weights (a mode far from Gaussian: k-hat, se); one with a negligible share (on Old
  Faithful K = 4, a second way to split the clusters 5.8 nats below the best, which no chain
  visited) no longer sends the model to the tempered path. An optimum whose Hessian is not
  positive definite is not added and stays uncovered.
* "hot_draws" (where chains at inverse temperatures beta < 1 ran beside those at 1:
  `slt.compare`'s, at 1/log n): the share of the posterior that those draws place where q
  does not reach is at most `MAX_MISSED_SHARE` (a missed share m raises F by -log(1 - m)).
  Mass without an optimum of its own escapes the "optima" check and the chains at beta = 1
  alike: a broad slab around a narrow spike (Skilling's spike and slab: 10% of Z in the slab,
  which chains adapted to the spike never enter) left every other check passing with F 0.10
  nats high at a standard error of 0.002. Hotter chains, whose law is flatter, do enter it.
  Each temperature's draws (at most `HOT_POINTS`, evenly thinned) are weighed under both
  proposals, and the posterior's share where a log weight is more than `HOT_GAP` nats
  above log Z is estimated from them by self-normalised importance weights
  u_j ∝ exp((1 - beta) log L(w_j)), from pi_beta to the posterior. These weights rest on
  the few hot draws of highest likelihood (3-13 effective draws of 1024 on Old Faithful
  K = 4), so the check detects gross misses (tens of per cent of Z where q is e^15 too thin),
  it does not measure small ones; it runs only where such chains ran (`slt.compare` with a
  WBIC or lambda_hat column; `draws_free_energy(temperatures=...)`).

**More draws when only the precision fails.** The standard error is the one check that more
importance draws of the same proposals fix: when it alone fails and is at most
sqrt(`FromDraws.more_draws`) x `max_std_error` (so that `more_draws` times the draws would
meet it), each proposal draws (`more_draws` - 1) x `num_samples` more, pooled with its first
ones (one unbiased estimate from all of them), and every check is made again on the pooled
weights (`DrawsRun.more_draws`): seconds, where the tempered fallback costs minutes. A
weight tail too heavy for the first draws to show shows in the pooled k-hat: on Old Faithful
K = 4 (RESULTS.md), the two `compare` keys that failed on se alone (0.020, 0.026; a missed
mode's Laplace component) then failed on k-hat (0.76, 0.72), still a fallback, for the reason
that holds.

When any check fails, that model's F comes from the tempered path (`FromDraws.fallback`, a
`Tempering` value; `slt.free_energy`'s tempered methods), and the result says why
(`FreeEnergyResult.path`, `.checks`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt.estimators.evidence.wbic import TemperedDraws, tempered_draws
from slt.fit import FitResult, MAPFit, fit_map
from slt.problem import Problem
from slt.samplers.empty_component import (
    MIXED_SHARE,
    component_structure,
    fitted_cover,
    reduced_draws_from,
    reduced_draws_of,
)
from slt.samplers.importance import (
    ImportanceRun,
    _summarise,
    default_components,
    fit_proposal,
    proposal_log_weights,
    sample_proposal,
    with_cover,
    with_modes,
)
from slt.samplers.nuts import NUTS
from slt.samplers.tempering import Tempering
from slt.validation import (
    InputError,
    require_instance,
    require_int,
    require_positive,
    set_field,
)

__all__ = ["CHECKS", "DrawsRun", "FromDraws", "bridge_log_evidence", "draws_free_energy",
           "fitted_importance", "posterior_draws"]

CHECKS = ("pareto_k", "std_error", "proposals", "bridge", "optima", "hot_draws")
# Two estimates of one F agree when their gap is within this many combined standard errors,
# or within AGREEMENT_FLOOR nats (the accuracy asked of F: below it a gap does not matter).
AGREEMENT_SE = 4.0
AGREEMENT_FLOOR = 0.02
# An optimum counts as covered when its log importance weight is at most this many nats above
# log Z (a factor of e^5 ~ 150 between the posterior's and q's density there): at a mode q
# fitted, the ratio p(w*) / q(w*) is of order one; at a mode no draw visited only the defensive
# component reaches it, and the gap is tens of nats.
COVERAGE_GAP = 5.0
# Two optima are the same point when closer than this (unconstrained coordinates).
SAME_POINT = 1e-2
# The "hot_draws" check: the largest share of the posterior the chains at beta < 1 may place
# where the proposals do not reach (a share m raises F by -log(1 - m) ~ m nats: 0.02, the
# accuracy asked of F), and how many of each temperature's draws are weighed for it (one
# batch of the importance weights' program).
MAX_MISSED_SHARE = 0.02
HOT_POINTS = 1024
# ... where "missed" is a log weight more than this many nats above log Z: a region where the
# posterior's density is e^15 ~ 3e6 times q's is drawn by 20 000 draws of q only if it holds
# more than about a sixth of the posterior (20 000 x 3e-7 x 1/6 = 1). Gaps of 5-10 nats
# (COVERAGE_GAP's range) are the tails of q, which k-hat judges: the draws at 1/log n with the
# most weight at beta = 1 have them on Old Faithful K = 4, where the fast path's F is right.
HOT_GAP = 15.0


@dataclass(frozen=True)
class FromDraws:
    """How the fast path computes F = -log Z from posterior draws, and when it gives up.

    The path (module doc): MAP restarts (`fit`), NUTS at beta = 1 (`nuts`: its chains start at
    the distinct optima), two proposals fitted to the halves of the draws, importance sampling
    (`num_samples` draws of each) and the optimal bridge from each; the F stands when the
    self-check passes (k-hat <= `max_pareto_k`, se <= `max_std_error`, the proposals agree, the
    bridge agrees, every optimum within `optimum_window` nats of the best covered, and where
    chains at beta < 1 ran beside, no more than `MAX_MISSED_SHARE` of the posterior where they
    find the proposals do not reach), else the
    tempered path `fallback` gives it (None: no fallback, the failed checks are warned about).

    Attributes:
      fit: the MAP restarts (`slt.MAPFit`); in `slt.compare`, its plan's fit is used instead.
      nuts: the NUTS chains (`slt.NUTS`): 4 chains x (500 warm-up + 2000 draws) by default,
        i.e. 2 x 4000 draws for the two proposals (16 components each at d = 8,
        `default_components`), trajectories of at most 2^7 = 128 leapfrog steps
        (`max_tree_depth=7`). Measured on Old Faithful K = 3 (keys 0, 1): with 1000 draws
        per chain and 10 000 importance draws, key 1's k-hat was 0.71 and F 0.06 high
        (se 0.018); with 2000, -0.001 ± 0.007 and -0.016 ± 0.015. The depth: a capped
        trajectory is still an exact NUTS transition (it stops doubling, nothing else), and
        importance sampling is unbiased whatever the draws' autocorrelation; on K = 4 at
        depth 10, chains in the region where a component is nearly empty (its mean and scale
        following the prior) ran 120 (beta = 1) to 680 (beta = 1/log n, WBIC's) leapfrog
        steps per draw in lockstep. Depth 6 cut that to 54 and 63 but, on `compare`'s key,
        left a mode unvisited (the optima check failed, a tempered fallback); depth 7 passed
        there with half depth 10's CPU (benchmarks/RESULTS.md, "capped trajectories").
      num_samples: importance draws of each proposal (>= 100).
      num_components: Gaussian components of each proposal; None: `default_components`.
      empty_share: for a mixture (exchangeable components with simplex weights), the share
        eta of the empty-component cover q_E in each proposal, in [0, 0.5]
        (`slt.samplers.empty_component`: the posterior mass where one component is nearly
        empty, which a Gaussian mixture fitted to the draws under-covers); 0 turns it off.
      max_pareto_k: the largest acceptable Pareto k-hat, in (0, 1] (0.7: Vehtari et al.).
      max_std_error: the largest acceptable standard error of F, nats (> 0).
      more_draws: when the standard error is the only failed check and at most
        sqrt(more_draws) x max_std_error, each proposal's importance draws are made this many
        times `num_samples` in all and the checks run again (module doc); 1: never.
      optimum_window: optima within this many nats of the best must be covered (> 0).
      fallback: the tempered SMC that gives F when a check fails (`slt.Tempering`), or None
        (no fallback: the unchecked F with a warning per failed check). In `slt.compare` the
        fallback is the plan's own tempered path (`ComparisonPlan.free_energy`, through
        lambda_hat's temperatures); None there too turns it off.

    Example:
      >>> FromDraws(num_samples=5000, fallback=None)
      FromDraws(num_samples=5000, fallback=None)
      >>> FromDraws(max_pareto_k=2.0)
      Traceback (most recent call last):
      slt.validation.InputError: max_pareto_k must be in (0, 1], got 2.0
    """

    fit: MAPFit = MAPFit()
    nuts: NUTS = NUTS(num_chains=4, num_warmup=500, num_samples=2000, max_tree_depth=7)
    num_samples: int = 20_000
    num_components: int | None = None
    empty_share: float = MIXED_SHARE
    max_pareto_k: float = 0.7
    max_std_error: float = 0.02
    more_draws: int = 4
    optimum_window: float = 10.0
    fallback: Tempering | None = Tempering()

    def __post_init__(self):
        require_instance("fit", self.fit, MAPFit, "a MAPFit value")
        require_instance("nuts", self.nuts, NUTS, "a NUTS value")
        if self.nuts.num_samples < 2:
            raise InputError("nuts.num_samples must be >= 2: the draws are split in halves")
        set_field(self, "num_samples", require_int("num_samples", self.num_samples,
                                                   minimum=100))
        set_field(self, "more_draws", require_int("more_draws", self.more_draws, minimum=1))
        if self.num_components is not None:
            set_field(self, "num_components", require_int(
                "num_components", self.num_components, minimum=1))
        if not (isinstance(self.max_pareto_k, int | float)
                and 0.0 < float(self.max_pareto_k) <= 1.0):
            raise InputError(f"max_pareto_k must be in (0, 1], got {self.max_pareto_k!r}")
        set_field(self, "max_pareto_k", float(self.max_pareto_k))
        if not (isinstance(self.empty_share, int | float)
                and 0.0 <= float(self.empty_share) <= 0.5):
            raise InputError(f"empty_share must be in [0, 0.5], got {self.empty_share!r}")
        set_field(self, "empty_share", float(self.empty_share))
        for name in ("max_std_error", "optimum_window"):
            set_field(self, name, require_positive(name, getattr(self, name)))
        if self.fallback is not None:
            require_instance("fallback", self.fallback, Tempering,
                             "a Tempering value or None")

    def __repr__(self) -> str:
        from slt.estimators.evidence.compare import _changed_fields

        return _changed_fields(self)


class DrawsRun(NamedTuple):
    """What the fast path measured (module doc).

    positions: (chain, draw, dim) the posterior draws, flat and unconstrained.
    importance: the `ImportanceRun` of each proposal (q_A, q_B).
    log_evidence, std_error: the importance estimate from both proposals.
    bridge: (2,) the bridge estimates of log Z from q_A and q_B; bridge_errors: their se.
    bridge_log_evidence, bridge_std_error: the two combined.
    optimum_gaps: log p~(w*) - log q(w*) - log Z at each optimum within the window, the larger
      of the two proposals' (covered: <= COVERAGE_GAP).
    failed: {check: why} for every failed check (`CHECKS`); empty when F stands.
    nuts: the NUTS chains' `TemperedDraws` (None for the user's own draws): the chains at
      beta = 1 and, beside them in the same program, those at the extra `temperatures`.
    run_time: seconds of the whole path, compilation included (the fit excepted when given).
    added_modes: per proposal, the optima it missed that were added to it as Laplace
      components before its importance sampling was run again (module doc, "optima").
    more_draws: importance draws per proposal as a multiple of `FromDraws.num_samples`: 1, or
      `FromDraws.more_draws` when the se alone failed at first (module doc).
    missed_share: the largest share of the posterior that the draws at a temperature beta < 1
      place where a proposal does not reach (module doc, "hot_draws"); NaN without them.
    """

    positions: np.ndarray
    importance: tuple[ImportanceRun, ImportanceRun]
    log_evidence: float
    std_error: float
    bridge: np.ndarray
    bridge_errors: np.ndarray
    bridge_log_evidence: float
    bridge_std_error: float
    optimum_gaps: np.ndarray
    failed: dict
    nuts: TemperedDraws | None
    run_time: float
    added_modes: tuple[int, int] = (0, 0)
    more_draws: int = 1
    missed_share: float = float("nan")

    @property
    def pareto_k(self) -> float:
        """The larger Pareto k-hat of the two proposals' weights."""
        return max(run.pareto_k for run in self.importance)

    @property
    def passed(self) -> bool:
        return not self.failed


def posterior_draws(problem: Problem, draws) -> np.ndarray:
    """Posterior draws as (chain, draw, dim) flat unconstrained parameters of `problem`.

    Args:
      problem: the model the draws are of.
      draws: one of: a dict {site: array} of constrained values, shaped (draw, *site) or
        (chain, draw, *site) (NumPyro's `MCMC.get_samples()`; sites that are not parameters
        of the problem, e.g. deterministic ones, are ignored); a NumPyro `MCMC` that has run;
        an ArviZ `InferenceData` with a posterior group (dims chain, draw, ...); or an array
        (..., dim) of flat unconstrained draws (`Problem.ravel`), (chain, draw, dim) or
        (draw, dim).

    Returns:
      A float64 array (chain, draw, dim).

    Raises:
      InputError: a missing site, shapes that do not fit the problem, non-finite values.
    """
    if hasattr(draws, "posterior") and hasattr(draws.posterior, "data_vars"):
        posterior = draws.posterior
        draws = {name: posterior[name].values for name in posterior.data_vars}
    elif hasattr(draws, "get_samples") and callable(draws.get_samples):
        draws = draws.get_samples(group_by_chain=True)
    if isinstance(draws, Mapping):
        flat = _flat_from_sites(problem, draws)
    else:
        flat = np.asarray(draws, np.float64)
        if flat.ndim not in (2, 3) or flat.shape[-1] != problem.dim:
            raise InputError(f"flat draws must have shape (draw, dim) or (chain, draw, dim) with "
                             f"dim = {problem.dim}, got {flat.shape}")
        flat = flat if flat.ndim == 3 else flat[None]
    if not np.all(np.isfinite(flat)):
        raise InputError("the posterior draws must be finite (unconstrained: on the support)")
    return flat


def _flat_from_sites(problem: Problem, draws: Mapping) -> np.ndarray:
    template = problem.constrained_shapes()
    missing = sorted(set(template) - set(draws))
    if missing:
        raise InputError(f"the draws lack the parameter site(s) {missing}")
    values = {name: np.asarray(draws[name], np.float64) for name in template}
    leads = {name: value.ndim - len(template[name]) for name, value in values.items()}
    if len(set(leads.values())) != 1 or next(iter(leads.values())) not in (1, 2):
        raise InputError(f"every site's draws need the same leading (draw,) or (chain, draw) "
                         f"dims before the site's shape; got {{site: shape}} = "
                         f"{ {name: v.shape for name, v in values.items()} }")
    lead = next(iter(leads.values()))
    chains_draws = next(iter(values.values())).shape[:lead]
    if lead == 1:
        chains_draws = (1, *chains_draws)
    rows = {name: jnp.asarray(v.reshape(-1, *template[name]), problem.dtype)
            for name, v in values.items()}
    flat = jax.jit(jax.vmap(lambda v: problem.ravel(problem.unconstrain(v))))(rows)
    return np.asarray(flat, np.float64).reshape(*chains_draws, problem.dim)


def _log_mean_exp(values) -> float:
    values = np.asarray(values, np.float64).ravel()
    top = np.max(values)
    return float(top + np.log(np.mean(np.exp(values - top))))


def bridge_log_evidence(posterior_log_weights, proposal_log_weights, *, max_iterations=1000,
                        tolerance=1e-10) -> tuple[float, float]:
    """log Z by Meng & Wong's optimal bridge between q and the posterior (module doc).

    Args:
      posterior_log_weights: log p~(w) - log q(w) at posterior draws independent of q,
        shaped (chain, draw) (or (draw,)): the chains give the effective size of their terms.
      proposal_log_weights: log p~(w) - log q(w) at draws of q, shape (M,).
      max_iterations, tolerance: the fixed-point iteration stops when log r moves less than
        `tolerance`.

    Returns:
      (log Z, its standard error) — Frühwirth-Schnatter's relative MSE (module doc).
    """
    import arviz as az

    post = np.asarray(posterior_log_weights, np.float64)
    post = post[None] if post.ndim == 1 else post
    prop = np.asarray(proposal_log_weights, np.float64).ravel()
    prop = prop[np.isfinite(prop)]
    n1, n2 = post.size, prop.size
    log_s1, log_s2 = np.log(n1 / (n1 + n2)), np.log(n2 / (n1 + n2))
    log_r = _log_mean_exp(prop)
    for _ in range(max_iterations):
        numerator = prop - np.logaddexp(log_s1 + prop, log_s2 + log_r)
        denominator = -np.logaddexp(log_s1 + post, log_s2 + log_r)
        new = _log_mean_exp(numerator) - _log_mean_exp(denominator)
        converged = abs(new - log_r) < tolerance
        log_r = new
        if converged:
            break
    numerator = prop - np.logaddexp(log_s1 + prop, log_s2 + log_r)
    denominator = -np.logaddexp(log_s1 + post, log_s2 + log_r)
    f2 = np.exp(numerator - _log_mean_exp(numerator))
    f1 = np.exp(denominator - _log_mean_exp(denominator))
    ess = float(az.ess(f1)) if post.shape[1] >= 4 else float(n1)
    relative = np.var(f2) / n2 + np.var(f1) / max(min(ess, n1), 1.0)
    return float(log_r), float(np.sqrt(relative))


def _combined(estimates, errors) -> tuple[float, float]:
    """log of the mean of the Z's and the delta-method se of that log."""
    estimates, errors = np.asarray(estimates), np.asarray(errors)
    top = estimates.max()
    z = np.exp(estimates - top)
    return (float(top + np.log(z.mean())),
            float(np.sqrt(np.sum((errors * z) ** 2)) / z.sum()))


def _gap(a, b) -> float | None:
    """|a - b| when it exceeds max(AGREEMENT_SE combined se, AGREEMENT_FLOOR), else None."""
    gap = abs(a[0] - b[0])
    limit = max(AGREEMENT_SE * float(np.hypot(a[1], b[1])), AGREEMENT_FLOOR)
    return gap if not (gap <= limit) else None


def _optima(problem: Problem, fit: FitResult, window: float) -> np.ndarray:
    """The distinct restart optima within `window` nats of the best, best first, (m, dim)."""
    if fit.restart_params is None:
        return np.asarray(problem.ravel(fit.params), np.float64)[None]
    objectives = np.asarray(fit.restart_objectives, np.float64)
    points = np.asarray(fit.restart_params, np.float64)
    keep = np.flatnonzero(np.isfinite(objectives)
                          & (objectives >= np.nanmax(objectives) - window))
    chosen: list[np.ndarray] = []
    for index in keep[np.argsort(-objectives[keep])]:
        if all(np.linalg.norm(points[index] - other) > SAME_POINT for other in chosen):
            chosen.append(points[index])
    return np.stack(chosen)


def draws_free_energy(
    problem: Problem,
    key: jax.Array,
    options: FromDraws,
    *,
    draws=None,
    fit: FitResult | None = None,
    progress: bool = False,
    temperatures=(),
    smaller: tuple[Problem, np.ndarray] | None = None,
) -> DrawsRun:
    """The fast path (module doc): F from NUTS draws (or `draws`), with its self-check.

    Args:
      problem: model and data with a proper prior.
      key: PRNG key.
      options: a `FromDraws` value.
      draws: the user's posterior draws (`posterior_draws`); None: NUTS chains started at the
        distinct optima of the restarts.
      fit: the MAP restarts already run (`slt.fit_map`, its `restart_params` kept); None: run
        `options.fit`.
      progress: show NUTS's progress bar.
      temperatures: inverse temperatures < 1 whose `options.nuts.num_chains` chains run beside
        those at beta = 1, in the same compiled program (`slt.compare`: lambda_hat's and
        WBIC's); their draws are in `DrawsRun.nuts`.
      smaller: (problem, (chain, draw, dim) posterior draws) of the same mixture with one
        component fewer (`slt.compare` passes the previous model's): the empty-component
        cover's K - 1 component proposal is fitted to them (`FromDraws.empty_share`); None,
        or draws of another model: to this model's draws with their emptiest component
        removed.

    Returns:
      A `DrawsRun`; `failed` names the checks that did not pass (the fallback is the
      caller's, `slt.free_energy`).
    """
    start = time.perf_counter()
    fit_key, nuts_key, key_a, key_b = jax.random.split(key, 4)
    if fit is None:
        fit = fit_map(problem, fit_key, options.fit)
    optima = _optima(problem, fit, options.optimum_window)
    nuts_draws = None
    if draws is None:
        betas = np.unique(np.append(np.asarray(temperatures, np.float64), 1.0))
        chains = options.nuts.num_chains * betas.size
        starts = optima[np.arange(chains) % len(optima)]  # round robin, best first
        init = (starts if chains > 1
                else problem.unravel(jnp.asarray(optima[0], problem.dtype)))
        nuts_draws = tempered_draws(problem, nuts_key, betas, options.nuts, init=init,
                                    progress=progress)
        positions = np.asarray(nuts_draws.positions[nuts_draws.betas == 1.0], np.float64)
    else:
        positions = posterior_draws(problem, draws)
    half = positions.shape[1] // 2
    if half < 1:
        raise InputError("the draws must have at least 2 draws per chain (split in halves)")
    halves = (positions[:, :half], positions[:, half:2 * half])
    points = [jnp.asarray(np.asarray(h, problem.dtype).reshape(-1, problem.dim)) for h in halves]
    num_components = options.num_components or default_components(points[0].shape[0],
                                                                  problem.dim)
    minimum = max(2 * num_components, problem.dim + 1)
    if points[0].shape[0] < minimum:
        raise InputError(f"each half of the draws needs at least {minimum} points (2 x the "
                         f"components, and dim + 1); got {points[0].shape[0]}")
    covers = _covers(problem, jax.random.fold_in(key, 4), options, halves, smaller)
    sides = []
    for own, other_half, fit_key_h, cover in ((points[0], halves[1], key_a, covers[0]),
                                              (points[1], halves[0], key_b, covers[1])):
        proposal, run, log_weights = fitted_importance(problem, fit_key_h, own, num_components,
                                                       options, cover)
        gap = _optimum_gaps(problem, proposal, optima, run)
        missed = optima[~(gap <= COVERAGE_GAP)]
        proposal, count = (with_modes(problem, proposal, missed, run.log_evidence)
                           if len(missed) else (proposal, 0))
        if count:  # importance sampling again, from q with the missed modes added
            run, log_weights = _importance_run(problem, jax.random.fold_in(fit_key_h, 9),
                                               proposal, options, run.num_components + count)
        other = jnp.asarray(other_half.reshape(-1, problem.dim), problem.dtype)
        at_posterior = np.asarray(proposal_log_weights(problem, proposal, other), np.float64)
        sides.append(_Side(proposal, run, log_weights,
                           at_posterior.reshape(other_half.shape[:2]), fit_key_h, count))
    hot = _hot_draws(nuts_draws)
    assessed = _assess(problem, options, sides, optima, hot)
    factor = 1
    if (set(assessed.failed) == {"std_error"} and options.more_draws > 1
            and assessed.estimate[1] <= np.sqrt(options.more_draws) * options.max_std_error):
        factor = options.more_draws
        sides = [_with_more_draws(problem, options, side) for side in sides]
        assessed = _assess(problem, options, sides, optima, hot)
    estimate, bridge, bridges = assessed.estimate, assessed.bridge, assessed.bridges
    return DrawsRun(
        positions=positions, importance=tuple(side.run for side in sides),
        log_evidence=estimate[0], std_error=estimate[1],
        bridge=np.array([b[0] for b in bridges]), bridge_errors=np.array([b[1] for b in bridges]),
        bridge_log_evidence=bridge[0], bridge_std_error=bridge[1],
        optimum_gaps=assessed.optimum_gaps, failed=assessed.failed, nuts=nuts_draws,
        run_time=time.perf_counter() - start,
        added_modes=tuple(side.added_modes for side in sides), more_draws=factor,
        missed_share=assessed.missed_share,
    )


class _Side(NamedTuple):
    """One proposal's part of the fast path: q, its importance run and log weights at its own
    draws, its log weights at the other half's posterior draws (chain, draw), its key, and
    the missed modes added to it."""

    proposal: object
    run: ImportanceRun
    log_weights: np.ndarray
    at_posterior: np.ndarray
    key: jax.Array
    added_modes: int


class _Assessed(NamedTuple):
    estimate: tuple[float, float]
    bridges: list
    bridge: tuple[float, float]
    optimum_gaps: np.ndarray
    missed_share: float
    failed: dict


def _assess(problem, options: FromDraws, sides, optima, hot) -> _Assessed:
    """The combined importance and bridge estimates of both sides, and the failed checks;
    `hot`: the draws at temperatures below 1 (`_hot_draws`)."""
    runs = [side.run for side in sides]
    bridges = [bridge_log_evidence(side.at_posterior, side.log_weights) for side in sides]
    estimate = _combined([r.log_evidence for r in runs], [r.std_error for r in runs])
    bridge = _combined([b[0] for b in bridges], [b[1] for b in bridges])
    optimum_gaps = np.max(np.stack([_optimum_gaps(problem, side.proposal, optima, side.run)
                                    for side in sides]), axis=0)
    shares = [_missed_share(problem, side.proposal, side.run, *draws)
              for side in sides for draws in hot]
    # the largest measured one: a temperature whose draws carry no finite weight says nothing
    missed_share = max((share for share in shares if np.isfinite(share)), default=float("nan"))
    return _Assessed(estimate, bridges, bridge, optimum_gaps, missed_share,
                     _check(options, runs, estimate, bridge, optimum_gaps, missed_share))


def _hot_draws(nuts_draws: TemperedDraws | None) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """(beta, (M, dim) draws, (M,) n L_n) for each temperature beta < 1 of `nuts_draws`, at
    most `HOT_POINTS` draws of it, evenly thinned; empty without such chains."""
    if nuts_draws is None or nuts_draws.positions is None:
        return []
    hot = []
    for beta in np.unique(nuts_draws.betas[nuts_draws.betas < 1.0]):
        chains = nuts_draws.betas == beta
        points = nuts_draws.positions[chains].reshape(-1, nuts_draws.positions.shape[-1])
        nll = nuts_draws.nll[chains].reshape(-1)
        every = -(-points.shape[0] // HOT_POINTS)  # ceil
        hot.append((float(beta), points[::every], nll[::every]))
    return hot


def _missed_share(problem, proposal, run: ImportanceRun, beta: float, points, nll) -> float:
    """The share of the posterior that draws `points` of pi_beta (their n L_n `nll`) place
    where `proposal` does not reach: a log weight more than HOT_GAP nats above log Z
    (module doc, "hot_draws"), by self-normalised weights exp(-(1 - beta) n L_n)."""
    gaps = np.asarray(proposal_log_weights(problem, proposal, points), np.float64)
    log_u = -(1.0 - beta) * np.asarray(nll, np.float64)
    usable = np.isfinite(log_u)
    if not usable.any():
        return float("nan")
    u = np.exp(log_u[usable] - log_u[usable].max())
    missed = gaps[usable] - run.log_evidence > HOT_GAP  # a NaN target's weight is -inf
    return float(np.sum(u[missed]) / np.sum(u))


def _with_more_draws(problem, options: FromDraws, side: _Side) -> _Side:
    """`side` with (more_draws - 1) x num_samples further draws of its proposal, pooled with
    its first ones into one importance run. They are drawn num_samples at a time (batch i
    from fold_in(fold_in(key, 10), i)), by the program that made the first draws: a draw
    count of its own would compile the proposal's and the cover's draws anew (seconds)."""
    start = time.perf_counter()
    more_key = jax.random.fold_in(side.key, 10)
    batches = [_drawn_log_weights(problem, jax.random.fold_in(more_key, batch), side.proposal,
                                  options.num_samples)
               for batch in range(options.more_draws - 1)]
    pooled = np.concatenate([side.log_weights, *batches])
    run = _summarise(pooled, side.run.num_permutations, side.run.num_components,
                     side.run.run_time + time.perf_counter() - start)
    return side._replace(run=run, log_weights=pooled)


def _optimum_gaps(problem, proposal, optima, run: ImportanceRun) -> np.ndarray:
    """log p~(w*) - log q(w*) - log Z at each optimum (module doc, "optima")."""
    optima = jnp.asarray(np.asarray(optima, problem.dtype))  # converted on the host
    at_optima = proposal_log_weights(problem, proposal, optima)
    return np.asarray(at_optima, np.float64) - run.log_evidence


def _covers(problem, key, options: FromDraws, halves, smaller) -> tuple:
    """The empty-component cover of each half's proposal (`slt.samplers.empty_component`),
    its K - 1 component proposal fitted to that half of `smaller`'s draws where they are the
    same mixture with one component fewer, else to the half's own draws with the emptiest
    component removed; (None, None) for a model it does not apply to or `empty_share` 0."""
    structure = component_structure(problem) if options.empty_share > 0 else None
    if structure is None:
        return None, None
    reduced_halves = None
    if smaller is not None:
        small_problem, small_draws = smaller
        small_draws = np.asarray(small_draws)
        middle = small_draws.shape[1] // 2
        if middle >= 1:
            reduced_halves = [reduced_draws_of(problem, structure, small_problem,
                                               part.reshape(-1, small_problem.dim))
                              for part in (small_draws[:, :middle],
                                           small_draws[:, middle:2 * middle])]
    if reduced_halves is None or reduced_halves[0] is None:
        reduced_halves = [reduced_draws_from(problem, structure, half.reshape(-1, problem.dim))
                          for half in halves]
    return tuple(fitted_cover(problem, structure, jax.random.fold_in(key, index), points,
                              options.empty_share)
                 for index, points in enumerate(reduced_halves))


def fitted_importance(problem, key, points, num_components, options: FromDraws, cover=None):
    """(proposal, its `ImportanceRun`, its log weights) fitted to `points`, mixed with the
    empty-component `cover` when there is one; if the Pareto k-hat exceeds the limit, once
    more with half the components, keeping the fit with the smaller k-hat (as
    `slt.free_energy`'s importance step does: a mixture over-fitted to too few points per
    component has thin tails). Each is unbiased for Z given its proposal."""
    best = None
    for attempt, components in enumerate((num_components, max(1, (num_components - 1) // 2))):
        if attempt and (best[1].pareto_k <= options.max_pareto_k or num_components <= 2):
            break
        proposal_key, sample_key = jax.random.split(jax.random.fold_in(key, attempt))
        proposal = fit_proposal(problem, proposal_key, points, components)
        if cover is not None:
            proposal = with_cover(proposal, cover)
        run, log_weights = _importance_run(problem, sample_key, proposal, options,
                                           components + 1)
        if best is None or run.pareto_k < best[1].pareto_k:
            best = (proposal, run, log_weights)
    return best


def _importance_run(problem, key, proposal, options: FromDraws, num_components: int):
    """(`ImportanceRun`, log weights) of `options.num_samples` draws of `proposal`."""
    start = time.perf_counter()
    log_weights = _drawn_log_weights(problem, key, proposal, options.num_samples)
    return _summarise(log_weights, proposal.orders.shape[0], num_components,
                      time.perf_counter() - start), log_weights


def _drawn_log_weights(problem, key, proposal, num_samples: int) -> np.ndarray:
    """(num_samples,) float64 log importance weights log p~(w) - log q(w) of fresh draws of
    `proposal`."""
    drawn = sample_proposal(key, proposal, num_samples, problem)
    return np.asarray(proposal_log_weights(problem, proposal, drawn), np.float64)


def _check(options: FromDraws, runs, estimate, bridge, optimum_gaps, missed_share) -> dict:
    """{check: why} for every check of the module doc that fails."""
    failed = {}
    worst_k = max(run.pareto_k for run in runs)
    if not worst_k <= options.max_pareto_k:
        failed["pareto_k"] = (f"Pareto k-hat {worst_k:.2f} > {options.max_pareto_k:g}: the "
                              f"proposal's tails are lighter than the posterior's")
    if not estimate[1] <= options.max_std_error:
        failed["std_error"] = (f"standard error {estimate[1]:.3g} > {options.max_std_error:g} "
                               f"nats")
    gap = _gap((runs[0].log_evidence, runs[0].std_error),
               (runs[1].log_evidence, runs[1].std_error))
    if gap is not None:
        failed["proposals"] = (f"the two proposals (fitted to either half of the draws) "
                               f"disagree by {gap:.3g} nats")
    gap = _gap(estimate, bridge)
    if gap is not None:
        failed["bridge"] = (f"bridge ({-bridge[0]:.6g}) and importance ({-estimate[0]:.6g}) "
                            f"estimates of F disagree by {gap:.3g} nats: the draws are "
                            f"mis-weighted between modes")
    uncovered = int(np.sum(~(optimum_gaps <= COVERAGE_GAP)))
    if uncovered:
        failed["optima"] = (f"{uncovered} optimum/optima within {options.optimum_window:g} nats "
                            f"of the best not covered by the draws (log weight up to "
                            f"{np.nanmax(optimum_gaps):.3g} nats above log Z)")
    if missed_share > MAX_MISSED_SHARE:
        failed["hot_draws"] = (f"the chains at beta < 1 reach a part of the posterior that the "
                               f"proposals miss ({missed_share:.1%} of it, reweighted to beta = "
                               f"1; more than {MAX_MISSED_SHARE:.0%}): mass without an optimum "
                               f"of its own, which the chains at beta = 1 did not enter")
    return failed


def summary_of_failures(failed: Mapping[str, str]) -> str:
    """One line: the failed checks' names and reasons."""
    return "; ".join(f"{name}: {why}" for name, why in failed.items())

