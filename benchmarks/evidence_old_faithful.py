"""Both references on the Old Faithful mixtures, five keys each, and the time of `compare`.

Old Faithful eruption durations (n = 272, slt's bundled data), `gaussian_mixture(K)` with its
default prior, K = 1, 2, 3. The references were computed outside slt with the same model and
prior (nested sampling with dynesty, four runs, and importance sampling from a mixture fitted
to its draws, standard error < 0.01; K = 1 by quadrature): F = 429.609, 296.61, 293.38.

Measured: `slt.free_energy` with its defaults (adaptive tempered SMC; for the mixtures K >= 2,
importance sampling from its particles, symmetrised over label orders) for keys 0–4 per K;
`slt.free_energy(method="nested")` (BlackJAX nested slice sampling, defaults) for key 0; and
one `slt.compare` of K = 1…4 with every default criterion (one tempered path per model),
the time the issue's target of 60 s on 2 cores refers to. Times include compilation.
"""

from __future__ import annotations

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import slt
from slt.cli.inputs import bundled_path, load_data, parse_model
from slt.problem import Problem

REFERENCES = {1: 429.609, 2: 296.61, 3: 293.38}
KEYS = range(5)


def old_faithful_mixture(k: int) -> Problem:
    """`gaussian_mixture(k)` on the eruption durations, as `slt compare` builds it."""
    choice = parse_model(f"gaussian_mixture({k})")
    data = load_data(bundled_path("old_faithful.csv"), choice, y_columns="eruptions")
    return choice.problem(data)


def _timed(function, *args, **kwargs):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def _reference_rows():
    """One row per (K, method): estimates over the keys, worst error, coverage, time."""
    for k, reference in REFERENCES.items():
        problem = old_faithful_mixture(k)
        runs = [_timed(slt.free_energy, problem, jax.random.key(seed), progress=False)
                for seed in KEYS]
        methods = "/".join(sorted({r.method for r, _ in runs}))
        yield _row(k, f"`free_energy` defaults ({methods})", [r for r, _ in runs], reference,
                   [s for _, s in runs])
        result, seconds = _timed(slt.free_energy, problem, jax.random.key(0), method="nested",
                                 progress=False)
        yield _row(k, "nested sampling (defaults)", [result], reference, [seconds])


def _row(k, method, results, reference, seconds) -> str:
    estimates = np.array([r.free_energy for r in results])
    errors = np.array([r.std_error for r in results])
    deviation = estimates - reference
    covered = np.sum(np.abs(deviation) <= 2 * errors)
    values = ", ".join(f"{f:.3f} ± {e:.2f}" for f, e in zip(estimates, errors, strict=True))
    return (
        f"| {k} | {method} | {values} | {reference} | {np.max(np.abs(deviation)):.3f} | "
        f"{np.mean(deviation):+.3f} | {covered}/{len(results)} | {np.mean(seconds):.0f} |"
    )


def _compare_time() -> str:
    problems = {f"K={k}": old_faithful_mixture(k) for k in (1, 2, 3, 4)}
    result, seconds = _timed(slt.compare, problems, jax.random.key(0), progress=False)
    table = result.table
    lines = [
        f"`slt.compare` of K = 1…4 (every default criterion, one tempered path per model) took "
        f"**{seconds:.0f} s** (target: 60 s). Reference F in it: "
        + ", ".join(f"{name} {row.free_energy:.3f} ± {row.free_energy_se:.2f}"
                    for name, row in table.iterrows())
        + "; choices: " + ", ".join(f"{c}: {m}" for c, m in result.choices.items()) + ".",
        "",
        "Seconds per step (`ComparisonResult.timings`; the path's compilation, SMC and "
        "importance sampling from its result):",
        "",
        "| model | " + " | ".join(result.timings.columns)
        + " | path: SMC (fast path: NUTS) compile | its run | importance sampling |",
        "|---|" + "---|" * (len(result.timings.columns) + 3),
    ]
    for name, times in result.timings.iterrows():
        path = result.results[name]["free_energy"]
        sampling = path.importance_run.run_time if path.importance_run else float("nan")
        run = path.run.nuts if path.path == "draws" else path.run  # the fast path: NUTS's
        if path.path == "draws":
            sampling = sum(r.run_time for r in path.run.importance)
        lines.append(
            f"| {name} | " + " | ".join(f"{value:.1f}" for value in times)
            + f" | {run.compile_time:.1f} | {run.run_time:.1f} | {sampling:.1f} |"
        )
    return "\n".join(lines)


def _mixture_loglik_by_hand(k: int):
    """A bare-JAX log-likelihood of the same K-component 1-D mixture on unconstrained
    coordinates (softmax weights, log scales): the comparator for the model's own gradient."""
    def loglik(flat, y):
        log_weights = jax.nn.log_softmax(jnp.concatenate([flat[:k - 1], jnp.zeros(1)]))
        means, scales = flat[k - 1:2 * k - 1], jnp.exp(flat[2 * k - 1:])
        z = (y[:, None] - means) / scales
        per_component = log_weights - 0.5 * z * z - jnp.log(scales) - 0.5 * jnp.log(2 * jnp.pi)
        return jnp.sum(jax.nn.logsumexp(per_component, axis=1))

    return loglik


def _seconds_per_call(function, *args, repeats: int = 20) -> float:
    jax.block_until_ready(function(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        out = function(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def gradient_floor(k: int = 4) -> str:
    """What one tempered path of K = k costs on this machine, in likelihood gradients.

    The path's time is (sweeps) x (leapfrog steps + 1) gradients of the whole particle set
    (plus the independence moves' value-only evaluations); one gradient of the particle set
    through the model (`Problem.loglik`, as the SMC's target evaluates it) is timed against a
    hand-written JAX likelihood of the same mixture, so the model path's overhead and the
    hardware's floor are read side by side.
    """
    from slt.samplers.tempering import _tempered_log_target, sample_prior

    problem = old_faithful_mixture(k)
    path, seconds = _timed(slt.free_energy, problem, jax.random.key(0), progress=False)
    run = path.run
    particles = run.particles.shape[0] * run.particles.shape[1]
    points = sample_prior(problem, jax.random.key(1), particles)
    through_model = jax.jit(jax.vmap(jax.value_and_grad(_tempered_log_target(problem),
                                                        has_aux=True), in_axes=(0, None, None)))
    by_hand = jax.jit(jax.vmap(jax.value_and_grad(_mixture_loglik_by_hand(k)), in_axes=(0, None)))
    model_ms = 1e3 * _seconds_per_call(through_model, points, 0.5, problem.data)
    hand_ms = 1e3 * _seconds_per_call(by_hand, points, problem.data["y"])
    sweeps = np.sum(np.max(np.nan_to_num(run.num_moves, nan=0.0), axis=0))
    gradients = sweeps * 11  # 10 leapfrog steps (the default) + the initial gradient
    return (
        f"Gradient floor, K = {k} ({particles} particles, {problem.dim} parameters, n = "
        f"{problem.n}): one gradient of the particle set through the model "
        f"{model_ms:.1f} ms, through a hand-written JAX likelihood {hand_ms:.1f} ms. One "
        f"`free_energy` path (key 0): {sweeps:.0f} sweeps (the slowest copy per stage; the "
        f"copies run side by side), {gradients:.0f} gradients of the particle set = "
        f"{gradients * model_ms / 1e3:.0f} s predicted; SMC run measured {run.run_time:.0f} s "
        f"(compile {run.compile_time:.1f} s; the whole call {seconds:.0f} s)."
    )


def run() -> str:
    rows = [
        "| K | method | F per key (± se) | reference | max abs error | mean error | "
        "within 2 se | time per run (s) |",
        "|---|---|---|---|---|---|---|---|",
        *_reference_rows(),
    ]
    return (
        "## Old Faithful mixtures: both references against the outside references\n\n"
        + __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
        + "\n\n" + "\n".join(rows) + "\n\n" + _compare_time() + "\n\n" + gradient_floor()
        + "\n"
    )


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    print(run())
