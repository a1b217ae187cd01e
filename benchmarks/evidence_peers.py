"""slt's reference free energies against peer libraries, side by side in one run.

F = -log Z in nats, on the same models with the same priors in every library:

* conjugate linear regression, `models.linear_regression(3, noise_scale=0.5,
  prior_precision=2.0)`, n = 200, w = (1, -0.5, 0), data simulated as in
  `benchmarks.evidence_accuracy`; exact F from `slt.truth.linear_regression_log_evidence`;
* Gaussian mixtures K = 1…4 (`gaussian_mixture(K)`, its default prior) on Old Faithful's
  eruption durations (n = 272); reference F computed outside slt: 429.609, 296.61, 293.38
  (dynesty nested sampling and importance sampling, se < 0.01) and 293.2723 ± 0.0043 (K = 4:
  long importance sampling in float64, `benchmarks.evidence_k4_reference`).

Methods, each with one key per model:

* slt `free_energy(problem, key)`: the fast path (issue 37: NUTS from the MAP optima,
  importance and bridge sampling from two proposals fitted to the draws, the self-check,
  tempered SMC as its fallback);
* slt `free_energy(problem, key, method="smc")`: adaptive tempered SMC with its defaults;
* slt `free_energy(problem, key, method="nested")`: BlackJAX's nested slice sampler as slt
  wraps it, with its defaults;
* BlackJAX `adaptive_tempered_smc` as its examples use it, on slt's flat unconstrained log
  densities (`Problem.loglik` summed, `Problem.log_prior`): target ESS 0.5, systematic
  resampling, `BLACKJAX_MCMC_STEPS` HMC steps of `BLACKJAX_LEAPFROG` leapfrog steps per stage;
  between stages the inverse mass matrix is the particles' variance
  (`blackjax.smc.tuning.from_particles.inverse_mass_matrix_from_particles`) and the step size
  moves towards an acceptance of `BLACKJAX_ACCEPTANCE` (`blackjax.smc.tuning.from_kernel_info.
  update_scale_from_acceptance_rate`). log Z is the sum of `info.log_likelihood_increment`.
  Particles start as slt's exact prior draws (`slt.samplers.tempering.sample_prior`); as many
  particles and copies as slt's SMC (vmapped copies), the standard error their spread;
* dynesty's static `NestedSampler` (nlive 500, multi-ellipsoid bounds, random slice sampling,
  dlogz 0.01) with a NumPy log-likelihood and the prior as a transform of the unit cube, in its
  own venv `benchmarks/.venv-dynesty` (numpy, scipy, dynesty; created on first use) and run
  as a subprocess (`benchmarks/dynesty_runner.py`). Its standard error is dynesty's own
  `logzerr`. Before sampling, its model is checked against slt's: the log-likelihood against
  `Problem.loglik` at prior draws, and its prior (the unit cube's transform) against slt's
  exact prior draws by the KS distance of each parameter's marginal; both are reported.

Times are wall seconds on one machine in one run, compilation included (given apart where it
is known: slt reports its own, BlackJAX's program is compiled ahead of time); CPU seconds say
how many cores a method kept busy (JAX uses all of them, dynesty one). Likelihood evaluations:
full-data log-likelihood evaluations, or gradients of it for the HMC methods (a gradient costs
about twice an evaluation).
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.evidence_fast import REFERENCES as MIXTURE_REFERENCES
from benchmarks.evidence_old_faithful import old_faithful_mixture
from slt import models, truth
from slt.estimators.evidence.free_energy import free_energy
from slt.problem import Problem
from slt.samplers.tempering import Tempering, sample_prior

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv-dynesty"
RUNNER = HERE / "dynesty_runner.py"
# Pinned so that a rebuilt venv runs the same code; dynesty is installed without its
# dependencies because it needs matplotlib only for plots.
PINS = {"numpy": "2.4.6", "scipy": "1.17.1", "dynesty": "3.1.0"}

# slt's defaults, which BlackJAX's SMC gets too: particles per copy and copies.
NUM_PARTICLES = Tempering().num_particles
NUM_COPIES = Tempering().num_copies
SLT_LEAPFROG = Tempering().num_leapfrog
SLT_TARGET_ESS = Tempering().target_ess
BLACKJAX_TARGET_ESS = 0.5  # BlackJAX's examples' choice
BLACKJAX_MCMC_STEPS = 10  # HMC steps per stage (BlackJAX's default num_mcmc_steps)
BLACKJAX_LEAPFROG = 10
BLACKJAX_INITIAL_STEP_SIZE = 0.5  # in units of the particles' standard deviations
BLACKJAX_ACCEPTANCE = 0.65  # the usual HMC target
BLACKJAX_MAX_STAGES = 1000
DYNESTY = {"nlive": 500, "bound": "multi", "sample": "rslice", "dlogz": 0.01}
NUM_CHECK_POINTS = 5  # prior draws at which dynesty's log-likelihood is compared with slt's
# Prior draws of each library whose marginals are compared: at 2000 + 2000 draws the 1% critical
# value of the two-sample KS distance is 1.63 sqrt(2 / 2000) = 0.052.
NUM_PRIOR_DRAWS = 2000
KS_CRITICAL = 1.63 * np.sqrt(2 / NUM_PRIOR_DRAWS)


class Case(NamedTuple):
    """One model: its slt Problem, reference F, and the model as dynesty_runner.py reads it."""

    name: str
    problem: Problem
    reference: float
    job: dict


class Estimate(NamedTuple):
    """One method on one model. evaluations: a count, or None if unknown."""

    free_energy: float
    std_error: float
    wall: float
    compile_time: float | None
    cpu: float
    evaluations: float | None
    note: str = ""


def log(message: str) -> None:
    print(f"evidence_peers: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- models


def _cases(key) -> list[Case]:
    """The regression (data as in evidence_accuracy) and the four Old Faithful mixtures."""
    regression = models.linear_regression(3, noise_scale=0.5, prior_precision=2.0)
    data = regression.simulate(jax.random.split(key, 3)[0], {"w": jnp.array([1.0, -0.5, 0.0])},
                               200)
    x, y = np.asarray(data["x"]), np.asarray(data["y"])
    cases = [Case(
        "linear regression d=3, n=200", regression.problem(data),
        -truth.linear_regression_log_evidence(x, y, 0.5, 2.0),
        {"kind": "linear_regression", "x": x.tolist(), "y": y.tolist(), "noise_scale": 0.5,
         "prior_precision": 2.0},
    )]
    return cases + [mixture_case(k, reference) for k, reference in MIXTURE_REFERENCES.items()]


def mixture_case(k: int, reference: float) -> Case:
    """Old Faithful's `gaussian_mixture(k)` (its default prior) for slt and dynesty_runner."""
    problem = old_faithful_mixture(k)
    data = problem.data
    defaults = inspect.signature(models.gaussian_mixture).parameters
    return Case(
        f"Old Faithful mixture K={k}, n={len(data['y'])}", problem, reference,
        {"kind": "gaussian_mixture", "y": np.asarray(data["y"]).tolist(),
         "num_components": k,
         "weight_concentration": defaults["weight_concentration"].default,
         "mean_prior_scale": defaults["mean_prior_scale"].default},
    )


def _runner_coordinates(case: Case, flat) -> np.ndarray:
    """Flat unconstrained slt parameters as dynesty_runner's parameter vector."""
    values = case.problem.constrain(case.problem.unravel(flat))
    if case.job["kind"] == "linear_regression":
        return np.asarray(values["w"])
    point = np.concatenate([np.asarray(values[name]).ravel()
                            for name in ("weights", "means", "scales")])
    return np.delete(point, case.job["num_components"] - 1)  # the implied last weight


def _ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov–Smirnov distance sup_t |F_a(t) - F_b(t)| of 1-D samples."""
    grid = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / a.size
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.max(np.abs(cdf_a - cdf_b)))


def _check_peer_model(python: Path, case: Case, key) -> tuple[float, float]:
    """dynesty_runner's model against slt's: (largest |log-likelihood difference| in nats at
    `NUM_CHECK_POINTS` prior draws, largest KS distance of a parameter's marginal between
    `NUM_PRIOR_DRAWS` prior draws of each)."""
    flat = np.asarray(sample_prior(case.problem, key, NUM_PRIOR_DRAWS))
    points = np.array([_runner_coordinates(case, row) for row in flat])
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    answer = _run_dynesty(python, case.job | {"check": points[:NUM_CHECK_POINTS].tolist(),
                                              "prior_draws": NUM_PRIOR_DRAWS, "seed": seed})
    expected = [float(jnp.sum(case.problem.loglik(case.problem.unravel(row), case.problem.data)))
                for row in flat[:NUM_CHECK_POINTS]]
    draws = np.array(answer["prior_draws"])
    distance = max(_ks_distance(points[:, i], draws[:, i]) for i in range(points.shape[1]))
    return float(np.max(np.abs(np.array(answer["loglik"]) - expected))), distance


# ----------------------------------------------------------------------------- slt


def _slt(case: Case, key, method: str) -> Estimate:
    """`free_energy` with its defaults; its diagnostic warnings go in the note."""
    cpu, start = _cpu_self(), time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = free_energy(case.problem, key, method=method, progress=False)
    wall, cpu = time.perf_counter() - start, _cpu_self() - cpu
    kinds = {re.sub(r"[0-9][0-9.e+-]*", "#", str(w.message).split(":")[0]) for w in caught}
    note = f"{len(caught)} warning(s): " + "; ".join(sorted(kinds)) if caught else ""
    run = result.run
    if result.draws_run is not None:  # the fast path (and its fallback's, if it ran)
        draws = result.draws_run
        evaluations = (float(np.sum(draws.nuts.sample_stats["n_steps"]))
                       + sum(r.num_samples for r in draws.importance))
        note = (f"path {result.path}, k-hat {draws.pareto_k:.2f}, bridge "
                f"{-draws.bridge_log_evidence:.3f} ± {draws.bridge_std_error:.3f}"
                + (f"; {note}" if note else ""))
        compile_time = draws.nuts.compile_time
        return Estimate(result.free_energy, result.std_error, wall, compile_time, cpu,
                        evaluations, note)
    if method == "nested":
        evaluations = float(np.sum(run.num_likelihood_evaluations))
        note = f"H = {run.information:.1f} nats" + (f"; {note}" if note else "")
    else:
        evaluations = float(np.nansum(run.num_moves)) * SLT_LEAPFROG * NUM_PARTICLES
        note = (f"{np.mean(run.num_stages):.0f} stages, "
                f"{np.nanmean(run.num_moves):.1f} moves per stage" + (f"; {note}" if note else ""))
    return Estimate(result.free_energy, result.std_error, wall, run.compile_time, cpu,
                    evaluations, note)


# ----------------------------------------------------------------------------- BlackJAX


def _blackjax_program(problem: Problem):
    """(data, initial particles (copy, particle, dim), keys (copy,)) -> per-copy
    (log Z, stages, mean HMC acceptance), BlackJAX's adaptive tempered SMC run to beta = 1."""
    import blackjax
    from blackjax.smc import extend_params
    from blackjax.smc.resampling import systematic
    from blackjax.smc.tuning.from_kernel_info import update_scale_from_acceptance_rate
    from blackjax.smc.tuning.from_particles import inverse_mass_matrix_from_particles

    def one_copy(data, positions, key):
        def loglikelihood_fn(flat):
            return jnp.sum(problem.loglik(problem.unravel(flat), data))

        def logprior_fn(flat):
            return problem.log_prior(problem.unravel(flat))

        def stage(carry):
            state, step_size, log_evidence, stages, acceptance, key = carry
            key, step_key = jax.random.split(key)
            parameters = extend_params({
                "step_size": step_size,
                "inverse_mass_matrix": inverse_mass_matrix_from_particles(state.particles),
                "num_integration_steps": BLACKJAX_LEAPFROG,
            })
            smc = blackjax.adaptive_tempered_smc(
                logprior_fn, loglikelihood_fn, blackjax.hmc.build_kernel(), blackjax.hmc.init,
                parameters, systematic, target_ess=BLACKJAX_TARGET_ESS,
                num_mcmc_steps=BLACKJAX_MCMC_STEPS,
            )
            state, info = smc.step(step_key, state)
            rate = jnp.mean(info.update_info.acceptance_rate)
            step_size = update_scale_from_acceptance_rate(
                step_size[None], rate[None], BLACKJAX_ACCEPTANCE)[0]
            return (state, step_size, log_evidence + info.log_likelihood_increment, stages + 1,
                    acceptance + rate, key)

        def going(carry):
            return (carry[0].tempering_param < 1) & (carry[3] < BLACKJAX_MAX_STAGES)

        zero = jnp.zeros((), positions.dtype)
        start = (blackjax.adaptive_tempered_smc.init(positions),
                 jnp.asarray(BLACKJAX_INITIAL_STEP_SIZE, positions.dtype), zero, 0, zero, key)
        state, _, log_evidence, stages, acceptance, _ = jax.lax.while_loop(going, stage, start)
        return log_evidence, stages, acceptance / stages, state.tempering_param

    return jax.jit(jax.vmap(one_copy, in_axes=(None, 0, 0)))


def _blackjax(case: Case, key) -> Estimate:
    """BlackJAX's adaptive tempered SMC (module docstring), compiled ahead of time."""
    problem = case.problem
    cpu, start = _cpu_self(), time.perf_counter()
    prior_key, run_key = jax.random.split(key)
    positions = sample_prior(problem, prior_key, NUM_COPIES * NUM_PARTICLES).reshape(
        NUM_COPIES, NUM_PARTICLES, problem.dim)
    keys = jax.random.split(run_key, NUM_COPIES)
    compiled = _blackjax_program(problem).lower(problem.data, positions, keys).compile()
    compile_time = time.perf_counter() - start
    log_evidence, stages, acceptance, beta = jax.block_until_ready(
        compiled(problem.data, positions, keys))
    wall, cpu = time.perf_counter() - start, _cpu_self() - cpu
    if np.any(np.asarray(beta) < 1):
        raise RuntimeError(f"BlackJAX's SMC did not reach beta = 1 in {BLACKJAX_MAX_STAGES} "
                           f"stages on {case.name}")
    per_copy = -np.asarray(log_evidence)
    gradients = float(np.sum(stages)) * BLACKJAX_MCMC_STEPS * BLACKJAX_LEAPFROG * NUM_PARTICLES
    return Estimate(
        float(per_copy.mean()), float(per_copy.std(ddof=1) / np.sqrt(per_copy.size)), wall,
        compile_time, cpu, gradients,
        f"{np.mean(stages):.0f} stages, acceptance {np.mean(acceptance):.2f}",
    )


# ----------------------------------------------------------------------------- dynesty


def ensure_dynesty_venv() -> Path:
    """The dynesty venv's python, creating `benchmarks/.venv-dynesty` first if needed.

    numpy and scipy, then dynesty without its dependencies (matplotlib is for its plots);
    a stamp file marks a finished install, so a broken one is rebuilt. A `.gitignore` inside
    keeps git from listing it.
    """
    python = VENV / "bin" / "python"
    stamp = VENV / (".installed-" + "-".join(f"{name}{pin}" for name, pin in PINS.items()))
    if stamp.exists() and python.exists():
        return python
    log(f"creating {VENV.relative_to(ROOT)} with {', '.join(PINS)}: about a minute, once")
    _quiet([sys.executable, "-m", "venv", "--clear", str(VENV)])
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _quiet([*pip, f"numpy=={PINS['numpy']}", f"scipy=={PINS['scipy']}"])
    _quiet([*pip, "--no-deps", f"dynesty=={PINS['dynesty']}"])
    _quiet([str(python), "-c", "import dynesty, scipy.special"])
    (VENV / ".gitignore").write_text("*\n")  # as `python -m venv` writes from Python 3.13 on
    stamp.touch()
    return python


def _quiet(command: list[str]) -> None:
    """Run an install step; its output is shown only if it fails."""
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode:
        output = (completed.stdout + completed.stderr)[-3000:]
        raise RuntimeError(f"`{' '.join(command)}` failed:\n{output}")


def _run_dynesty(python: Path, job: dict) -> dict:
    """dynesty_runner.py on one job, single-threaded; its JSON answer."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(job, file)
        file.flush()
        completed = subprocess.run([str(python), str(RUNNER), file.name], capture_output=True,
                                   text=True, env=env)
    if completed.returncode:
        raise RuntimeError(f"dynesty_runner.py failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout)


def _dynesty(python: Path, case: Case, key) -> Estimate:
    """dynesty's static nested sampler (module docstring), seeded from `key`."""
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    cpu, start = _cpu_children(), time.perf_counter()
    answer = _run_dynesty(python, case.job | DYNESTY | {"seed": seed})
    wall, cpu = time.perf_counter() - start, _cpu_children() - cpu
    return Estimate(
        -answer["log_evidence"], answer["std_error"], wall, None, cpu,
        answer["num_likelihood_calls"],
        f"{answer['num_iterations']} iterations; run_nested {answer['wall']:.1f} s",
    )


# ----------------------------------------------------------------------------- report


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one) and its core count."""
    name = platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        name = names[0].strip() if names else name
    return f"{name}, {os.cpu_count()} cores"


def _row(case: Case, method: str, estimate: Estimate) -> str:
    compile_text = "" if estimate.compile_time is None else f" ({estimate.compile_time:.1f})"
    evaluations = "" if estimate.evaluations is None else f"{estimate.evaluations / 1e6:.2f} M"
    return (
        f"| {case.name} | {method} | {estimate.free_energy:.3f} | {estimate.std_error:.2g} | "
        f"{estimate.free_energy - case.reference:+.3f} | "
        f"{abs(estimate.free_energy - case.reference) / estimate.std_error:.1f} | "
        f"{estimate.wall:.1f}{compile_text} | {estimate.cpu:.0f} | {evaluations} | "
        f"{estimate.note} |"
    )


def _takeaways(results: dict[str, list[tuple[Case, Estimate]]]) -> list[str]:
    """Per method and per model, from the measured numbers (no conclusion is written in).
    An estimate is "within" when |F - reference| <= 3 of its own standard errors."""

    def within(case: Case, estimate: Estimate) -> bool:
        return abs(estimate.free_energy - case.reference) <= 3 * estimate.std_error

    lines = []
    for method, entries in results.items():
        errors = [abs(estimate.free_energy - case.reference) for case, estimate in entries]
        lines.append(
            f"- {method}: largest |F - reference| {max(errors):.3f} nats "
            f"({entries[int(np.argmax(errors))][0].name}); |F - reference| <= 3 se on "
            f"{sum(within(*entry) for entry in entries)} of {len(entries)} models; "
            f"{sum(e.wall for _, e in entries):.0f} s wall and "
            f"{sum(e.cpu for _, e in entries):.0f} s CPU over all models."
        )
    for index, (case, _) in enumerate(next(iter(results.values()))):
        estimates = {method: entries[index][1] for method, entries in results.items()}
        error = {method: e.free_energy - case.reference for method, e in estimates.items()}
        closest = min(error, key=lambda m: abs(error[m]))
        line = f"- {case.name}: closest to the reference {closest} ({error[closest]:+.3f})"
        calibrated = [method for method, e in estimates.items() if within(case, e)]
        if calibrated:
            fastest = min(calibrated, key=lambda m: estimates[m].wall)
            line += (f"; the fastest with |F - reference| <= 3 se {fastest} "
                     f"({estimates[fastest].wall:.1f} s, {error[fastest]:+.3f})")
        lines.append(line + ".")
    return lines


def run(key=None) -> str:
    """The Markdown section: every method on every model, measured in this process."""
    key = jax.random.key(0) if key is None else key
    python = ensure_dynesty_venv()
    cases = _cases(key)
    methods = {
        "slt fast path (NUTS draws, checked)": lambda case, k: _slt(case, k, "draws"),
        "slt tempered SMC": lambda case, k: _slt(case, k, "smc"),
        "slt nested (BlackJAX NSS)": lambda case, k: _slt(case, k, "nested"),
        "BlackJAX adaptive tempered SMC": _blackjax,
        "dynesty": lambda case, k: _dynesty(python, case, k),
    }
    results = {method: [] for method in methods}
    rows, checks = [], []
    for index, case in enumerate(cases):
        case_key = jax.random.fold_in(key, index)
        checks.append(_check_peer_model(python, case, case_key))
        for method_index, (method, function) in enumerate(methods.items()):
            log(f"{method} on {case.name}")
            estimate = function(case, jax.random.fold_in(case_key, method_index + 1))
            results[method].append((case, estimate))
            rows.append(_row(case, method, estimate))
    device = jax.devices()[0]
    return "\n".join([
        "## Reference free energies against peer libraries",
        "",
        f"F = -log Z in nats on {_machine()} ({device.platform}, jax {jax.__version__}, "
        f"{cases[0].problem.dtype} for slt and BlackJAX; dynesty "
        f"{PINS['dynesty']} with NumPy {PINS['numpy']}, one thread): every method on the same "
        "machine in one run, one key per model and method, the same model and prior in every "
        "library. References: the exact F for the regression, for the Old Faithful mixtures "
        "K = 1…3 dynesty + importance sampling computed outside slt (se < 0.01), for K = 4 "
        "long importance sampling in float64 outside slt (293.2723 ± 0.0043; "
        "`benchmarks.evidence_k4_reference`). "
        f"slt: `free_energy` with its defaults ({NUM_COPIES} copies × {NUM_PARTICLES} "
        f"particles, target ESS {SLT_TARGET_ESS}, adaptive HMC moves; nested: {NUM_COPIES} "
        f"runs × {NUM_PARTICLES} live points). "
        f"BlackJAX: `adaptive_tempered_smc`, {NUM_COPIES} copies × {NUM_PARTICLES} particles, "
        f"target ESS {BLACKJAX_TARGET_ESS}, {BLACKJAX_MCMC_STEPS} HMC steps × "
        f"{BLACKJAX_LEAPFROG} leapfrog per stage, mass matrix from the particles' variance, "
        f"step size tuned towards acceptance {BLACKJAX_ACCEPTANCE}. dynesty: static "
        f"`NestedSampler`, nlive {DYNESTY['nlive']}, bound \"{DYNESTY['bound']}\", sample "
        f"\"{DYNESTY['sample']}\", dlogz {DYNESTY['dlogz']}; se its `logzerr`. dynesty's model "
        "against slt's: its NumPy log-likelihood agrees with `Problem.loglik` to within "
        f"{max(gap for gap, _ in checks):.1g} nats at {NUM_CHECK_POINTS} prior draws per model; "
        f"between {NUM_PRIOR_DRAWS} prior draws of each, the largest KS distance of a "
        f"parameter's marginal is {max(ks for _, ks in checks):.3f} (1% critical value "
        f"{KS_CRITICAL:.3f}).",
        "",
        "Wall s includes compilation (in brackets where known); CPU s over the same span; "
        "evaluations: full-data log-likelihood calls (dynesty, nested), or gradients of it "
        "(HMC: moves × leapfrog steps × particles). z = |F - reference| / se.",
        "",
        "| model | method | F | se | F - reference | z | wall s (compile) | CPU s | "
        "evaluations | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *_takeaways(results),
        "",
    ])
