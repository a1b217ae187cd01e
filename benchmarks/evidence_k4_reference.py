"""K = 4's outside reference free energy on Old Faithful, by two independent methods.

Old Faithful eruption durations (n = 272), `gaussian_mixture(4)` with its default prior
(d = 11), the model of `benchmarks.evidence_minute`'s K = 4:

* **dynesty** (`benchmarks/dynesty_runner.py`, in its own venv, single-threaded): the static
  nested sampler with `NLIVE` live points, multi-ellipsoid bounds, random slice sampling,
  dlogz 0.01, `NUM_DYNESTY_RUNS` runs with different seeds; its model is first checked against
  slt's (log-likelihood at prior draws, prior marginals by KS distance:
  `benchmarks.evidence_peers`). Nested sampling integrates over prior mass: no posterior draws,
  no proposal, no temperatures.
* **long importance sampling**: `IMPORTANCE_DRAWS` draws of each of two proposals
  (Gaussian mixtures with a defensive component, symmetrised over the 4! label orders) fitted
  to the halves of long NUTS runs (`NUTS_CHAINS` chains × `NUTS_DRAWS` draws, started at the
  distinct MAP optima), float64, and the optimal bridge from the same; no fallback. Unbiased
  for Z given a proposal that covers the posterior (its Pareto k̂ is reported).

Two more from slt itself, both started from the prior: "smc" (`free_energy(...,
method="importance")`: tempered SMC, its TI, and importance sampling from its particles) and
"nested" (BlackJAX nested slice sampling), defaults, float64.

Run: `python -m benchmarks.evidence_k4_reference [dynesty|importance|smc|nested] [--seeds SEED ...]
[--nlive N] [--slices S]` (prints one JSON line per run; each dynesty run takes minutes on
one core). Seeds given pick the dynesty seeds and importance keys; without them, dynesty seeds
0…`NUM_DYNESTY_RUNS` - 1 and `IMPORTANCE_KEYS`. `--nlive` and `--slices` change dynesty's
live points (default `NLIVE`) and its slice updates per new point (default 3 + d = 14): too
few slice updates leave a new point correlated with the live point it started from.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import jax

NLIVE = 1000
NUM_DYNESTY_RUNS = 4
NUTS_CHAINS, NUTS_WARMUP, NUTS_DRAWS = 8, 1000, 5000
IMPORTANCE_DRAWS = 100_000
IMPORTANCE_KEYS = (0, 1)


def dynesty_runs(seeds=range(NUM_DYNESTY_RUNS), nlive=NLIVE, slices=None) -> list[dict]:
    """One dynesty run of K = 4 per seed (`nlive` live points, `slices` slice updates per
    new point, None: dynesty's default), after the model check."""
    from benchmarks import evidence_peers as peers

    python = peers.ensure_dynesty_venv()
    case = peers.mixture_case(4, float("nan"))
    loglik_gap, ks = peers._check_peer_model(python, case, jax.random.key(0))
    print(json.dumps({"check": {"max_loglik_gap": loglik_gap, "max_ks": ks,
                                "ks_critical": peers.KS_CRITICAL}}), flush=True)
    runs = []
    for seed in seeds:
        cpu = peers._cpu_children()
        answer = peers._run_dynesty(python, case.job | peers.DYNESTY
                                    | {"nlive": nlive, "seed": seed, "slices": slices})
        answer |= {"F": -answer["log_evidence"], "seed": seed, "nlive": nlive,
                   "slices": slices, "cpu_s": peers._cpu_children() - cpu,
                   "load": os.getloadavg()}
        print(json.dumps(answer), flush=True)
        runs.append(answer)
    return runs


def importance_runs(keys=IMPORTANCE_KEYS) -> list[dict]:
    """Long importance sampling and bridge (module doc), float64, one run per key."""
    jax.config.update("jax_enable_x64", True)
    import slt
    from benchmarks.evidence_old_faithful import old_faithful_mixture
    from slt.estimators.evidence.draws import draws_free_energy

    problem = old_faithful_mixture(4)
    options = slt.FromDraws(nuts=slt.NUTS(num_chains=NUTS_CHAINS, num_warmup=NUTS_WARMUP,
                                          num_samples=NUTS_DRAWS),
                            num_samples=IMPORTANCE_DRAWS, fallback=None)
    runs = []
    for seed in keys:
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = draws_free_energy(problem, jax.random.key(seed), options)
        answer = {"seed": seed, "F": -run.log_evidence, "se": run.std_error,
                  "per_proposal": [-r.log_evidence for r in run.importance],
                  "per_proposal_se": [r.std_error for r in run.importance],
                  "pareto_k": [r.pareto_k for r in run.importance],
                  "bridge": -run.bridge_log_evidence, "bridge_se": run.bridge_std_error,
                  "failed": run.failed, "dtype": str(problem.dtype),
                  "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                  "load": os.getloadavg()}
        print(json.dumps(answer), flush=True)
        runs.append(answer)
    return runs


def prior_started_runs(method: str, keys=(0,)) -> list[dict]:
    """slt's own methods that start from the prior, float64, with their defaults, one run per
    key: "importance" (tempered SMC; its SMC and TI estimates and importance sampling from its
    final particles) or "nested" (BlackJAX nested slice sampling, the runs merged)."""
    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import slt
    from benchmarks.evidence_old_faithful import old_faithful_mixture

    problem = old_faithful_mixture(4)
    runs = []
    for seed in keys:
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = slt.free_energy(problem, jax.random.key(seed), method=method,
                                     progress=False)
        answer = {"method": method, "seed": seed, "F": result.free_energy,
                  "se": result.std_error, "smc": result.smc, "ti": result.ti,
                  "importance": result.importance, "nested": result.nested,
                  "per_copy": np.asarray(result.per_copy).tolist(),
                  "warnings": [str(w.message)[:200] for w in caught],
                  "dtype": str(problem.dtype), "wall_s": time.perf_counter() - start,
                  "cpu_s": time.process_time() - cpu, "load": os.getloadavg()}
        print(json.dumps(answer), flush=True)
        runs.append(answer)
    return runs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("parts", nargs="*",
                        help="dynesty, importance, smc, nested (default: the first two)")
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--nlive", type=int, default=NLIVE)
    parser.add_argument("--slices", type=int)
    args = parser.parse_args()
    parts = args.parts or ["dynesty", "importance"]
    unknown = set(parts) - {"dynesty", "importance", "smc", "nested"}
    if unknown:
        parser.error(f"unknown part(s) {sorted(unknown)}")
    if "dynesty" in parts:
        dynesty_runs(args.seeds or range(NUM_DYNESTY_RUNS), args.nlive, args.slices)
    if "importance" in parts:
        importance_runs(args.seeds or IMPORTANCE_KEYS)
    for part, method in (("smc", "importance"), ("nested", "nested")):
        if part in parts:
            prior_started_runs(method, args.seeds or (0,))
