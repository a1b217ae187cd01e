"""Influence: `slt.bif` against retraining, against devinterp 2.0.1's `bif`, and its memory.

Issue 20. Three measurements, each in its own child process (`python -m benchmarks.influence
--part ...`): the retraining in float64 (leave-one-out changes of a query's loss are O(1/n)),
the speed and memory in float32, as devinterp runs.

1. Retraining (`--part retraining`, float64). Logistic regression (synthetic, n = 500, d = 10
   with an intercept, no penalty) and a 64-16-10 tanh MLP on scikit-learn's bundled digits
   (n = 1280 training images, cross-entropy, weight decay lambda = 0.03: the trained
   objective is F(w) = L_n(w) + (lambda / 2) ||w||^2, whose minimum w* is then strict; at
   lambda = 0.01 its Hessian's smallest eigenvalue was 8.5e-5 and warm-started retraining
   without a few removals ran away from w*, so leave-one-out was ill-posed). w*: Adam, then
   Newton's method with the exact Hessian until max |grad F| < 1e-12.
   Retraining for real: the objective without the removed examples, with the penalty fixed
   (sum form: sum_{j not in S} l_j(w) + (n lambda / 2) ||w||^2 = n (F(w) - (1/n) sum_{i in S}
   l_i(w))), so removing example i is exactly upweighting it by h = -1/n. Each retrain starts
   at w* (a warm start) and iterates w <- w - H*^{-1} grad F_{-S}(w) (H* the exact Hessian of F
   at w*, Cholesky-factored once) until max |grad F_{-S}| < 1e-10, at most 400 iterations; one
   that does not get there is reported as not converged and left out. Removed: every training
   example (logistic) or 256 random ones (MLP), one at a time; and random groups (5% of the
   logistic data, 16 digits images), the linear datamodelling score's leave-group-out.
   Actual change: l_q(w_{-S}) - l_q(w*) of every query q (50 held-out examples, or 128 test
   images). Predictions, to first order in h = -1/n per removed example:
     * classical influence function: -(1/n) sum_{i in S} IF(z_i, z_q), IF = -grad l_q^T H*^{-1}
       grad l_i, H* the exact Hessian of F (of the mean loss, plus lambda I for the MLP: the
       weight decay is the damping; H* is positive definite, its smallest eigenvalue is
       reported, so no other damping is added);
     * BIF: -(1/n) sum_{i in S} n beta BIF(z_i, z_q) (`BIFResult.influence_function`), at llc's
       default n beta = n / log n and at n beta = n, with the posterior of the model that was
       trained: for the MLP the weight decay enters as the prior exp(-n beta (lambda / 2)
       ||w||^2) (`LocalPosterior(include_prior=True)`), so that the local posterior is
       exp(-n beta F(w) - (gamma / 2) ||w - w*||^2), centred at w*, and n beta BIF tends to
       -grad l_q^T (H* + gamma / (n beta) I)^{-1} grad l_i where the model is regular.
   Scores: Spearman's rank correlation between actual and predicted changes, per query over
   the removals (mean over queries +- its standard error; for groups this is the linear
   datamodelling score), and pooled over all (removal, query) pairs; and the slope of the
   actual on the predicted change (least squares through 0: 1 when the scale is right).

2. Speed (`--part speed`, float32). `slt.bif` on the digits MLP at the same w* against
   devinterp 2.0.1's `bif` (devinterp/slt/bif.py) on the same torch network, data, SGLD step
   size, n beta = n / log n, localization gamma, batch size, chains, burn-in and draws, every
   training example (1280) and every query (128) observed at every draw. devinterp runs in its
   own venv through benchmarks/devinterp_runner.py (its module doc: the conventions), one
   torch thread; slt with vmapped chains, `SGLD(mala_every=0)` (devinterp measures no
   acceptance), timed warm, end to end (validation, losses at w*, sampling with the streaming
   moments, lambda_hat's summary, the covariances). The contenders take turns
   (`benchmarks.timing.interleaved_medians`). Conventions matched: devinterp's influences with
   compute_covariance=True are Cov(l_i, l_q) over all chains' draws stacked (ddof 1), slt's
   `influence` is -Cov(l_i, l_q) over all chains' draws pooled (ddof 1): the same statistic up
   to the sign. Their agreement is the correlation of slt's -influence with devinterp's matrix,
   beside the correlation of two slt runs with different keys (the Monte Carlo floor).

3. Memory (`--part memory`, float32, a fresh process per row). Peak RSS of one `bif` call on the
   digits MLP (VmHWM reset just before it, after a warm-up call that compiles) and XLA's memory
   analysis of the compiled chunk program (`compiled.memory_analysis()`: arguments, outputs,
   temporaries), as the number of draws grows 10x and as n_train x n_query grows 10x; beside
   the size a chains x draws x examples array of the losses would take (what devinterp stores).

`python -m benchmarks.influence` prints the RESULTS.md section; `run()` is what
`python -m benchmarks` calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.llc_speed import (
    DevinterpWorker,
    _cpu_seconds,
    _reset_peak_rss,
    _rss_mb,
    ensure_devinterp_venv,
)

ROOT = Path(__file__).resolve().parent.parent
LOGISTIC = {"n": 500, "dim": 10, "queries": 50, "groups": 100, "group_size": 25}
DIGITS = {"train": 1280, "queries": 128, "hidden": 16, "weight_decay": 3e-2, "loo": 256,
          "groups": 64, "group_size": 16, "adam_steps": 8000}
RETRAIN_TOLERANCE, RETRAIN_ITERATIONS = 1e-10, 400
# BIF runs of the retraining benchmark: step sizes at n beta = n / log n (scaled by
# (n / log n) / n beta at n beta = n, which keeps eps n beta and so the SGLD bias the same)
BIF_ACCURACY = {"logistic": {"num_chains": 8, "num_warmup": 500, "num_samples": 4000, "every": 5,
                             "step_size": 5e-3, "gamma": 1.0, "batch_size": LOGISTIC["n"]},
                "digits": {"num_chains": 8, "num_warmup": 1000, "num_samples": 12000, "every": 5,
                           "step_size": 3e-3, "gamma": 0.1, "batch_size": 128}}
SPEED = {"num_chains": 4, "num_warmup": 200, "num_samples": 1000, "step_size": 3e-3,
         "gamma": 1.0, "batch_size": 64}
SPEED_ROUNDS = 3
MEMORY_ROWS = [(128, 200), (128, 2000), (1280, 200), (1280, 2000), (1280, 8000)]  # (q, draws)
MEMORY_CHUNK = 50  # steps a chunk: both draw counts run several chunks


def log(message: str) -> None:
    print(f"influence: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- models


def logistic_case(seed: int) -> dict:
    """Synthetic logistic regression: x ~ N(0, I) with x_0 = 1, labels from true weights."""
    rng = np.random.default_rng(seed)
    n, dim, queries = LOGISTIC["n"], LOGISTIC["dim"], LOGISTIC["queries"]
    x = rng.standard_normal((n + queries, dim))
    x[:, 0] = 1.0
    y = (rng.random(n + queries) < 1 / (1 + np.exp(-x @ (0.7 * rng.standard_normal(dim)))))
    return {"name": "logistic", "nll": _logistic_nll, "weight_decay": 0.0,
            "template": {"w": np.zeros(dim)},
            "train": {"x": x[:n], "y": y[:n].astype(float)},
            "query": {"x": x[n:], "y": y[n:].astype(float)}}


def _logistic_nll(params, batch):
    import jax

    logits = batch["x"] @ params["w"]
    return jax.nn.softplus(logits) - batch["y"] * logits


def digits_case(seed: int) -> dict:
    """scikit-learn's digits (pixels / 16), a random split: 1280 training images, 128 test
    images as queries; a 64-16-10 tanh MLP in PyTorch's (out, in) layout, as the runner's."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    train, query = order[:DIGITS["train"]], order[DIGITS["train"]:][:DIGITS["queries"]]
    x, y = digits.data / 16.0, digits.target.astype(np.int32)
    hidden, rng = DIGITS["hidden"], np.random.default_rng(seed + 1)
    template = {"V": rng.standard_normal((hidden, 64)) / 8, "b": np.zeros(hidden),
                "U": rng.standard_normal((10, hidden)) / 4, "c": np.zeros(10)}
    return {"name": "digits", "nll": _digits_nll, "weight_decay": DIGITS["weight_decay"],
            "template": template, "train": {"x": x[train], "y": y[train]},
            "query": {"x": x[query], "y": y[query]}}


def _digits_nll(params, batch):
    import jax
    import jax.numpy as jnp

    logits = jnp.tanh(batch["x"] @ params["V"].T + params["b"]) @ params["U"].T + params["c"]
    log_p = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(log_p, batch["y"][:, None].astype(jnp.int32), axis=1)[:, 0]


# ----------------------------------------------------------------------------- retraining


def _objective(case):
    """(F(flat, weights, data), unravel): F = (1/n) sum_j weights_j l_j + (lambda/2) ||w||^2,
    n the full training size (a removed example has weight 0; the penalty stays)."""
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    _, unravel = ravel_pytree({k: jnp.asarray(v) for k, v in case["template"].items()})
    n, decay, nll = len(case["train"]["y"]), case["weight_decay"], case["nll"]

    def objective(flat, weights, data):
        return (jnp.sum(weights * nll(unravel(flat), data)) / n
                + 0.5 * decay * jnp.sum(flat**2))

    return objective, unravel


def _fit(case, objective, data):
    """w* (flat): Adam (the MLP), then Newton with the exact Hessian until max |grad F| <
    1e-12; and the Hessian H* at w*."""
    import jax
    import jax.numpy as jnp
    import optax
    from jax.flatten_util import ravel_pytree

    flat = ravel_pytree({k: jnp.asarray(v) for k, v in case["template"].items()})[0]
    ones = jnp.ones(len(case["train"]["y"]))
    gradient = jax.jit(jax.grad(objective))
    if case["name"] == "digits":
        optimizer = optax.adam(1e-2)

        @jax.jit
        def adam(flat, data):
            def step(state, _):
                flat, opt_state = state
                updates, opt_state = optimizer.update(gradient(flat, ones, data), opt_state)
                return (flat + updates, opt_state), None

            return jax.lax.scan(step, (flat, optimizer.init(flat)), None,
                                length=DIGITS["adam_steps"])[0][0]

        flat = adam(flat, data)
    hessian = jax.jit(jax.hessian(objective))
    for _ in range(30):
        matrix, grad = hessian(flat, ones, data), gradient(flat, ones, data)
        if float(jnp.max(jnp.abs(grad))) < 1e-12:
            break
        flat = flat - jnp.linalg.solve(matrix, grad)
    return flat, matrix, float(jnp.max(jnp.abs(grad)))


def _retrain(objective, query_losses, w_star, factor, masks, data):
    """Retrain from w* without the examples masked out (rows of `masks`, 0 = removed):
    w <- w - H*^{-1} grad F_{-S}(w) to max |grad| < RETRAIN_TOLERANCE. Returns the query
    losses at every retrained w, the iterations and the final max |grad|."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    gradient = jax.grad(objective)

    @jax.jit
    def all_retrains(w_star, factor, masks, data):
        def one(weights):
            def step(carry):
                flat, count, _ = carry
                grad = gradient(flat, weights, data)
                return flat - cho_solve((factor, True), grad), count + 1, jnp.max(jnp.abs(grad))

            flat, count, _ = jax.lax.while_loop(
                lambda carry: (carry[2] > RETRAIN_TOLERANCE) & (carry[1] < RETRAIN_ITERATIONS),
                step, (w_star, 0, jnp.inf))
            return query_losses(flat), count, jnp.max(jnp.abs(gradient(flat, weights, data)))

        return jax.lax.map(one, masks, batch_size=32)

    return [np.asarray(v) for v in all_retrains(w_star, factor, masks, data)]


def _scores(actual, predicted) -> dict:
    """Spearman per query (columns) over the removals (rows), its mean and standard error
    over queries; pooled over all pairs; the slope of actual on predicted through 0."""
    from scipy.stats import spearmanr

    per_query = np.array([spearmanr(actual[:, q], predicted[:, q])[0]
                          for q in range(actual.shape[1])])
    per_query = per_query[np.isfinite(per_query)]
    return {"spearman": float(per_query.mean()),
            "spearman_se": float(per_query.std(ddof=1) / np.sqrt(len(per_query))),
            "pooled": float(spearmanr(actual.ravel(), predicted.ravel())[0]),
            "slope": float(np.sum(actual * predicted) / np.sum(predicted**2))}


def retraining_case(case, seed: int) -> dict:
    """The retraining benchmark on one case (module doc, part 1)."""
    import jax
    import jax.numpy as jnp

    import slt

    start = time.perf_counter()
    objective, unravel = _objective(case)
    data = {k: jnp.asarray(v) for k, v in case["train"].items()}
    query = {k: jnp.asarray(v) for k, v in case["query"].items()}
    n = len(case["train"]["y"])
    w_star, hessian, grad_max = _fit(case, objective, data)
    eigenvalues = np.linalg.eigvalsh(np.asarray(hessian))
    factor = jnp.linalg.cholesky(hessian)
    fit_time = time.perf_counter() - start

    def query_losses(flat):
        return case["nll"](unravel(flat), query)

    rng = np.random.default_rng(seed + 2)
    removed = (np.arange(n) if case["name"] == "logistic"
               else np.sort(rng.choice(n, DIGITS["loo"], replace=False)))
    spec = LOGISTIC if case["name"] == "logistic" else DIGITS
    groups = np.stack([rng.choice(n, spec["group_size"], replace=False)
                       for _ in range(spec["groups"])])
    masks = {"one": np.ones((len(removed), n)), "group": np.ones((len(groups), n))}
    masks["one"][np.arange(len(removed)), removed] = 0.0
    for row, group in enumerate(groups):
        masks["group"][row, group] = 0.0
    base = np.asarray(query_losses(w_star))
    start = time.perf_counter()
    retrained = {kind: _retrain(objective, query_losses, w_star, factor, jnp.asarray(mask),
                                data) for kind, mask in masks.items()}
    retrain_time = time.perf_counter() - start

    # the classical influence function with the exact Hessian H* of F at w*
    def example_gradients(batch):
        def one(x, y):
            return jax.grad(lambda flat: case["nll"](unravel(flat), {"x": x[None],
                                                                     "y": y[None]})[0])(w_star)
        return np.asarray(jax.vmap(one)(batch["x"], batch["y"]))

    train_gradients, query_gradients = example_gradients(data), example_gradients(query)
    solved = np.asarray(jax.scipy.linalg.cho_solve((factor, True), query_gradients.T))
    predictions = {"classical IF (exact Hessian)": -train_gradients @ solved}

    params = unravel(w_star)
    bif_runs = {}
    for label, nbeta in (("n / log n", n / np.log(n)), ("n", float(n))):
        settings = dict(BIF_ACCURACY[case["name"]])
        settings["step_size"] *= (n / np.log(n)) / nbeta
        prior = {}
        if case["weight_decay"]:
            decay = case["weight_decay"]
            prior = {"log_prior": lambda p, nbeta=nbeta, decay=decay: -0.5 * nbeta * decay * sum(
                jnp.sum(v**2) for v in jax.tree.leaves(p))}
        problem = slt.Problem.from_loss(case["nll"], params, case["train"], **prior)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = slt.bif(problem, params, jax.random.key(seed + 3), case["query"],
                             **bif_values({**settings, "nbeta": nbeta},
                                          include_prior=bool(prior)))
        predictions[f"BIF, nβ = {label}"] = result.influence_function()
        bif_runs[label] = {
            "nbeta": nbeta, **settings, "run_time": result.run.run_time,
            "compile_time": result.run.compile_time, "llc": result.run.llc_mean,
            "rhat_max": float(np.nanmax(result.rhat_query)),
            "beyond_2se": float(np.mean(np.abs(result.influence) > 2 * result.std_error)),
            "warnings": list(result.warnings),
            "corr_with_if": float(np.corrcoef(
                result.influence_function().ravel(),
                predictions["classical IF (exact Hessian)"].ravel())[0, 1])}

    rows = {}
    for kind, indices in (("one", removed[:, None]), ("group", groups)):
        changes, iterations, final = retrained[kind]
        # a retrain whose iteration ran away from w* ends at inf / NaN: not converged
        converged = (np.isfinite(final) & (final < RETRAIN_TOLERANCE)
                     & np.isfinite(changes).all(axis=1))
        actual = (changes - base)[converged]
        rows[kind] = {"retrains": len(indices), "converged": int(converged.sum()),
                      "iterations_median": float(np.median(iterations)),
                      "iterations_max": int(iterations.max()),
                      "removed_per_retrain": int(indices.shape[1]),
                      "actual_abs_median": float(np.median(np.abs(actual))),
                      "scores": {}}
        for name, influence in predictions.items():
            predicted = -influence[indices[converged]].sum(axis=1) / n  # h = -1/n each
            rows[kind]["scores"][name] = _scores(actual, predicted)
    return {"name": case["name"], "n": n, "queries": len(case["query"]["y"]),
            "dim": int(w_star.size), "weight_decay": case["weight_decay"],
            "grad_max": grad_max, "hessian_min_eig": float(eigenvalues[0]),
            "hessian_max_eig": float(eigenvalues[-1]), "fit_time": fit_time,
            "retrain_time": retrain_time, "rows": rows, "bif": bif_runs,
            "w_star": {k: np.asarray(v).tolist() for k, v in params.items()}}


def _retraining_main(seed: int) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    out = {}
    for case in (logistic_case(seed), digits_case(seed)):
        log(f"retraining: {case['name']}")
        out[case["name"]] = retraining_case(case, seed)
    print(json.dumps(out))



# ----------------------------------------------------------------------------- speed


def _digits_problem(weights: str, query_indices=None):
    """The digits Problem at the retraining benchmark's w* (float32 unless x64 is on), its
    params, the query set (test images, or training indices) and n beta = n / log n."""
    import jax.numpy as jnp

    import slt

    case = digits_case(0)
    arrays = dict(np.load(weights))
    params = {name: jnp.asarray(arrays[name], jnp.float32) for name in ("V", "b", "U", "c")}
    train = {"x": case["train"]["x"].astype(np.float32), "y": case["train"]["y"]}
    query = {"x": case["query"]["x"].astype(np.float32), "y": case["query"]["y"]}
    problem = slt.Problem.from_loss(_digits_nll, params, train)
    n = len(train["y"])
    return case, problem, params, query if query_indices is None else query_indices, n / np.log(n)


def bif_values(settings: dict, *, include_prior: bool = False) -> dict:
    """`slt.bif`'s posterior, sampler and plan for a dict of run settings (num_chains,
    num_warmup, num_samples, step_size, gamma, nbeta, batch_size, and optionally every and
    chunk_size: the keys the devinterp worker and the report read as well), with
    `SGLD(mala_every=0)` and no progress bar."""
    from slt import LocalPosterior, RunPlan
    from slt.samplers import SGLD

    plan = {name: settings[name] for name in ("num_chains", "num_warmup", "num_samples")}
    if "chunk_size" in settings:
        plan["chunk_size"] = settings["chunk_size"]
    return {
        "posterior": LocalPosterior(gamma=settings["gamma"], nbeta=settings["nbeta"],
                                    include_prior=include_prior),
        "sampler": SGLD(step_size=settings["step_size"], batch_size=settings["batch_size"],
                        mala_every=0),
        "plan": RunPlan(**plan, observe_every=settings.get("every", 1), progress=False),
    }


def _slt_bif(problem, params, key, query, settings, record=None):
    """One `slt.bif` call (`SGLD(mala_every=0)`, no bar); (wall, CPU) appended to `record`."""
    import slt

    values = bif_values(settings)
    cpu, start = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.bif(problem, params, key, query, **values)
    if record is not None:
        record.append((time.perf_counter() - start, _cpu_seconds() - cpu))
    return result


def _speed_main(seed: int, weights: str) -> None:
    """Child process (float32): slt's and devinterp 2.0.1's bif in turns (module doc, part 2)."""
    import jax

    from benchmarks.timing import interleaved_medians

    case, problem, params, query, nbeta = _digits_problem(weights)
    settings = {**SPEED, "nbeta": nbeta}
    for name, size in (("train", DIGITS["train"]), ("query", DIGITS["queries"])):
        if size % SPEED["batch_size"]:
            raise ValueError(f"devinterp observes batch_size x k examples: {name} has {size}")
    folder = Path(tempfile.mkdtemp(prefix="slt-influence-"))
    npz = folder / "digits.npz"
    np.savez(npz, kind=np.array("classifier"), x=case["train"]["x"], y=case["train"]["y"],
             x_query=case["query"]["x"], y_query=case["query"]["y"],
             **{k: v for k, v in np.load(weights).items()})
    worker = DevinterpWorker(ensure_devinterp_venv("2.0.1"), npz, folder)
    key = jax.random.key(seed)
    records = {"slt": [], "devinterp": []}
    replies, results = [], []

    def devinterp():
        replies.append(worker.run({**settings, "bif": True, "seed": seed,
                                   "influence_path": str(folder / "devinterp.npy")}))
        records["devinterp"].append((replies[-1]["wall"], replies[-1]["cpu"]))

    def slt_call():
        results.append(_slt_bif(problem, params, key, query, settings, records["slt"]))
        return results[-1].influence

    try:
        medians = interleaved_medians({"devinterp": devinterp, "slt": slt_call},
                                      repeats=SPEED_ROUNDS)
    finally:
        worker.close()
    other = _slt_bif(problem, params, jax.random.key(seed + 1), query, settings)
    reference = np.load(folder / "devinterp.npy")  # Cov(l_i, l_q), the last call's
    ours, again = -results[-1].influence, -other.influence

    def correlation(a, b):
        return float(np.corrcoef(a.ravel(), b.ravel())[0, 1])

    print(json.dumps({
        "settings": settings, "dim": problem.dim, "info": worker.info,
        "load": os.getloadavg()[0], "medians": medians,
        "wall": {k: float(np.median([w for w, _ in v[1:]])) for k, v in records.items()},
        "cpu": {k: float(np.median([c for _, c in v[1:]])) for k, v in records.items()},
        "compile_time": results[0].run.compile_time,
        "devinterp_peak_added_mb": max(r["peak_rss_mb"] - r["rss_before_mb"] for r in replies),
        "corr_devinterp": correlation(ours, reference), "corr_slt_keys": correlation(ours, again),
        "scale_devinterp": float(np.sum(ours * reference) / np.sum(ours**2)),
        "draws": SPEED["num_chains"] * SPEED["num_samples"],
    }))


# ----------------------------------------------------------------------------- memory


def _memory_main(weights: str, queries: int, draws: int) -> None:
    """Child process (float32): peak RSS of one warm `bif` call with `draws` draws per chain,
    `queries` queries (128 test images or the 1280 training examples), and XLA's memory
    analysis of its chunk program (module doc, part 3)."""
    import jax

    from slt import compile_cache

    _, problem, params, query, nbeta = _digits_problem(
        weights, None if queries == DIGITS["queries"] else np.arange(queries))
    settings = {**SPEED, "nbeta": nbeta, "num_warmup": 0, "chunk_size": MEMORY_CHUNK}
    key = jax.random.key(0)
    _slt_bif(problem, params, key, query, {**settings, "num_samples": 2 * MEMORY_CHUNK})
    baseline, _ = _rss_mb()
    reset = _reset_peak_rss()
    record = []
    _slt_bif(problem, params, key, query, {**settings, "num_samples": draws}, record)
    peak = _rss_mb()[1]
    (program,) = [program for signature, program in compile_cache._PROGRAMS[problem].items()
                  if signature[0] == "chain chunk"]
    analysis = program.memory_analysis()
    print(json.dumps({
        "queries": queries, "train": DIGITS["train"], "draws": draws, "wall": record[0][0],
        "chains": SPEED["num_chains"], "baseline_mb": baseline, "peak_added_mb": peak - baseline,
        "peak_is_run_only": reset,
        **{name: getattr(analysis, f"{name}_size_in_bytes") / 2**20
           for name in ("argument", "output", "temp", "alias")},
    }))


# ----------------------------------------------------------------------------- report


def _child(*arguments: str) -> dict:
    output = subprocess.run([sys.executable, "-m", "benchmarks.influence", *arguments],
                            cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def measure(seed: int = 0) -> dict:
    """Every part, each in its child process; the raw numbers."""
    load = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="slt-influence-"))
    log("retraining (logistic regression, digits MLP), float64")
    retraining = _child("--part", "retraining", "--seed", str(seed))
    weights = folder / "digits_w_star.npz"
    np.savez(weights, **{k: np.asarray(v, np.float32)
                         for k, v in retraining["digits"].pop("w_star").items()})
    retraining["logistic"].pop("w_star")
    log(f"speed: slt and devinterp 2.0.1's bif in turns, {SPEED_ROUNDS} rounds")
    speed = _child("--part", "speed", "--seed", str(seed), "--weights", str(weights))
    log("memory: a fresh process per row")
    memory = [_child("--part", "memory", "--weights", str(weights), "--queries", str(queries),
                     "--draws", str(draws)) for queries, draws in MEMORY_ROWS]
    raw = {"load": (load, os.getloadavg()[0]), "retraining": retraining, "speed": speed,
           "memory": memory}
    (folder / "raw.json").write_text(json.dumps(raw, indent=1))
    log(f"raw measurements in {folder / 'raw.json'}")
    return raw


def _retraining_report(case: dict) -> list[str]:
    title = {"logistic": (f"Logistic regression: n = {case['n']}, d = {case['dim']} (with an "
                          f"intercept), {case['queries']} held-out queries, no penalty"),
             "digits": (f"Digits MLP 64-{DIGITS['hidden']}-10 (tanh): n = {case['n']} training "
                        f"images, d = {case['dim']}, {case['queries']} test images as queries, "
                        f"weight decay λ = {case['weight_decay']}")}[case["name"]]
    lines = [f"### {title}", "",
             f"w*: max |∇F| = {case['grad_max']:.1e}; the exact Hessian H* of F at w* has "
             f"eigenvalues {case['hessian_min_eig']:.2e} … {case['hessian_max_eig']:.2f} "
             f"(positive definite). Fit {case['fit_time']:.0f} s, all retraining "
             f"{case['retrain_time']:.0f} s.", "",
             "| removal | retrains converged | iterations (median, max) | median abs. actual "
             "change | predictor | Spearman per query (mean ± se) | Spearman pooled | slope "
             "actual / predicted |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, row in case["rows"].items():
        what = ("one example" if kind == "one"
                else f"a group of {row['removed_per_retrain']}")
        for index, (name, score) in enumerate(row["scores"].items()):
            lead = (f"{what} | {row['converged']} / {row['retrains']} | "
                    f"{row['iterations_median']:.0f}, {row['iterations_max']} | "
                    f"{row['actual_abs_median']:.2e}") if index == 0 else " | | |"
            lines.append(f"| {lead} | {name} | {score['spearman']:.3f} ± "
                         f"{score['spearman_se']:.3f} | {score['pooled']:.3f} | "
                         f"{score['slope']:.2f} |")
    lines += ["", "| BIF run | nβ | chains × draws (every) | ε | γ | batch | run s | R-hat max "
              "(queries) | pairs beyond 2 se | corr(nβ BIF, IF) | warnings |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, run in case["bif"].items():
        lines.append(f"| nβ = {label} | {run['nbeta']:.1f} | {run['num_chains']} × "
                     f"{run['num_samples']} ({run['every']}) | {run['step_size']:.2g} | "
                     f"{run['gamma']:g} | {run['batch_size']} | {run['run_time']:.1f} | "
                     f"{run['rhat_max']:.3f} | {run['beyond_2se']:.0%} | "
                     f"{run['corr_with_if']:.3f} | {'; '.join(run['warnings']) or '—'} |")
    return [*lines, ""]


def _speed_report(speed: dict) -> list[str]:
    settings, wall, cpu = speed["settings"], speed["wall"], speed["cpu"]
    ratio_wall, ratio_cpu = wall["devinterp"] / wall["slt"], cpu["devinterp"] / cpu["slt"]
    verdict = "met" if ratio_wall >= 5 else "missed"
    info = speed["info"]
    rows = [("devinterp 2.0.1 `bif()` (torch " + info["torch"] + f", {info['threads']} thread,"
             " chains in turn)", "devinterp"), ("slt `bif`, `SGLD(mala_every=0)`", "slt")]
    lines = ["### Speed: `slt.bif` against devinterp 2.0.1's `bif` on the digits MLP", "",
             f"Same torch / JAX network (d = {speed['dim']}) at the w* above, float32, "
             f"{settings['num_chains']} chains × {settings['num_samples']} draws after "
             f"{settings['num_warmup']} burn-in steps, ε = {settings['step_size']:g}, "
             f"γ = {settings['gamma']:g}, nβ = n / log n = {settings['nbeta']:.1f}, batch "
             f"{settings['batch_size']}; every training example ({DIGITS['train']}) and every "
             f"query ({DIGITS['queries']}) observed at every draw. Medians of {SPEED_ROUNDS} "
             "interleaved rounds after one warm-up call each.", "",
             "| sampler | wall s | CPU s | CPU s / wall s | devinterp / this, wall (CPU) |",
             "|---|---|---|---|---|"]
    for label, name in rows:
        lines.append(f"| {label} | {wall[name]:.2f} | {cpu[name]:.2f} | "
                     f"{cpu[name] / wall[name]:.2f} | {wall['devinterp'] / wall[name]:.1f}× "
                     f"({cpu['devinterp'] / cpu[name]:.1f}×) |")
    lines += ["", f"Target ≥ 5× by wall time: **{verdict}** ({ratio_wall:.1f}×; by CPU time "
              f"{ratio_cpu:.1f}×). slt's compile time (first call, not in the medians): "
              f"{speed['compile_time']:.1f} s. Agreement: the correlation over all "
              f"{DIGITS['train']} × {DIGITS['queries']} pairs of slt's −BIF with devinterp's "
              f"covariance is {speed['corr_devinterp']:.3f} (slope {speed['scale_devinterp']:.2f});"
              f" two slt runs with different keys correlate {speed['corr_slt_keys']:.3f} (the "
              "Monte Carlo floor at these draws). devinterp's peak RSS added during a call: "
              f"{speed['devinterp_peak_added_mb']:.0f} MiB.", ""]
    return lines


def _memory_report(memory: list[dict]) -> list[str]:
    lines = ["### Memory of the streaming statistics", "",
             "Digits MLP, float32, 4 chains, one `bif` call per row in a fresh process (after a "
             "warm-up call that compiles; VmHWM reset before the measured call); XLA's memory "
             f"analysis of the compiled chunk program ({MEMORY_CHUNK} steps a chunk); the "
             "next-to-last column is what a chains × draws × examples array of the losses would "
             "take (float32).", "",
             "| n_train × n_query | draws per chain | peak RSS added MiB | chunk program: "
             "arguments / outputs / temporaries MiB | p q × chains × 4 B, MiB | chains × draws × "
             "(p + q) × 4 B, MiB | wall s |", "|---|---|---|---|---|---|---|"]
    for row in memory:
        p, q, chains = row["train"], row["queries"], row["chains"]
        lines.append(
            f"| {p} × {q} | {row['draws']} | {row['peak_added_mb']:.1f} | "
            f"{row['argument']:.1f} / {row['output']:.1f} / {row['temp']:.1f} | "
            f"{p * q * chains * 4 / 2**20:.1f} | "
            f"{chains * row['draws'] * (p + q) * 4 / 2**20:.1f} | {row['wall']:.1f} |")
    return [*lines, ""]


def report(raw: dict) -> str:
    lines = ["## Influence: BIF against retraining, against devinterp 2.0.1, and its memory", "",
             "Issue 20; benchmarks/influence.py (its module doc states every setting). 2 cores "
             f"shared with other jobs: 1-minute load average {raw['load'][0]:.1f} at the start, "
             f"{raw['load'][1]:.1f} at the end.", ""]
    for case in raw["retraining"].values():
        lines += _retraining_report(case)
    lines += _speed_report(raw["speed"])
    lines += _memory_report(raw["memory"])
    return "\n".join(lines)


def run(key=None) -> str:
    """The Markdown section (`python -m benchmarks` calls this)."""
    seed = 0
    if key is not None:
        import jax

        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    return report(measure(seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("retraining", "speed", "memory"))
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--draws", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--report", metavar="RAW_JSON",
                        help="only render the section from a raw.json of an earlier run")
    arguments = parser.parse_args()
    if arguments.part == "retraining":
        _retraining_main(arguments.seed)
    elif arguments.part == "speed":
        _speed_main(arguments.seed, arguments.weights)
    elif arguments.part == "memory":
        _memory_main(arguments.weights, arguments.queries, arguments.draws)
    elif arguments.report:
        print(report(json.loads(Path(arguments.report).read_text())))
    else:
        print(run())


if __name__ == "__main__":
    main()
