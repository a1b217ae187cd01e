"""dynesty's side of the evidence peer benchmark, run in its own venv (numpy, scipy, dynesty).

Started by `benchmarks/evidence_peers.py` as a subprocess:

    benchmarks/.venv-dynesty/bin/python benchmarks/dynesty_runner.py JOB.json

JOB.json describes one model, the same model and prior as slt's, written in dynesty's
coordinates (the unit cube, mapped onto the prior by its inverse CDF):

* "linear_regression": y = X w + eps, eps ~ N(0, noise_scale^2), w ~ N(0, prior_precision^-1 I);
  keys "x" (n, d), "y" (n,), "noise_scale", "prior_precision".
* "gaussian_mixture" (1-D, `slt.models.gaussian_mixture`): p(y | w) = sum_k weights_k
  N(y; means_k, scales_k^2); weights ~ Dirichlet(weight_concentration 1_K) by stick breaking
  (v_k ~ Beta(alpha, (K - 1 - k) alpha), each by its inverse CDF), means_k ~ N(0,
  mean_prior_scale^2), scales_k ~ LogNormal(0, 1); keys "y" (n,), "num_components",
  "weight_concentration", "mean_prior_scale". Unit-cube layout: K - 1 stick fractions, K means,
  K scales (d = 3K - 1, slt's d); the parameters: weights[:K - 1], means, scales.

and the sampler's settings: "nlive", "bound", "sample", "dlogz", "seed", and optionally
"slices" (slice updates per new live point for "slice"/"rslice"; dynesty's default for
"rslice" is 3 + d). A job with "check" (a
list of parameter vectors in the model's own coordinates: w, or weights[:K - 1] ++ means ++
scales) and "prior_draws" (a count) samples nothing: it answers the total log-likelihood at each
vector and that many prior draws (the prior transform of uniform points, seeded by "seed"), for
a comparison with slt's log-likelihood and prior.

It prints one JSON line: log Z and dynesty's own error estimate (`results.logz[-1]`,
`results.logzerr[-1]`), the likelihood calls (`results.ncall` summed), the iterations, the wall
time of `run_nested` and the import time of dynesty. This file only calls dynesty's public API.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from scipy.special import betaincinv, logsumexp, ndtri

LOG_2PI = np.log(2 * np.pi)


def _regression(job):
    """(log-likelihood of w, prior transform of the unit cube, dimension)."""
    x, y = np.asarray(job["x"], float), np.asarray(job["y"], float)
    noise, precision = job["noise_scale"], job["prior_precision"]
    constant = -y.size * (np.log(noise) + 0.5 * LOG_2PI)

    def loglik(w):
        residual = (y - x @ w) / noise
        return constant - 0.5 * residual @ residual

    def prior_transform(u):
        return ndtri(u) / np.sqrt(precision)

    return loglik, prior_transform, x.shape[1]


def _mixture(job):
    """(log-likelihood of weights[:K - 1] ++ means ++ scales, prior transform, dimension).

    dynesty needs as many parameters as unit-cube coordinates, so the last weight is implied:
    weights[K - 1] = 1 - sum(weights[:K - 1]).
    """
    y = np.asarray(job["y"], float)[:, None]
    K, alpha = int(job["num_components"]), float(job["weight_concentration"])
    mean_scale = float(job["mean_prior_scale"])
    # Stick k is Beta(alpha, (K - 1 - k) alpha); betaincinv(a, b, u) is its inverse CDF.
    stick_b = alpha * np.arange(K - 1, 0, -1, dtype=float)

    def loglik(theta):
        free, means, scales = theta[:K - 1], theta[K - 1:2 * K - 1], theta[2 * K - 1:]
        weights = np.append(free, 1.0 - np.sum(free))
        z = (y - means) / scales
        log_components = np.log(weights) - np.log(scales) - 0.5 * (z * z + LOG_2PI)
        return float(np.sum(logsumexp(log_components, axis=1)))

    def prior_transform(u):
        sticks = betaincinv(alpha, stick_b, u[:K - 1])
        remaining = np.concatenate([[1.0], np.cumprod(1.0 - sticks[:-1])])
        means = mean_scale * ndtri(u[K - 1:2 * K - 1])
        scales = np.exp(ndtri(u[2 * K - 1:]))
        return np.concatenate([remaining * sticks, means, scales])

    return loglik, prior_transform, 3 * K - 1


def _model(job):
    """(log-likelihood in model coordinates, prior transform of the unit cube, dimension)."""
    builders = {"linear_regression": _regression, "gaussian_mixture": _mixture}
    if job["kind"] not in builders:
        raise ValueError(f"unknown model kind {job['kind']!r}")
    return builders[job["kind"]](job)


def main() -> None:
    with open(sys.argv[1]) as file:
        job = json.load(file)
    loglik, prior_transform, dim = _model(job)
    if "check" in job:
        uniform = np.random.default_rng(job["seed"]).uniform(size=(job["prior_draws"], dim))
        print(json.dumps({
            "loglik": [loglik(np.asarray(point, float)) for point in job["check"]],
            "prior_draws": [prior_transform(u).tolist() for u in uniform],
        }))
        return
    start = time.perf_counter()
    import dynesty

    import_time = time.perf_counter() - start
    sampler = dynesty.NestedSampler(
        loglik, prior_transform, dim, nlive=job["nlive"], bound=job["bound"],
        sample=job["sample"], slices=job.get("slices"),
        rstate=np.random.default_rng(job["seed"]),
    )
    start = time.perf_counter()
    sampler.run_nested(dlogz=job["dlogz"], print_progress=False)
    wall = time.perf_counter() - start
    results = sampler.results
    print(json.dumps({
        "log_evidence": float(results.logz[-1]), "std_error": float(results.logzerr[-1]),
        "num_likelihood_calls": int(np.sum(results.ncall)), "num_iterations": int(results.niter),
        "wall": wall, "import_time": import_time, "dynesty": dynesty.__version__,
    }))


if __name__ == "__main__":
    main()
