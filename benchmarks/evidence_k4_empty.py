"""Does the fast path miss the posterior mass of K = 4's near-empty components?

Old Faithful eruptions (n = 272), `gaussian_mixture(4)` (d = 11), float64. On two clusters a
fourth component can be nearly empty: weight eps near 0, its mean and scale following the prior.
No MAP restart ends there, so the question is whether the fast path's proposals (fitted to NUTS
draws started at the optima, with a defensive component) cover that region. Three measurements:

* **NUTS draws** (the fast path with `NUTS_CHAINS` x `NUTS_DRAWS` draws, no fallback, for
  K = 4 and K = 3): the fraction of draws whose smallest weight is below 0.01, 0.02, 0.05.
* **A proposal that covers the region by construction.** q_mix = (1 - eta) q_fit + eta q_E:
  q_fit the fast path's proposal (fitted to the first half of K = 4's draws), and q_E slt's
  empty-component cover (`slt.samplers.empty_component`: a draw of K = 3's fitted proposal for
  three components, the fourth's weight eps ~ Beta(1, b), its mean and scale from the prior,
  inserted at a uniform label; its density exact, checked in
  tests/samplers/test_empty_component.py), its K = 3 proposal fitted to K = 3's draws.
  Importance sampling from q_mix is unbiased for Z whether or not q_fit covers the region; if
  q_fit missed its mass, F from q_mix would be lower than F from q_fit alone. Also: the share
  of Z that the importance weights put on draws with smallest weight below 0.005, 0.02, 0.05.
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


def analytic_empty_region(free_energy, free_energy_less, n: int, k: int) -> dict:
    """The idealised empty-component region's F (module doc) and its share of Z_K with the
    empty weight below each threshold t: Z_{K-1} K (K - 1) / (n + K - 1) (1 - (1 - t)^(n + K
    - 1)) / Z_K, from F_K and F_{K-1}."""
    log_mass = -free_energy_less + np.log(k * (k - 1) / (n + k - 1))
    return {"empty_region_F": -log_mass, "share_of_Z_weight_below": {
        t: float(np.exp(log_mass + free_energy) * (1 - (1 - t) ** (n + k - 1)))
        for t in THRESHOLDS}}


def mixed_importance(problem, problem3, draws4, draws3, eta, b, key) -> dict:
    """F from q_fit alone and from q_mix (module doc; q_E is slt's
    `slt.samplers.empty_component` cover), and the shares of Z at small weights."""
    from slt.samplers.empty_component import component_structure, fit_cover, reduced_draws_of
    from slt.samplers.importance import (
        _summarise,
        default_components,
        fit_proposal,
        proposal_log_weights,
        sample_proposal,
        with_cover,
    )

    start, cpu = time.perf_counter(), time.process_time()
    fit_key, fit3_key, draw_key = jax.random.split(key, 3)
    half = draws4[:, :draws4.shape[1] // 2].reshape(-1, problem.dim)
    structure = component_structure(problem)
    points3 = reduced_draws_of(problem, structure, problem3, draws3.reshape(-1, problem3.dim))
    q_fit = fit_proposal(problem, fit_key, jax.numpy.asarray(half),
                         default_components(half.shape[0], problem.dim))
    q_mix = with_cover(q_fit, fit_cover(problem, structure, fit3_key, points3,
                                        default_components(points3.shape[0], problem3.dim),
                                        share=eta, concentration=b))
    flat = np.asarray(sample_proposal(draw_key, q_mix, IMPORTANCE_DRAWS, problem))
    from_fit = IMPORTANCE_DRAWS - round(eta * IMPORTANCE_DRAWS)  # q_fit's draws come first
    log_weights = np.asarray(proposal_log_weights(problem, q_mix, flat), np.float64)
    mixed = _summarise(log_weights, 24, 0, 0.0)
    alone = _summarise(np.asarray(proposal_log_weights(problem, q_fit, flat[:from_fit]),
                                  np.float64), 24, 0, 0.0)
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
    print(json.dumps(analytic_empty_region(report4["F"], report3["F"], n, 4)), flush=True)
    for eta, b, seed in MIXES:
        print(json.dumps(mixed_importance(problem, problem3, draws4, draws3, eta, b,
                                          jax.random.key(seed))), flush=True)
