"""sBIC against BIC: how often each picks the true number of components of a 1-D mixture.

Data: n = 300 draws from 1-D Gaussian mixtures with K0 = 1, 2, 3 components, well and poorly
separated, 20 seeds per setting. Models: `slt.models.gaussian_mixture(K)`, K = 1 … 4 (separate
scales, Dirichlet(1) weights, N(0, 10²) means, LogNormal(0, 1) scales), each fitted by MAP
from 16 random starts (Adam then L-BFGS, the optimiser of `slt.fit_map`); ℓ_K is the
log-likelihood at the MAP (the MLE does not exist with separate scales). Criteria: sBIC with
Drton & Plummer's bound for λ_ij (`sbic_gaussian_mixtures`, φ = 1 as the prior's, and the
sBIC R package's default φ = 3/2) and BIC n L_n(ŵ) + (d/2) log n.

`slt.fit_map` compiles one program per Problem, i.e. per data set (about 7 s each on 2 cores,
against 0.1–0.3 s of optimisation): 480 fits would take an hour. The fits here run fit_map's
own optimiser (`slt.fit.map._adam_then_lbfgs`) in one program per K that takes the data as an
argument and runs all seeds and restarts at once; one setting is refitted with `fit_map`
itself, from the same starting points, as a check.
"""

from __future__ import annotations

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from slt import MAPFit, fit_map, models
from slt.estimators.evidence.sbic import sbic_gaussian_mixtures
from slt.fit.map import _adam_then_lbfgs

N = 300
NUM_SEEDS = 20
MAX_COMPONENTS = 4
# fit_map's defaults are 32 restarts, 2000 Adam and 500 L-BFGS steps; half of each keeps the
# whole section to a few minutes, and the check against fit_map below says what it costs.
FIT = {"num_restarts": 16, "adam_steps": 1000, "learning_rate": 0.05, "lbfgs_steps": 250,
       "grad_tol": 1e-8}
INIT_RADIUS = 2.0  # fit_map's default starting box

# (label, K0, weights, means, scales): truths fixed before any run.
SETTINGS = (
    ("K0=1", 1, [1.0], [0.0], [1.0]),
    ("K0=2, separated (means ±2.5, sd 1)", 2, [0.5, 0.5], [-2.5, 2.5], [1.0, 1.0]),
    ("K0=2, overlapping (means ±1.25, sd 1)", 2, [0.5, 0.5], [-1.25, 1.25], [1.0, 1.0]),
    ("K0=2, unequal (0.7 N(0, 1) + 0.3 N(1.5, 0.3²))", 2, [0.7, 0.3], [0.0, 1.5], [1.0, 0.3]),
    ("K0=3, separated (means -5, 0, 5, sd 1)", 3, [1 / 3] * 3, [-5.0, 0.0, 5.0], [1.0] * 3),
    ("K0=3, overlapping (means -2.5, 0, 2.5, sd 0.8, 1, 0.8)", 3, [0.3, 0.4, 0.3],
     [-2.5, 0.0, 2.5], [0.8, 1.0, 0.8]),
)


def _data_sets(key, K0, weights, means, scales) -> np.ndarray:
    """(NUM_SEEDS, N) draws of the mixture, one data set per seed."""
    spec = models.gaussian_mixture(K0)
    values = {"weights": jnp.array(weights), "means": jnp.array(means)[:, None],
              "scales": jnp.array(scales)[:, None]}
    return np.stack([np.asarray(spec.simulate(jax.random.fold_in(key, seed), values, N)["y"])
                     for seed in range(NUM_SEEDS)])


def _fit_program(problem):
    """Jitted MAP fits of many data sets from many starts, the data an argument:
    (starts (s, restarts, dim), data (s, N)) -> (log-likelihoods, log joints) (s, restarts)."""
    def parts(flat, y):
        params = problem.unravel(flat)
        return jnp.sum(problem.loglik(params, {"y": y})), problem.log_prior(params)

    def fit_one(start, y):
        def per_example(flat):
            value = -sum(parts(flat, y)) / N
            return jnp.where(jnp.isfinite(value), value, jnp.inf)

        flat, *_ = _adam_then_lbfgs(per_example, start, FIT["adam_steps"], FIT["learning_rate"],
                                FIT["lbfgs_steps"], FIT["grad_tol"])
        loglik, log_prior = parts(flat, y)
        return loglik, loglik + log_prior

    over_starts = jax.vmap(fit_one, in_axes=(0, None))
    return jax.jit(jax.vmap(over_starts, in_axes=(0, 0)))


def _starts(problem, key):
    """fit_map's starting points for `key`: problem.init on split keys."""
    return jax.vmap(lambda k: problem.ravel(problem.init(k, INIT_RADIUS)))(
        jax.random.split(key, FIT["num_restarts"]))


def _map_logliks(programs, problems, data, keys) -> tuple[np.ndarray, float]:
    """ℓ_K at the best restart (by log joint) per data set and K: (seeds, K); and the share
    of fits whose best log joint was reached by at least two restarts (within 1e-3 nats)."""
    logliks, agreed = np.empty((len(data), MAX_COMPONENTS)), []
    for K in range(1, MAX_COMPONENTS + 1):
        starts = jnp.stack([_starts(problems[K], key) for key in keys])
        loglik, joint = (np.asarray(a) for a in programs[K](starts, jnp.asarray(data)))
        joint = np.where(np.isfinite(joint), joint, -np.inf)
        best = np.argmax(joint, axis=1)
        logliks[:, K - 1] = loglik[np.arange(len(data)), best]
        agreed.extend(np.sum(joint >= joint.max(axis=1, keepdims=True) - 1e-3, axis=1) >= 2)
    return logliks, float(np.mean(agreed))


def _choices(logliks: np.ndarray) -> dict[str, np.ndarray]:
    """Chosen K per data set: sBIC (φ = 1, φ = 3/2) and BIC; and how many data sets had a
    log-likelihood that decreases with K (sBIC's diagnostic)."""
    chosen = {"sbic": [], "sbic_r": [], "bic": [], "decreasing": []}
    for row in logliks:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = sbic_gaussian_mixtures(row, N)
            r_default = sbic_gaussian_mixtures(row, N, weight_concentration=1.5)
        chosen["sbic"].append(int(np.argmin(result.free_energy)) + 1)
        chosen["sbic_r"].append(int(np.argmin(r_default.free_energy)) + 1)
        chosen["bic"].append(int(np.argmin(result.bic)) + 1)
        chosen["decreasing"].append(bool(caught))
    return {name: np.array(values) for name, values in chosen.items()}


def _check_against_fit_map(data, key, mine: np.ndarray) -> float:
    """max |ℓ_K(fit_map) - ℓ_K(here)| over K for one data set, from the same starts."""
    gaps = []
    for K in range(1, MAX_COMPONENTS + 1):
        problem = models.gaussian_mixture(K).problem({"y": jnp.asarray(data)})
        fit = fit_map(problem, key, MAPFit(**FIT, init_radius=INIT_RADIUS))
        gaps.append(abs(fit.loglik - mine[K - 1]))
    return float(max(gaps))


def _histogram(chosen: np.ndarray) -> str:
    return " / ".join(str(int(np.sum(chosen == K))) for K in range(1, MAX_COMPONENTS + 1))


def run(key=None) -> str:
    start = time.perf_counter()
    key = jax.random.key(0) if key is None else key
    template = _data_sets(key, 1, [1.0], [0.0], [1.0])[0]
    problems = {K: models.gaussian_mixture(K).problem({"y": jnp.asarray(template)})
                for K in range(1, MAX_COMPONENTS + 1)}
    programs = {K: _fit_program(problem) for K, problem in problems.items()}
    rows = [
        "| truth | sBIC φ=1 correct | BIC correct | sBIC φ=3/2 correct | K̂ sBIC φ=1 (1/2/3/4) "
        "| K̂ BIC (1/2/3/4) | ℓ decreasing in K | restarts agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    check = None
    for index, (label, K0, weights, means, scales) in enumerate(SETTINGS):
        setting_key = jax.random.fold_in(key, index + 1)
        data = _data_sets(setting_key, K0, weights, means, scales)
        fit_keys = [jax.random.fold_in(setting_key, 1000 + seed) for seed in range(NUM_SEEDS)]
        logliks, agreement = _map_logliks(programs, problems, data, fit_keys)
        chosen = _choices(logliks)
        rows.append(
            f"| {label} | {np.sum(chosen['sbic'] == K0)}/{NUM_SEEDS} | "
            f"{np.sum(chosen['bic'] == K0)}/{NUM_SEEDS} | "
            f"{np.sum(chosen['sbic_r'] == K0)}/{NUM_SEEDS} | {_histogram(chosen['sbic'])} | "
            f"{_histogram(chosen['bic'])} | {int(np.sum(chosen['decreasing']))} | "
            f"{agreement:.0%} |"
        )
        if index == len(SETTINGS) - 1:
            check = _check_against_fit_map(data[0], fit_keys[0], logliks[0])
    elapsed = time.perf_counter() - start
    return (
        "## sBIC against BIC: the number of components of a Gaussian mixture\n\n"
        f"n = {N} draws of a 1-D Gaussian mixture with K0 components, {NUM_SEEDS} seeds per "
        f"truth; `slt.models.gaussian_mixture(K)`, K = 1 … {MAX_COMPONENTS}, fitted by MAP "
        f"({FIT['num_restarts']} starts, {FIT['adam_steps']} Adam + {FIT['lbfgs_steps']} "
        "L-BFGS steps, fit_map's optimiser; the MLE does not exist with separate scales), "
        "ℓ_K the log-likelihood at the MAP. sBIC (Drton & Plummer 2017) with their upper "
        "bound λ_ij = ½ min{3i - 1 + φ(j - i), 2j + i - 1} (`sbic_gaussian_mixtures`; φ = 1 "
        "is the Dirichlet(1) prior of the fits, φ = 3/2 the sBIC R package's default); BIC "
        "n L_n(ŵ) + (d/2) log n with d = 3K - 1. \"correct\": data sets on which the "
        "criterion's lowest free energy is at K0; K̂: how many data sets chose K = 1/2/3/4. "
        "\"ℓ decreasing in K\": data sets where the MAP log-likelihood of some K is below that "
        "of K - 1 (sBIC's warning; the MAP, not the MLE, so small decreases are possible). "
        "\"restarts agree\": share of fits whose best log joint at least two restarts reached "
        f"(within 1e-3 nats). Check: `slt.fit_map` on the first data set of the last truth, "
        f"same starts and steps, gives ℓ_K within {check:.1e} nats of these fits for every K. "
        f"Section run time {elapsed:.0f} s (2 CPU cores; compilation included).\n\n"
        + "\n".join(rows) + "\n"
    )
