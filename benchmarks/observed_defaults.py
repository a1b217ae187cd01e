"""The loss kernel and the BIF with their defaults against their closed forms.

A Gaussian linear regression y = x . w + eps (d = 3, n = 2000, unit noise, x ~ N(0, I)) at its
least-squares fit w*: the local posterior N(w*, Sigma), Sigma = (n beta / n X^T X + gamma I)^-1,
is exactly Gaussian, and the per-example losses l_i(w) = (y_i - x_i . w)^2 / 2 + const have

    Cov(l_i, l_j) = r_i r_j S_ij + S_ij^2 / 2,   S = X Sigma X^T,  r_i = y_i - x_i . w*

(the loss kernel; the BIF of training example i on query q is -Cov(l_i, l_q)). Each run:
`slt.loss_kernel` of five training examples and `slt.bif` of four training examples on three
queries, with every default (sampler "auto": the exact MALA at this n, `RunPlan()`: 4 chains,
adaptive length, gamma = 1, n beta = n / log n), and, for comparison, the loss kernel with 16
chains. Printed per key: the largest |z| = |estimate - exact| / reported standard error over
the entries, the diagonal's relative errors, the run's temperatures and warnings.

    python -m benchmarks.observed_defaults [KEYS...] [--chains=4,16]
        [--sampler=auto|sgld|sghmc|mala|hmc]

`--sampler` runs every estimator with that sampler instead of the default "auto" (which picks
MALA here: `slt.estimators.local.observed.attribution_sampler`): `SGLD()` with its calibrated
step, `SGHMC()`, or the exact, full-batch `slt.samplers.MALA()` or `HMC()`, their step and mass
adapted in the warmup.
"""

from __future__ import annotations

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import slt

N, D = 2000, 3
TRUE_W = np.array([1.0, -0.5, 0.25])
SAMPLERS = {"auto": "auto", "sgld": slt.samplers.SGLD(), "sghmc": slt.samplers.SGHMC(),
            "mala": slt.samplers.MALA(), "hmc": slt.samplers.HMC()}
KERNEL_EXAMPLES = np.array([0, 3, 7, 12, 25])
BIF_TRAIN = np.array([1, 4, 9, 30])


def regression():
    """The problem, w*, the data and the exact posterior covariance Sigma."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D))
    y = x @ TRUE_W + rng.standard_normal(N)
    w_star = np.linalg.lstsq(x, y, rcond=None)[0]

    def nll(params, batch):
        return 0.5 * (batch["y"] - batch["x"] @ params["w"]) ** 2 + 0.5 * jnp.log(2 * jnp.pi)

    problem = slt.Problem.from_loss(nll, {"w": jnp.zeros(D)}, {"x": x, "y": y})
    sigma = np.linalg.inv(1 / np.log(N) * x.T @ x + np.eye(D))  # n beta / n = 1 / log n
    queries = np.random.default_rng(1).standard_normal((3, D))
    query = {"x": queries, "y": queries @ TRUE_W + np.array([2.0, -1.0, 0.0])}
    return problem, {"w": jnp.asarray(w_star)}, x, y - x @ w_star, sigma, query


def kernel(x_a, r_a, x_b, r_b, sigma):
    """Cov(l_i, l_j) under N(w*, Sigma) (module doc)."""
    s = x_a @ sigma @ x_b.T
    return np.outer(r_a, r_b) * s + 0.5 * s**2


def run(keys=(1, 2, 3, 4), chain_counts=(4, 16), sampler="auto") -> None:
    problem, params, x, r, sigma, query = regression()
    exact = kernel(x[KERNEL_EXAMPLES], r[KERNEL_EXAMPLES], x[KERNEL_EXAMPLES],
                   r[KERNEL_EXAMPLES], sigma)
    r_query = query["y"] - query["x"] @ np.asarray(params["w"])
    exact_bif = -kernel(x[BIF_TRAIN], r[BIF_TRAIN], query["x"], r_query, sigma)
    quiet = slt.RunPlan(progress=False)
    upper = np.triu_indices(len(KERNEL_EXAMPLES))  # the 15 distinct entries
    z_values = {}  # (estimator, chains) -> every run's |z| of every distinct entry
    for seed in keys:
        for chains in chain_counts:
            plan = slt.RunPlan(num_chains=chains, progress=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = slt.loss_kernel(problem, params, jax.random.key(seed), KERNEL_EXAMPLES,
                                         plan=plan, sampler=SAMPLERS[sampler])
            z = (result.covariance - exact) / result.covariance_std_error
            z_values.setdefault(("loss kernel", chains), []).append(np.abs(z[upper]))
            print(f"key {seed}, loss kernel, {chains} chains: max |z| {np.abs(z).max():.2f}, "
                  f"diagonal relative error "
                  f"{np.round(np.diag(result.covariance) / np.diag(exact) - 1, 3)}, draws "
                  f"{result.num_samples}, T {result.run.temperature:.3f} ± "
                  f"{result.run.temperature_std_error:.3f}, T_v "
                  f"{result.run.virial_temperature:.3f}, warnings "
                  f"{[w.split(':')[0] for w in result.warnings]}", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            influence = slt.bif(problem, params, jax.random.key(10 + seed), query,
                                train=BIF_TRAIN, plan=quiet,
                                sampler=SAMPLERS[sampler])
        z = (influence.influence - exact_bif) / influence.std_error
        z_values.setdefault(("BIF", 4), []).append(np.abs(z).ravel())
        print(f"key {seed}, BIF, 4 chains: max |z| {np.abs(z).max():.2f}, median relative error "
              f"{np.median(np.abs(influence.influence / exact_bif - 1)):.3f}, draws "
              f"{influence.num_samples}, warnings "
              f"{[w.split(':')[0] for w in influence.warnings]}", flush=True)
    print("\nestimator, chains: runs with an entry beyond 3 se; share of entries beyond 2 and 3 se "
          "(a normal z: 4.6% and 0.27%)")
    for (name, chains), runs in z_values.items():
        entries = np.concatenate(runs)
        print(f"{name}, {chains} chains: {sum(run.max() > 3 for run in runs)} of {len(runs)} "
              f"runs; {np.mean(entries > 2):.1%} and {np.mean(entries > 3):.1%} of "
              f"{entries.size} entries", flush=True)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    options = dict(k[2:].split("=") for k in sys.argv[1:] if k.startswith("--"))
    arguments = [int(k) for k in sys.argv[1:] if not k.startswith("--")]
    counts = tuple(int(c) for c in options.get("chains", "4,16").split(","))
    run(tuple(arguments) or (1, 2, 3, 4), counts, options.get("sampler", "auto"))
