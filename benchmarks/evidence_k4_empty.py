"""Does the fast path miss the posterior mass of K = 4's near-empty components?

Old Faithful eruptions (n = 272), `gaussian_mixture(4)` (d = 11), float64. On two clusters a
fourth component can be nearly empty: weight eps near 0, its mean and scale following the prior.
No MAP restart ends there, so the question is whether the fast path's proposals (fitted to NUTS
draws started at the optima, with a defensive component) cover that region. Three measurements:

* **NUTS draws** (the fast path with `NUTS_CHAINS` x `NUTS_DRAWS` draws, no fallback, for
  K = 4 and K = 3): the fraction of draws whose smallest weight is below 0.01, 0.02, 0.05.
* **A proposal that covers the region by construction.** q_mix = (1 - eta) q_fit + eta q_E:
  q_fit the fast path's proposal (fitted to the first half of K = 4's draws), and q_E the
  empty-component proposal: a draw w' of K = 3's fitted proposal for three components, the
  fourth's weight eps ~ Beta(1, b), its mean and scale from the prior, the fourth inserted at a
  uniformly chosen label j, the other weights (1 - eps) w'. Its density, in the constrained
  coordinates theta = (weights[:3], means, scales),

      q_E(theta) = (1/4) sum_j q_3(w_{-j} / (1 - w_j), means_{-j}, scales_{-j})
                   Beta(w_j; 1, b) N(mean_j; 0, 10^2) LogNormal(scale_j; 0, 1) / (1 - w_j)^2,

  (1 - w_j)^2 the Jacobian of (w', eps) -> w on the simplex), moved to slt's unconstrained
  coordinates by log |det d theta / d u| (checked against `Problem.log_prior`:
  `coordinate_gap`). Importance
  sampling from q_mix is unbiased for Z whether or not q_fit covers the region; if q_fit missed
  its mass, F from q_mix would be lower than F from q_fit alone. Also: the share of Z that the
  importance weights put on draws with smallest weight below 0.005, 0.02, 0.05.
* **Analytic size of the region.** With component j contributing nothing (its mean off the
  data), the likelihood is (1 - eps)^n times K = 3's at the other components' renormalised
  weights, which by the Dirichlet's aggregation property are Dirichlet(1_3) independent of
  eps ~ Beta(1, 3), with the K = 3 prior on their means and scales. So the region's mass is
  Z_3 E[(1 - eps)^n] = Z_3 3 / (n + 3) per label, K (K - 1) / (n + K - 1) Z_3 in all:
  F_3 + log((n + 3) / 12) = F_3 + 3.13 nats, a few per cent of Z_4.

Run: `python -m benchmarks.evidence_k4_empty` (one JSON line per measurement; minutes).
"""

from __future__ import annotations

import json
import os
import time
import warnings

import jax
import numpy as np

NUTS_CHAINS, NUTS_WARMUP, NUTS_DRAWS = 4, 1000, 4000
IMPORTANCE_DRAWS = 40_000
# (eta, b, key): the share of q_E in q_mix and the Beta(1, b) of the empty weight.
MIXES = ((0.2, 68.0, 0), (0.5, 20.0, 1))
THRESHOLDS = (0.005, 0.01, 0.02, 0.05)
_CHUNK = 4096


def _setup():
    jax.config.update("jax_enable_x64", True)
    from benchmarks.evidence_old_faithful import old_faithful_mixture

    return old_faithful_mixture(4), old_faithful_mixture(3)


def nuts_draws(problem, key) -> tuple[np.ndarray, dict]:
    """The fast path's draws (no fallback) and its estimate, with the smallest weights'
    fractions."""
    import slt
    from slt.estimators.evidence.draws import draws_free_energy

    options = slt.FromDraws(nuts=slt.NUTS(num_chains=NUTS_CHAINS, num_warmup=NUTS_WARMUP,
                                          num_samples=NUTS_DRAWS),
                            num_samples=20_000, fallback=None)
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = draws_free_energy(problem, key, options)
    weights = _constrained(problem, run.positions.reshape(-1, problem.dim))[0]
    smallest = weights.min(1)
    return run.positions, {
        "K": weights.shape[1], "F": -run.log_evidence, "se": run.std_error,
        "per_proposal": [-r.log_evidence for r in run.importance],
        "pareto_k": [r.pareto_k for r in run.importance],
        "bridge": -run.bridge_log_evidence, "failed": sorted(run.failed),
        "smallest_weight_below": {t: float(np.mean(smallest < t)) for t in THRESHOLDS},
        "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - start,
        "load": os.getloadavg()}


def _constrained(problem, flat):
    """(weights, means, scales), each (m, K), at flat unconstrained points."""
    values = jax.jit(jax.vmap(lambda u: problem.constrain(problem.unravel(u))))(
        jax.numpy.asarray(flat))
    return (np.asarray(values["weights"]), np.asarray(values["means"][..., 0]),
            np.asarray(values["scales"][..., 0]))


def _unconstrained(problem, weights, means, scales):
    return jax.jit(jax.vmap(lambda w, m, s: problem.ravel(problem.unconstrain(
        {"weights": w, "means": m[:, None], "scales": s[:, None]}))))(weights, means, scales)


def _log_det_jacobian(problem):
    """log |det d theta / d u| at flat points, theta = (weights[:-1], means, scales)."""
    jnp = jax.numpy

    def theta(u):
        values = problem.constrain(problem.unravel(u))
        return jnp.concatenate([values["weights"][:-1], values["means"].ravel(),
                                values["scales"].ravel()])

    return jax.jit(jax.vmap(lambda u: jnp.linalg.slogdet(jax.jacfwd(theta)(u))[1]))


def _log_joint(problem):
    """log prior (of the unconstrained u) + log-likelihood at flat points."""
    return jax.jit(jax.vmap(lambda u: problem.log_prior(problem.unravel(u)) + jax.numpy.sum(
        problem.loglik(problem.unravel(u), problem.data))))


def coordinate_gap(problem, flat) -> float:
    """The largest |log joint(u) - log |det d theta / d u| - (log L + log p)(theta)| at flat
    points, log p the prior density in theta (Dirichlet(1_K): (K - 1)! on weights[:-1]): the
    Jacobian that moves q_E's density to slt's coordinates, checked."""
    from scipy import stats
    from scipy.special import gammaln, logsumexp

    weights, means, scales = _constrained(problem, flat)
    y = np.asarray(problem.data["y"], np.float64)[None, :, None]
    loglik = logsumexp(np.log(weights)[:, None] + stats.norm.logpdf(
        y, means[:, None], scales[:, None]), axis=2).sum(1)
    log_prior = (gammaln(weights.shape[1]) + stats.norm.logpdf(means, 0.0, 10.0).sum(1)
                 + stats.lognorm.logpdf(scales, 1.0).sum(1))
    slt_side = _chunked(_log_joint(problem), flat) - _chunked(_log_det_jacobian(problem), flat)
    return float(np.max(np.abs(slt_side - loglik - log_prior)))


def _chunked(function, points):
    return np.concatenate([np.asarray(function(points[i:i + _CHUNK]))
                           for i in range(0, points.shape[0], _CHUNK)])


class EmptyComponentProposal:
    """q_E of the module doc: K = 3's fitted proposal `proposal3` for three components, the
    fourth's weight Beta(1, b), its mean and scale from the prior, at a uniform label."""

    def __init__(self, problem, problem3, proposal3, b: float):
        self.problem, self.problem3, self.proposal3, self.b = problem, problem3, proposal3, b
        self.k = problem.dim // 3 + 1  # d = 3 K - 1
        self.jacobian, self.jacobian3 = _log_det_jacobian(problem), _log_det_jacobian(problem3)
        self.joint3 = _log_joint(problem3)

    def sample(self, key, size):
        from slt.samplers.importance import sample_proposal

        draw3, weight, mean, scale, label = jax.random.split(key, 5)
        w3, m3, s3 = _constrained(self.problem3, sample_proposal(draw3, self.proposal3, size))
        eps = np.asarray(jax.random.beta(weight, 1.0, self.b, (size,)))
        extra = (eps, 10.0 * np.asarray(jax.random.normal(mean, (size,))),
                 np.exp(np.asarray(jax.random.normal(scale, (size,)))))
        j = np.asarray(jax.random.randint(label, (size,), 0, self.k))
        rest = np.arange(self.k - 1)[None] + (np.arange(self.k - 1)[None] >= j[:, None])
        rows = np.arange(size)[:, None]
        parts = []
        for three, one in zip((w3 * (1 - eps)[:, None], m3, s3), extra, strict=True):
            full = np.empty((size, self.k))
            full[rows, rest], full[np.arange(size), j] = three, one
            parts.append(full)
        return _unconstrained(self.problem, *parts)

    def log_density(self, flat):
        """log q_E at flat unconstrained K = 4 points (slt's coordinates)."""
        from scipy import stats

        from slt.samplers.importance import proposal_log_weights

        weights, means, scales = _constrained(self.problem, flat)
        terms = []
        for j in range(self.k):
            rest = [i for i in range(self.k) if i != j]
            eps = weights[:, j]
            flat3 = _unconstrained(self.problem3, weights[:, rest] / (1 - eps)[:, None],
                                   means[:, rest], scales[:, rest])
            log_q3 = (_chunked(self.joint3, flat3)
                      - np.asarray(proposal_log_weights(self.problem3, self.proposal3, flat3))
                      - _chunked(self.jacobian3, flat3))
            terms.append(log_q3 + stats.beta.logpdf(eps, 1.0, self.b)
                         + stats.norm.logpdf(means[:, j], 0.0, 10.0)
                         + stats.lognorm.logpdf(scales[:, j], 1.0) - 2 * np.log1p(-eps))
        return (np.logaddexp.reduce(np.stack(terms), axis=0) - np.log(self.k)
                + _chunked(self.jacobian, flat))


def analytic_empty_region(free_energy, free_energy_less, n: int, k: int) -> dict:
    """The idealised empty-component region's F (module doc) and its share of Z_K with the
    empty weight below each threshold t: Z_{K-1} K (K - 1) / (n + K - 1) (1 - (1 - t)^(n + K
    - 1)) / Z_K, from F_K and F_{K-1}."""
    log_mass = -free_energy_less + np.log(k * (k - 1) / (n + k - 1))
    return {"empty_region_F": -log_mass, "share_of_Z_weight_below": {
        t: float(np.exp(log_mass + free_energy) * (1 - (1 - t) ** (n + k - 1)))
        for t in THRESHOLDS}}


def mixed_importance(problem, problem3, draws4, draws3, eta, b, key) -> dict:
    """F from q_fit alone and from q_mix (module doc), and the shares of Z at small weights."""
    from slt.samplers.importance import (
        _summarise,
        default_components,
        fit_proposal,
        proposal_log_weights,
        sample_proposal,
    )

    start, cpu = time.perf_counter(), time.process_time()
    fit_key, fit3_key, draw_key, empty_key = jax.random.split(key, 4)
    half = draws4[:, :draws4.shape[1] // 2].reshape(-1, problem.dim)
    points3 = draws3.reshape(-1, problem3.dim)
    q_fit = fit_proposal(problem, fit_key, jax.numpy.asarray(half),
                         default_components(half.shape[0], problem.dim))
    q_empty = EmptyComponentProposal(problem, problem3, fit_proposal(
        problem3, fit3_key, jax.numpy.asarray(points3),
        default_components(points3.shape[0], problem3.dim)), b)
    from_empty = round(eta * IMPORTANCE_DRAWS)
    from_fit = IMPORTANCE_DRAWS - from_empty
    flat = np.concatenate([np.asarray(sample_proposal(draw_key, q_fit, from_fit)),
                           np.asarray(q_empty.sample(empty_key, from_empty))])
    joint = _chunked(_log_joint(problem), flat)
    log_q_fit = joint - np.asarray(proposal_log_weights(problem, q_fit, flat), np.float64)
    log_q = np.logaddexp(np.log1p(-eta) + log_q_fit, np.log(eta) + q_empty.log_density(flat))
    log_weights = joint - log_q
    mixed = _summarise(log_weights, 24, 0, 0.0)
    alone = _summarise(joint[:from_fit] - log_q_fit[:from_fit], 24, 0, 0.0)
    ratio = np.exp(log_weights - np.max(log_weights))
    smallest = _constrained(problem, flat)[0].min(1)
    return {"eta": eta, "b": b, "draws": IMPORTANCE_DRAWS,
            "F_mix": -mixed.log_evidence, "se_mix": mixed.std_error,
            "pareto_k_mix": mixed.pareto_k,
            "F_fit_alone": -alone.log_evidence, "se_fit_alone": alone.std_error,
            "pareto_k_fit_alone": alone.pareto_k,
            "share_of_Z_smallest_weight_below": {
                t: float(ratio[smallest < t].sum() / ratio.sum()) for t in THRESHOLDS},
            "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - start,
            "load": os.getloadavg()}


if __name__ == "__main__":
    problem, problem3 = _setup()
    draws4, report4 = nuts_draws(problem, jax.random.key(0))
    print(json.dumps(report4), flush=True)
    draws3, report3 = nuts_draws(problem3, jax.random.key(0))
    print(json.dumps(report3), flush=True)
    n = problem.n
    print(json.dumps({"coordinate_gap": [coordinate_gap(p, d[0, :50]) for p, d in
                                         ((problem, draws4), (problem3, draws3))]}), flush=True)
    print(json.dumps(analytic_empty_region(report4["F"], report3["F"], n, 4)), flush=True)
    for eta, b, seed in MIXES:
        print(json.dumps(mixed_importance(problem, problem3, draws4, draws3, eta, b,
                                          jax.random.key(seed))), flush=True)
