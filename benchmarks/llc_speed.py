"""LLC speed: slt's `llc` against devinterp (PyTorch), 1.3.2 and 2.0.1, and a bare `lax.scan` floor.

Issues 3 and 19. Everything is measured side by side in one run, on the same data (generated
in NumPy from one seed and handed to devinterp as an .npz), at the same SGLD configuration:
step size eps, localization gamma, n beta, batch size, chains and draws; float32 on both sides.

Contenders
  * slt: `slt.estimators.local.llc.llc` with vmapped chains and `SGLD(mala_every=0)` (devinterp
    computes no MALA acceptance by default); timed warm (its chunk program is cached after the
    first call, whose compile time is reported separately), end to end: validation, L_n(w*) on
    the full data, sampling, and the summary (ESS, R-hat). Per step slt does one gradient on the
    minibatch, the SGLD update, and the paired loss L_b(w*): the mean over the minibatch of
    per-example losses at w* computed once before sampling (a gather, no forward pass).
  * devinterp 1.3.2 (`estimate_learning_coeff_with_summary`, its default SGLD, `cores=1`: chains
    one after another in one process, its default; a `torch.utils.data.DataLoader` with
    `shuffle=True` over a `TensorDataset`, the usage of its examples), the last release with
    the v1 API (a model, a DataLoader and an `evaluate` function). init_loss is given (L_n(w*)
    on the full data, as slt uses), so it spends no time on it.
  * devinterp 2.0.1, the current release: `devinterp.slt.llc.llc(model, dataset, observables,
    lr=, n_beta=, localization=, loss_fn=, param_masks=, ...)` (devinterp/slt/llc.py, which
    calls `sample` in devinterp/slt/sampling.py). It takes a HuggingFace `Dataset` with an
    "input_ids" column of integer sequences of one length >= 2 and, for anything but a
    next-token cross-entropy, a `loss_fn(model, input_ids)` returning per-token losses of
    shape (batch, length - 1). A non-language model uses it with each example's row index as
    its "sequence" ([i, i]) and a loss_fn that gathers the example's inputs and targets and
    returns its loss as one token; that is what runs here. Its SGLD (`sgmcmc_sgld`) is the
    same update as 1.3.2's; its chains run one after another on the same minibatches, cycling
    over one shuffle of the data; it computes L_n(w*) itself from `num_init_loss_batches`
    minibatches (set to one pass over the data; see the report) and writes every step's
    per-example losses to a Zarr store; its λ̂ averages every step, burn-in included.
    `param_masks` ({parameter name: boolean mask or None}) restricts the sampled weights.
    Also compared: one layer's λ̂ (slt `LocalPosterior(restrict_to=...)` against
    `param_masks`) on the RRR network, and a 20-checkpoint trajectory of
    benchmarks/llc_trajectory.py's deep linear network (slt `llc_trajectory` against 20
    `llc()` calls in a user loop).
  Each devinterp version lives in its own venv (`benchmarks/.venv-devinterp`,
  `benchmarks/.venv-devinterp2`), created on first use (`ensure_devinterp_venv`), and is
  driven as a long-lived subprocess (`benchmarks/devinterp_runner.py`, which serves both).
  * the floor: SGLD hand-written in bare JAX on the same RRR problem, one jitted `lax.scan` over
    steps of `vmap`ped chains, doing what slt's step does (the step's minibatch indices from
    `slt.samplers.shuffle.epoch_indices`, the keyed permutation slt uses, with the same key,
    epoch and positions; minibatch gather, value-and-grad, SGLD update with the Langevin noise
    of `slt.samplers.noise.standard_normal`, slt's generator, paired loss L_b(w*) gathered from
    the per-example losses at w*, which it computes on all n examples once per call as slt
    does; both losses recorded) and nothing else (no divergence check, no distance, no
    chunking, no host transfers). With the same key it draws the same minibatches and noise as
    slt, so both give the same losses and λ̂ up to float32 rounding (checked, per draw, in every
    run). One informative variant: without the paired loss.

Threads. torch runs with `torch.set_num_threads(SLT_BENCH_TORCH_THREADS)`, 1 by default: on this
shared 2-core machine torch's default of 2 OpenMP threads made a 256x100 @ 100x500 matmul 55x
slower (16 ms against 0.29 ms) whenever another process held a core, which would inflate our
ratio. JAX runs at its defaults; the CPU time / wall time of each contender is reported.

Timing: devinterp and slt alternate for `ROUNDS` rounds (medians; slt runs 3 times a round on
RRR; the trajectory `TRAJECTORY_ROUNDS` rounds); each round also times devinterp 1.3.2's
DataLoader alone and SGLD hand-written in plain torch, to tell where devinterp's time goes.
slt and the floors take turns `FLOOR_REPEATS` times. draws/s = chains x draws / wall seconds.

Memory: host resident set size from /proc/self/status (not tracemalloc, which cannot see XLA's
or torch's native allocations): VmRSS after imports, data and model (baseline), and VmHWM, the
peak, reset to the current RSS just before the run (`clear_refs`), so peak - baseline is what
the run needs. slt's is measured in a fresh process per problem, which also gives the cold
compile time. The whole section runs in a child process (`python -m benchmarks.llc_speed`) so
that it is float32 whatever the caller's x64 setting.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = HERE / "devinterp_runner.py"
TORCH_VERSION = "2.13.0"  # the CPU wheel on this machine's disk; a plain `torch` pulls CUDA
# The last release with the v1 API (model + DataLoader + evaluate) and the current release.
DEVINTERP_VERSIONS = ("1.3.2", "2.0.1")
DEVINTERP_VENVS = {"1.3.2": HERE / ".venv-devinterp", "2.0.1": HERE / ".venv-devinterp2"}
TORCH_THREADS = int(os.environ.get("SLT_BENCH_TORCH_THREADS", "1"))

CHAINS = 4
BATCH = 256
GAMMA = 100.0
ROUNDS = 3
FLOOR_REPEATS = 5
LOADER_BATCHES = 300  # devinterp's DataLoader timed alone, once a round
TORCH_STEPS = 300  # SGLD steps of a hand-written torch loop, timed alone, once a round
RRR = {"M": 5, "N": 5, "H": 3, "r": 1, "n": 20_000, "draws": 2000, "step_size": 1e-5}
MLP = {"inputs": 100, "hidden": 500, "outputs": 100, "n": 20_000, "draws": 400,
       "step_size": 1e-6}
# The trajectory: benchmarks/llc_trajectory.py's network, step size and gamma (llc's default),
# with fewer steps than there (500 + 1000) to keep devinterp's loop near a minute a round.
TRAJECTORY = {"num_chains": CHAINS, "num_warmup": 100, "num_samples": 400, "step_size": 2e-5,
              "gamma": 1.0}
TRAJECTORY_ROUNDS = 2
DEVINTERP_ROWS = {"1.3.2": "devinterp", "2.0.1": "devinterp2"}  # their keys in the medians


def log(message: str) -> None:
    print(f"llc_speed: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- devinterp venv


def ensure_devinterp_venv(version: str = DEVINTERP_VERSIONS[0]) -> Path:
    """The python of the venv for devinterp `version`, creating the venv first if needed.

    `DEVINTERP_VENVS[version]` (benchmarks/.venv-devinterp for 1.3.2, .venv-devinterp2 for
    2.0.1) holds torch==2.13.0 (the CPU wheel on this machine's disk) and devinterp==version
    with its dependencies, installed with a constraint that keeps that torch (2.0.1 also pulls
    HuggingFace `datasets` and `transformers`, xarray and zarr). One to two minutes and 1.2-1.6
    GB the first time; a stamp file marks a finished install, so a broken one is rebuilt.
    """
    venv = DEVINTERP_VENVS[version]
    python = venv / "bin" / "python"
    stamp = venv / f".installed-torch{TORCH_VERSION}-devinterp{version}"
    if stamp.exists() and python.exists():
        return python
    log(f"creating {venv.relative_to(ROOT)} with torch=={TORCH_VERSION} (CPU) and "
        f"devinterp=={version}: one to two minutes and 1.2-1.6 GB, once")
    _quiet([sys.executable, "-m", "venv", "--clear", str(venv)])
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _quiet([*pip, f"torch=={TORCH_VERSION}"])
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder) / "constraints.txt"
        constraints.write_text(f"torch=={TORCH_VERSION}\n")
        _quiet([*pip, "-c", str(constraints), f"devinterp=={version}"])
    check = ("import importlib.metadata, torch, devinterp.slt.sampler; "
             "print(torch.__version__, importlib.metadata.version('devinterp'))")
    installed = subprocess.run([str(python), "-c", check], check=True, capture_output=True,
                               text=True).stdout.split()
    if not installed[0].startswith(TORCH_VERSION) or installed[1] != version:
        raise RuntimeError(f"the devinterp {version} venv got torch {installed[0]} and "
                           f"devinterp {installed[1]}")
    stamp.touch()
    log(f"devinterp {version} venv ready")
    return python


def _quiet(command: list[str]) -> None:
    """Run an install step; its output is shown only if it fails."""
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode:
        output = (completed.stdout + completed.stderr)[-3000:]
        raise RuntimeError(f"`{' '.join(command)}` failed:\n{output}")


class DevinterpWorker:
    """devinterp_runner.py in the devinterp venv, kept alive to take one job per line."""

    def __init__(self, python: Path, npz: Path, folder: Path):
        venv = python.parents[1].name.lstrip(".")  # venv-devinterp, venv-devinterp2
        self._stderr = open(folder / f"{venv}-{npz.stem}.log", "w+")
        env = dict(os.environ, OMP_NUM_THREADS=str(TORCH_THREADS),
                   MKL_NUM_THREADS=str(TORCH_THREADS))
        self._process = subprocess.Popen(
            [str(python), str(RUNNER), str(npz), str(TORCH_THREADS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env=env,
        )
        self.info = self._reply()

    def _reply(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            self._stderr.seek(0)
            tail = self._stderr.read()[-3000:]
            raise RuntimeError(f"devinterp_runner.py stopped:\n{tail}")
        return json.loads(line)

    def run(self, job: dict) -> dict:
        self._process.stdin.write(json.dumps(job) + "\n")
        self._process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=60)
        self._stderr.close()


# ----------------------------------------------------------------------------- data


def make_rrr_data(seed: int) -> dict[str, np.ndarray]:
    """Reduced-rank regression y = B A x + eps, true B A of rank r; w* the exact rank-H MLE.

    The MLE of a rank <= H coefficient matrix under Gaussian noise: least squares C, then C
    projected on the top-H right singular vectors V_H of the fitted values X C^T;
    A = V_H^T C (H x M), B = V_H (N x H).
    """
    rng = np.random.default_rng(seed)
    M, N, H, r, n = (RRR[k] for k in ("M", "N", "H", "r", "n"))
    A0, B0 = rng.normal(size=(H, M)), rng.normal(size=(N, H))
    basis = rng.normal(size=(H, r))
    A0 = basis @ np.linalg.pinv(basis) @ A0
    x = rng.normal(size=(n, M))
    y = x @ (B0 @ A0).T + rng.normal(size=(n, N))
    C = np.linalg.lstsq(x, y, rcond=None)[0].T
    top = np.linalg.svd(x @ C.T, full_matrices=False)[2][:H].T
    f32 = np.float32
    return {"kind": np.array("rrr"), "noise": np.array(1.0), "x": x.astype(f32),
            "y": y.astype(f32), "W1": (top.T @ C).astype(f32), "W2": top.astype(f32)}


def make_mlp_data(seed: int) -> dict[str, np.ndarray]:
    """Teacher data y = U tanh(V x + b) + c + eps; w* is the teacher (not a fitted minimum:
    this case measures speed only)."""
    rng = np.random.default_rng(seed + 1)
    d_in, h, d_out, n = (MLP[k] for k in ("inputs", "hidden", "outputs", "n"))
    V = rng.normal(size=(h, d_in)) / np.sqrt(d_in)
    U = rng.normal(size=(d_out, h)) / np.sqrt(h)
    b, c = 0.1 * rng.normal(size=h), 0.1 * rng.normal(size=d_out)
    x = rng.normal(size=(n, d_in))
    y = np.tanh(x @ V.T + b) @ U.T + c + rng.normal(size=(n, d_out))
    f32 = np.float32
    return {"kind": np.array("mlp"), "noise": np.array(1.0), "x": x.astype(f32),
            "y": y.astype(f32), "V": V.astype(f32), "b": b.astype(f32), "U": U.astype(f32),
            "c": c.astype(f32)}


def slt_problem(arrays: dict[str, np.ndarray]):
    """The slt Problem and w* for the arrays: RRR through slt's NumPyro model, the MLP through
    `Problem.from_loss` with a plain-JAX Gaussian negative log-likelihood."""
    import jax.numpy as jnp

    from slt import Problem, models

    data = {"x": arrays["x"], "y": arrays["y"]}
    if str(arrays["kind"]) == "rrr":
        spec = models.reduced_rank_regression(RRR["M"], RRR["H"], RRR["N"])
        return spec.problem(data), {"W1": jnp.asarray(arrays["W1"]),
                                    "W2": jnp.asarray(arrays["W2"])}
    constant = MLP["outputs"] * 0.5 * np.log(2 * np.pi)  # noise sd 1

    def nll(params, batch):
        hidden = jnp.tanh(batch["x"] @ params["V"].T + params["b"])
        residual = batch["y"] - hidden @ params["U"].T - params["c"]
        return 0.5 * jnp.sum(residual**2, axis=1) + constant

    params = {name: jnp.asarray(arrays[name]) for name in ("V", "b", "U", "c")}
    return Problem.from_loss(nll, params, data), params


def _config(arrays) -> dict:
    spec = RRR if str(arrays["kind"]) == "rrr" else MLP
    n = spec["n"]
    return {"num_chains": CHAINS, "num_samples": spec["draws"], "num_warmup": 0,
            "step_size": spec["step_size"], "gamma": GAMMA, "nbeta": n / np.log(n),
            "batch_size": BATCH}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return tuple(float(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM"))


def _reset_peak_rss() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux `clear_refs` 5); False if refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def slt_values(config: dict, *, mala_every: int = 0, restrict_to=None) -> dict:
    """`slt.llc`'s posterior, sampler and plan for a dict of chain settings (num_chains,
    num_samples, num_warmup, step_size, gamma, nbeta, batch_size: the keys the devinterp
    worker and `bare_sgld` read as well), with SGLD measuring its diagnostics every
    `mala_every` steps (0: never) and no progress bar."""
    from slt import LocalPosterior, RunPlan
    from slt.samplers import SGLD

    return {
        "posterior": LocalPosterior(gamma=config["gamma"], nbeta=config["nbeta"],
                                    restrict_to=restrict_to),
        "sampler": SGLD(step_size=config["step_size"], batch_size=config["batch_size"],
                        mala_every=mala_every),
        "plan": RunPlan(num_chains=config["num_chains"], num_warmup=config["num_warmup"],
                        num_samples=config["num_samples"], progress=False),
    }


def _slt_call(problem, params, key, config, mala_every=0, restrict_to=None):
    """One `llc` call: (wall seconds, CPU seconds, LLCResult)."""
    from slt.estimators.local.llc import llc

    values = slt_values(config, mala_every=mala_every, restrict_to=restrict_to)
    cpu, start = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = llc(problem, params, key, **values)
    return time.perf_counter() - start, _cpu_seconds() - cpu, result


# ----------------------------------------------------------------------------- the floor


def bare_sgld(arrays, *, paired: bool, config: dict | None = None):
    """SGLD on the RRR problem hand-written in bare JAX: one jitted scan of vmapped chains.

    Returns `run(key) -> (loss, center_loss, L_n(w*))` (the losses draws x chains) and the
    compiled function's compile time. Like `llc`, every call makes one pass over all n
    examples at w* (the per-example losses behind L_n(w*) and the paired loss); the data and
    w* are arguments of the compiled function, not constants. Same target, update,
    minibatch scheme (`epoch_indices`, slt's shared keyed permutation: epochs without
    replacement, independent across chains) and randomness layout as slt, without slt's
    bookkeeping; see the module docstring. `config`: llc's chain settings (default: this
    benchmark's, `_config`).
    """
    import jax
    import jax.numpy as jnp

    from slt.precision import at_full_precision
    from slt.samplers.noise import standard_normal
    from slt.samplers.shuffle import epoch_indices

    config = _config(arrays) if config is None else config
    x, y = jnp.asarray(arrays["x"]), jnp.asarray(arrays["y"])
    shapes = [("W1", arrays["W1"].shape), ("W2", arrays["W2"].shape)]
    center = jnp.concatenate([jnp.asarray(arrays[name]).ravel() for name, _ in shapes])
    n, batch = x.shape[0], config["batch_size"]
    steps_per_epoch, steps = n // batch, config["num_samples"] + config["num_warmup"]
    constant = y.shape[1] * 0.5 * np.log(2 * np.pi)
    eps, gamma, nbeta = config["step_size"], config["gamma"], config["nbeta"]
    W1_size = int(np.prod(shapes[0][1]))

    @at_full_precision  # float32 products in full precision on GPUs, as slt's models
    def per_example_nll(flat, xb, yb):
        W1 = flat[:W1_size].reshape(shapes[0][1])
        W2 = flat[W1_size:].reshape(shapes[1][1])
        residual = yb - xb @ W1.T @ W2.T
        return 0.5 * jnp.sum(residual**2, axis=1) + constant

    def run(key, center, x, y):
        # the per-example losses at w*: the one pass over all n examples that a lambda_hat
        # needs (L_n(w*), and the paired minibatch losses), as `llc` makes once per call
        center_losses = per_example_nll(center, x, y)

        def log_target(flat, xb, yb):
            loss = jnp.mean(per_example_nll(flat, xb, yb))
            return -nbeta * loss - 0.5 * gamma * jnp.sum((flat - center) ** 2), loss

        def chain_step(flat, chain_key, step):
            positions = (step % steps_per_epoch) * batch + jnp.arange(batch)
            indices = epoch_indices(jax.random.fold_in(chain_key, 1), step // steps_per_epoch,
                                    positions, n)
            xb, yb = x[indices], y[indices]
            (_, loss), gradient = jax.value_and_grad(log_target, has_aux=True)(flat, xb, yb)
            noise = standard_normal(jax.random.fold_in(chain_key, step), flat.shape, flat.dtype)
            flat = flat + 0.5 * eps * gradient + jnp.sqrt(eps) * noise
            center_loss = jnp.mean(center_losses[indices]) if paired else jnp.zeros_like(loss)
            return flat, (loss, center_loss)

        chain_keys = jax.random.split(key, config["num_chains"])

        def scan_step(flat, step):
            return jax.vmap(chain_step, (0, 0, None))(flat, chain_keys, step)

        positions = jnp.broadcast_to(center, (config["num_chains"], center.size))
        loss, center_loss = jax.lax.scan(scan_step, positions, jnp.arange(steps))[1]
        return loss, center_loss, jnp.mean(center_losses)

    start = time.perf_counter()
    compiled = jax.jit(run).lower(jax.random.key(0), center, x, y).compile()
    compile_time = time.perf_counter() - start
    return (lambda key: compiled(key, center, x, y)), compile_time


# ----------------------------------------------------------------------------- measurements


def _memory_main(npz: str, seed: int) -> None:
    """Child process: peak RSS and cold compile time of one slt `llc` call on the .npz."""
    import jax

    arrays = dict(np.load(npz))
    problem, params = slt_problem(arrays)
    jax.block_until_ready(problem.loss(params))
    baseline, _ = _rss_mb()
    reset = _reset_peak_rss()
    _, _, result = _slt_call(problem, params, jax.random.key(seed), _config(arrays))
    peak = _rss_mb()[1]
    warm_baseline, _ = _rss_mb()
    _reset_peak_rss()
    _slt_call(problem, params, jax.random.key(seed), _config(arrays))
    print(json.dumps({"baseline_rss_mb": baseline, "peak_rss_mb": peak,
                      "warm_baseline_rss_mb": warm_baseline, "warm_peak_rss_mb": _rss_mb()[1],
                      "peak_is_run_only": reset, "compile_time": result.compile_time,
                      "run_time": result.run_time}))


def _slt_memory(npz: Path, seed: int) -> dict:
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.llc_speed", "--memory", str(npz), "--seed", str(seed)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def _side_by_side(arrays, workers, seed, *, slt_repeats=1, with_default_mala=False) -> dict:
    """devinterp and slt in alternation, ROUNDS rounds: medians of (wall, CPU, lambda_hat, ...).

    `workers`: {devinterp version: DevinterpWorker} (empty if devinterp is not available). A
    round is one run of each devinterp version, devinterp 1.3.2's DataLoader and a plain-torch
    SGLD loop timed alone, then `slt_repeats` slt runs (and as many with the default MALA
    measurement).
    """
    import jax

    problem, params = slt_problem(arrays)
    config = _config(arrays)
    key = jax.random.key(seed)
    init_loss = float(problem.loss(params))
    _, _, first = _slt_call(problem, params, key, config)  # compiles
    out = {"dim": problem.dim, "init_loss": init_loss, "config": config,
           "slt_compile": first.compile_time,
           # sd of the per-example loss at w*: what devinterp 2.0.1's L_n(w*) from a subset
           # of the data would be off by (the report's note on its num_init_loss_batches)
           "loss_sd": float(np.std(-np.asarray(problem.loglik(params, problem.data))))}
    if with_default_mala:
        _slt_call(problem, params, key, config, mala_every=10)  # compiles that variant
    rounds = {name: [] for name in ("devinterp", "devinterp2", "loader", "torch", "slt",
                                    "slt_mala")}
    memory = {}  # version: (baseline, peak, added)
    for index in range(ROUNDS):
        job = {**config, "seed": seed + index, "init_loss": init_loss, "cores": 1}
        for version, worker in workers.items():
            reply = worker.run(job)
            name = DEVINTERP_ROWS[version]
            rounds[name].append((reply["wall"], reply["cpu"], reply["llc_mean"]))
            baseline, peak, added = memory.get(version, (reply["rss_before_mb"], 0.0, 0.0))
            memory[version] = (baseline, max(peak, reply["peak_rss_mb"]),
                               max(added, reply["peak_rss_mb"] - reply["rss_before_mb"]))
        if "1.3.2" in workers:
            reply = workers["1.3.2"].run({"loader_batches": LOADER_BATCHES, "batch_size": BATCH,
                                          "seed": seed})
            rounds["loader"].append(reply["loader_seconds_per_batch"])
            reply = workers["1.3.2"].run({**config, "torch_steps": TORCH_STEPS, "seed": seed})
            rounds["torch"].append(reply["torch_seconds_per_step"])
        for _ in range(slt_repeats):
            wall, cpu, result = _slt_call(problem, params, key, config)
            rounds["slt"].append((wall, cpu, result.llc_mean, result.run_time))
            if with_default_mala:
                wall, cpu, result = _slt_call(problem, params, key, config, mala_every=10)
                rounds["slt_mala"].append((wall, cpu, result.llc_mean, result.mala_acceptance))
        devinterp = "".join(f"devinterp {version} {rounds[DEVINTERP_ROWS[version]][-1][0]:.2f} s, "
                            for version in workers)
        log(f"  round {index + 1}/{ROUNDS}: {devinterp}slt {rounds['slt'][-1][0]:.3f} s")
    out["median"] = {name: np.median(np.array(values), axis=0).tolist()
                     for name, values in rounds.items() if values}
    out["devinterp_memory"] = memory
    if "1.3.2" in workers:
        out["loader_seconds_per_batch"] = out["median"].pop("loader")
        out["torch_seconds_per_step"] = out["median"].pop("torch")
    return out


def _restricted(arrays, worker, seed) -> dict:
    """One layer's lambda_hat, slt `LocalPosterior(restrict_to=...)` against devinterp 2.0.1's
    `llc` with `param_masks`, in alternation for ROUNDS rounds: medians of (wall, CPU,
    lambda_hat).

    The RRR network at its MLE w*, the speed rows' settings, the input layer W1 (torch's
    "0.weight") sampled and localized, W2 held at w*; the exact value is
    `truth.dln_layer_rlct` (rank(C) rank(D) / 2, exact at a critical point of L_n such as the
    MLE). W1, not W2: the MLE's W2 has orthonormal columns, so the model restricted to W1 has
    curvature n beta in all of its directions, far above gamma; W1's second and third singular
    values are fitted noise (the truth has rank 1), so along 10 of W2's 15 weights the
    likelihood's curvature is far below gamma, the localizer holds the chains and lambda_hat
    comes out near 5/2, not the 15/2 that counts those directions.
    """
    import jax

    from slt import truth

    problem, params = slt_problem(arrays)
    config = _config(arrays)
    key = jax.random.key(seed)
    mask = {"W1": True, "W2": False}
    _, _, first = _slt_call(problem, params, key, config, restrict_to=mask)  # compiles
    layers = [np.asarray(arrays["W1"]), np.asarray(arrays["W2"])]
    out = {"exact": float(truth.dln_layer_rlct(layers, 0).value), "config": config,
           "slt_compile": first.compile_time, "dim": int(arrays["W1"].size),
           "singular_values": np.linalg.svd(layers[0], compute_uv=False).tolist()}
    rounds = {"devinterp2": [], "slt": []}
    for index in range(ROUNDS):
        reply = worker.run({**config, "seed": seed + index, "restrict_to": ["0.weight"]})
        rounds["devinterp2"].append((reply["wall"], reply["cpu"], reply["llc_mean"]))
        wall, cpu, result = _slt_call(problem, params, key, config, restrict_to=mask)
        rounds["slt"].append((wall, cpu, result.llc_mean))
        out["slt_std_error"] = result.std_error
        log(f"  round {index + 1}/{ROUNDS}: devinterp 2.0.1 {reply['wall']:.2f} s, "
            f"slt {wall:.3f} s")
    out["median"] = {name: np.median(np.array(values), axis=0).tolist()
                     for name, values in rounds.items() if values}
    return out


def _trajectory(seed, python, folder) -> dict:
    """lambda_hat at 20 checkpoints of a deep linear network's training run: slt
    `llc_trajectory` (one compiled program) against devinterp 2.0.1's `llc` in a user loop over
    the checkpoints, alternating for TRAJECTORY_ROUNDS rounds; medians of the wall times.

    The training run of benchmarks/llc_trajectory.py (`training_run`), at TRAJECTORY's chain
    settings; slt warm (its compile time, from a first call, reported apart).
    """
    import jax

    from benchmarks.llc_trajectory import training_run
    from slt import llc_trajectory

    problem, checkpoints = training_run(jax.random.key(seed))
    x, y = (np.asarray(problem.data[name], np.float32) for name in ("x", "y"))
    arrays = {"kind": np.array("dln"), "noise": np.array(1.0), "x": x, "y": y,
              "checkpoints": np.array(len(checkpoints))}
    for name in checkpoints[0]:  # each layer stacked over the checkpoints
        arrays[name] = np.stack([np.asarray(point[name], np.float32) for point in checkpoints])
    npz = folder / "dln.npz"
    np.savez(npz, **arrays)
    settings = {**TRAJECTORY, "batch_size": BATCH, "nbeta": problem.n / np.log(problem.n)}
    values = slt_values(settings)  # mala_every=0, no progress bar

    def run_slt(key):
        cpu, start = _cpu_seconds(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # checkpoints that are no minima are flagged
            result = llc_trajectory(problem, checkpoints, key, **values)
        return time.perf_counter() - start, _cpu_seconds() - cpu, result

    key = jax.random.key(seed)
    _, _, first = run_slt(key)  # compiles
    out = {"dim": problem.dim, "n": problem.n, "count": len(checkpoints),
           "settings": settings, "slt_compile": first.compile_time}
    worker = DevinterpWorker(python, npz, folder)
    try:
        out["info"] = worker.info
        walls = {"devinterp2": [], "slt": []}
        for index in range(TRAJECTORY_ROUNDS):
            wall, cpu, result = run_slt(key)
            walls["slt"].append((wall, cpu))
            reply = worker.run({**settings, "seed": seed + index, "trajectory": True})
            walls["devinterp2"].append((sum(reply["wall"]), sum(reply["cpu"])))
            log(f"  round {index + 1}/{TRAJECTORY_ROUNDS}: devinterp 2.0.1 loop "
                f"{walls['devinterp2'][-1][0]:.1f} s, slt {wall:.2f} s")
        out["devinterp2_llc"] = reply["llc_mean"]
        out["devinterp2_llc_draws"] = reply["llc_mean_draws"]
        # devinterp's cost per call apart from sampling: one call, one draw per chain
        reply = worker.run({**settings, "num_warmup": 0, "num_samples": 1, "seed": seed,
                            "trajectory": True, "checkpoints": 1})
        out["fixed_cost"] = reply["wall"][0]
    finally:
        worker.close()
        npz.unlink()
    out["median"] = {name: np.median(np.array(values), axis=0).tolist()
                     for name, values in walls.items()}
    out["slt_llc"] = result.llc_means.tolist()
    out["slt_std_errors"] = result.std_errors.tolist()
    return out


def _floor(arrays, seed) -> dict:
    """slt against the hand-written floors, in turns, FLOOR_REPEATS times; medians."""
    import jax

    problem, params = slt_problem(arrays)
    config = _config(arrays)
    key = jax.random.key(seed)
    _slt_call(problem, params, key, config)  # compiled already, or compiles here
    variants = {"same": True, "unpaired": False}
    compiled, compile_times = {}, {}
    for name, paired in variants.items():
        compiled[name], compile_times[name] = bare_sgld(arrays, paired=paired)
        jax.block_until_ready(compiled[name](key))
    times = {"slt": [], "slt_run": [], **{name: [] for name in variants}}
    estimates = {}
    for _ in range(FLOOR_REPEATS):
        wall, _, result = _slt_call(problem, params, key, config)
        times["slt"].append(wall)
        times["slt_run"].append(result.run_time)
        estimates["slt"] = result.llc_mean
        for name in variants:
            start = time.perf_counter()
            loss, center_loss, _ = jax.block_until_ready(compiled[name](key))
            times[name].append(time.perf_counter() - start)
            if name == "same":
                estimates["bare"] = float(config["nbeta"] * np.mean(loss - center_loss))
                # per draw: the same minibatches and noise give the same losses, up to rounding
                estimates["max_loss_difference"] = float(max(
                    np.max(np.abs(result.loss_trace - np.asarray(loss).T)),
                    np.max(np.abs(result.center_loss_trace - np.asarray(center_loss).T))))
    return {"median": {name: float(np.median(values)) for name, values in times.items()},
            "compile": compile_times, "estimates": estimates}


# ----------------------------------------------------------------------------- report


def _verdict(value: float, target: float, at_least: bool) -> str:
    met = value >= target if at_least else value <= target
    return "**met**" if met else "**missed**"


def _cpu_fair_verdict(result, target: float) -> str:
    """The verdict by wall time and by CPU time: XLA may spread a step's matmuls over both
    cores while torch runs on the one thread it is given, so a wall-time ratio can hold more
    cores on slt's side; the CPU-time ratio compares the work."""
    median = result["median"]
    wall = median["devinterp"][0] / median["slt"][0]
    cpu = median["devinterp"][1] / median["slt"][1]
    cores = median["slt"][1] / median["slt"][0]
    return (
        f"by wall time {_verdict(wall, target, True)} ({wall:.2f}×, slt using {cores:.1f} cores "
        f"against torch's 1 thread), by CPU time {_verdict(cpu, target, True)} ({cpu:.2f}×)"
    )


def _side_table(result, draws_total, infos) -> list[str]:
    """The speed rows: each devinterp version, slt; each row's time against each devinterp's.

    `infos`: {devinterp version: its runner's info line}.
    """
    median = result["median"]
    references = {version: median[name] for version, name in DEVINTERP_ROWS.items()
                  if name in median}
    rows = ["| sampler | wall s | draws/s | CPU s / wall s | λ̂ | "
            + " | ".join(f"devinterp {version} / this, wall (CPU)" for version in references)
            + " |", "|---|---|---|---|---|" + "---|" * len(references)]
    entries = []
    for version, (wall, cpu, estimate) in references.items():
        info = infos[version]
        call = ("`estimate_learning_coeff_with_summary`" if version == "1.3.2"
                else "`llc()` with a loss_fn")
        entries.append((f"devinterp {version}, {call} (torch {info['torch']}, "
                        f"{info['threads']} thread, chains in turn)", wall, cpu, estimate))
    labels = {"slt": "slt `llc`, `SGLD(mala_every=0)`",
              "slt_mala": "slt `llc`, SGLD's default mala_every=10 (MALA + temperature)"}
    for name, label in labels.items():
        if name in median:
            wall, cpu, estimate, extra = median[name]
            if name == "slt_mala":
                label += f" (MALA acceptance {extra:.2f})"
            entries.append((label, wall, cpu, estimate))
    for label, wall, cpu, estimate in entries:
        ratios = []
        for reference_wall, reference_cpu, _ in references.values():
            ratio = f"{reference_wall / wall:.1f}× ({reference_cpu / cpu:.1f}×)"
            ratios.append(f"**{ratio}**" if label.startswith("slt `llc`, `SGLD(mala_every=0)`")
                          else ratio)
        rows.append(f"| {label} | {wall:.3f} | {draws_total / wall:,.0f} | {cpu / wall:.2f} | "
                    f"{estimate:.4g} | " + " | ".join(ratios) + " |")
    return rows


def measure(seed: int = 0) -> str:
    """Run every measurement and return the Markdown section."""
    import jax

    load_before = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="slt-llc-speed-"))
    datasets = {"rrr": make_rrr_data(seed), "mlp": make_mlp_data(seed)}
    paths = {}
    for name, arrays in datasets.items():
        paths[name] = folder / f"{name}.npz"
        np.savez(paths[name], **arrays)

    pythons, devinterp_errors = {}, {}
    for version in DEVINTERP_VERSIONS:
        try:
            pythons[version] = ensure_devinterp_venv(version)
        except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
            devinterp_errors[version] = f"{type(error).__name__}: {error}"
            log(f"devinterp {version} is not available, measured without it: "
                f"{devinterp_errors[version]}")

    results, workers_info, memory, restricted, trajectory = {}, {}, {}, None, None
    for name in ("rrr", "mlp"):
        log(f"{name}: devinterp and slt side by side, {ROUNDS} rounds")
        workers = {}
        try:
            for version, python in pythons.items():
                workers[version] = DevinterpWorker(python, paths[name], folder)
            workers_info[name] = {version: worker.info for version, worker in workers.items()}
            results[name] = _side_by_side(datasets[name], workers, seed,
                                          slt_repeats=3 if name == "rrr" else 1,
                                          with_default_mala=name == "rrr")
            if name == "rrr" and "2.0.1" in workers:
                log(f"rrr: one layer's lambda_hat, devinterp 2.0.1 and slt, {ROUNDS} rounds")
                restricted = _restricted(datasets[name], workers["2.0.1"], seed)
        finally:
            for worker in workers.values():
                worker.close()
        log(f"{name}: slt memory and cold compile time in a fresh process")
        memory[name] = _slt_memory(paths[name], seed)
    log(f"rrr: slt against the hand-written lax.scan floor, {FLOOR_REPEATS} repeats")
    floor = _floor(datasets["rrr"], seed)
    if "2.0.1" in pythons:
        log(f"dln: a 20-checkpoint trajectory, devinterp 2.0.1's loop and slt, "
            f"{TRAJECTORY_ROUNDS} rounds")
        trajectory = _trajectory(seed, pythons["2.0.1"], folder)
    raw = {"jax": jax.__version__, "load": (load_before, os.getloadavg()[0]),
           "results": results, "devinterp": workers_info, "memory": memory, "floor": floor,
           "restricted": restricted, "trajectory": trajectory,
           "devinterp_errors": devinterp_errors}
    (folder / "raw.json").write_text(json.dumps(raw, indent=1))
    for path in paths.values():
        path.unlink()
    log(f"raw measurements in {folder / 'raw.json'}")
    return _report(raw)


def _subset_error(result, examples: int) -> float:
    """sd of nβ (L_S(w*) − L_n(w*)) for L_S the mean over a random subset of `examples` of
    the n // BATCH * BATCH examples devinterp 2.0.1's chains see: what its default
    num_init_loss_batches puts into λ̂."""
    seen = RRR["n"] // BATCH * BATCH
    return result["config"]["nbeta"] * result["loss_sd"] * np.sqrt(1 / examples - 1 / seen)


def _targets(result, draws_total, target, name) -> list[str]:
    """The speed target against devinterp 1.3.2 (issue 3) and the ratio to 2.0.1."""
    median, lines = result["median"], []
    if "devinterp" in median:
        ratio = median["devinterp"][0] / median["slt"][0]
        step = median["devinterp"][0] / draws_total
        lines.append(
            f"Target ≥ {target}× devinterp 1.3.2: {_cpu_fair_verdict(result, target)}; "
            f"devinterp 1.3.2 takes {1e3 * step:.2f} ms per step, slt "
            f"{1e3 / ratio * step:.3f} ms per chain-step."
        )
    if "devinterp2" in median:
        wall, cpu, _ = median["devinterp2"]
        lines.append(
            f"devinterp 2.0.1 takes {1e3 * wall / draws_total:.2f} ms per step end to end "
            f"({wall:.2f} s a call, L_n(w*) included); slt is {wall / median['slt'][0]:.1f}× "
            f"faster by wall time, {cpu / median['slt'][1]:.1f}× by CPU time."
        )
    if name == "RRR" and lines:
        lines.append("See \"What limits the ratios\" below.")
    return [" ".join(lines), ""] if lines else []


def _restricted_report(restricted) -> list[str]:
    """The section on one layer's λ̂: slt `restrict_to` against devinterp 2.0.1's masks."""
    median, config = restricted["median"], restricted["config"]
    draws_total = CHAINS * config["num_samples"]
    reference_wall, reference_cpu, _ = median["devinterp2"]
    rows = []
    for name, label in (("devinterp2", "devinterp 2.0.1 `llc(param_masks={\"0.weight\": None})`"),
                        ("slt", "slt `llc`, `LocalPosterior(restrict_to={\"W1\": True, "
                                "\"W2\": False})`, `SGLD(mala_every=0)`")):
        wall, cpu, estimate = median[name]
        ratio = f"{reference_wall / wall:.1f}× ({reference_cpu / cpu:.1f}×)"
        rows.append(f"| {label} | {wall:.3f} | {draws_total / wall:,.0f} | {cpu / wall:.2f} | "
                    f"{estimate:.4g} | {f'**{ratio}**' if name == 'slt' else ratio} |")
    exact = restricted["exact"]
    return [
        "### One layer's λ̂: slt `restrict_to` against devinterp 2.0.1's `param_masks`",
        "",
        f"The RRR network above at its MLE, the same settings ({CHAINS} chains × "
        f"{config['num_samples']} draws, ε = {config['step_size']:g}, γ = {GAMMA:g}, nβ = "
        f"{config['nbeta']:.1f}); only the input layer W1 ({restricted['dim']} weights, "
        "torch's `0.weight`) is sampled and localized, W2 stays at w*. devinterp 2.0.1's "
        "`param_masks` is a dict {parameter name: boolean mask, or None for the whole "
        "tensor}, the parameters not named frozen; its `create_param_masks` builds one from "
        "strings such as \"l0h1\" for HuggingFace and TransformerLens transformers only (it "
        "raises for a plain `nn.Module`), so for this network the dict is written by hand. "
        f"Exact λ of the restricted model: rank(C) rank(D) / 2 = {exact:g} "
        "(`truth.dln_layer_rlct`; exact at a critical point of L_n, such as this MLE; the "
        "MLE's W2 has orthonormal columns, so the restricted model has curvature nβ ≫ γ in "
        "all its directions). Not W2: W1's singular values are "
        f"{', '.join(f'{value:.3g}' for value in restricted['singular_values'])}, the last "
        "two fitted noise (the truth has rank 1), so along 10 of W2's 15 weights nβ s² ≪ γ: "
        "the localizer, not the likelihood, holds the chains there and λ̂ of W2 comes out "
        "near 5/2, not the 15/2 that counts those directions (`dln_layer_rlct` with "
        "tol = √(γ / nβ) gives 5/2). The step size biases λ̂ upward, as above. Medians of "
        f"{ROUNDS} alternating rounds.",
        "",
        "| sampler | wall s | draws/s | CPU s / wall s | λ̂ | devinterp 2.0.1 / this, wall "
        "(CPU) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"λ̂ of the layer: slt {median['slt'][2]:.3g} ± {restricted['slt_std_error']:.2g} "
        f"(se), devinterp 2.0.1 {median['devinterp2'][2]:.3g}; exact {exact:g}. slt's "
        f"restricted call compiled in {restricted['slt_compile']:.2f} s (first call, not "
        "counted).",
        "",
    ]


def _trajectory_report(trajectory) -> list[str]:
    """The section on λ̂ along training: `llc_trajectory` against devinterp 2.0.1's loop."""
    median, settings, count = trajectory["median"], trajectory["settings"], trajectory["count"]
    steps = settings["num_warmup"] + settings["num_samples"]
    draws_total = count * CHAINS * settings["num_samples"]
    reference_wall, reference_cpu = median["devinterp2"]
    rows = []
    for name, label in (("devinterp2", f"devinterp 2.0.1, a loop of {count} `llc()` calls"),
                        ("slt", f"slt `llc_trajectory`, {count} checkpoints × {CHAINS} chains "
                                "in one program, `SGLD(mala_every=0)`")):
        wall, cpu = median[name]
        ratio = f"{reference_wall / wall:.1f}× ({reference_cpu / cpu:.1f}×)"
        rows.append(f"| {label} | {wall:.2f} | {wall / count:.3f} | {draws_total / wall:,.0f} | "
                    f"{cpu / wall:.2f} | {f'**{ratio}**' if name == 'slt' else ratio} |")
    slt_llc = np.array(trajectory["slt_llc"])
    draws_only = np.array(trajectory["devinterp2_llc_draws"])
    as_returned = np.array(trajectory["devinterp2_llc"])
    in_se = np.abs(draws_only - slt_llc) / np.array(trajectory["slt_std_errors"])
    table = ["| checkpoint | slt λ̂ ± se | devinterp 2.0.1 λ̂, draws only | devinterp 2.0.1 "
             "`llc_mean` (burn-in included) |", "|---|---|---|---|"]
    for index in range(count):
        se = trajectory["slt_std_errors"][index]
        table.append(f"| {index} | {slt_llc[index]:.4g} ± {se:.2g} | {draws_only[index]:.4g} | "
                     f"{as_returned[index]:.4g} |")
    fixed = trajectory.get("fixed_cost")
    fixed_text = "" if fixed is None else (
        f" devinterp's cost per call apart from sampling, measured with 1 draw per chain on "
        f"the first checkpoint: {fixed:.2f} s of its {reference_wall / count:.2f} s (L_n(w*) "
        f"from {trajectory['n'] // BATCH} minibatches per chain through the HuggingFace "
        "dataset, the Zarr store, and a `gc.collect()` before and after every chain)."
    )
    return [
        "### λ̂ along training: slt `llc_trajectory` against devinterp 2.0.1 in a user loop",
        "",
        "The deep linear network of \"LLC along training\" (benchmarks/llc_trajectory.py: "
        f"8-16-16-8, d = {trajectory['dim']}, n = {trajectory['n']:,}, {count} checkpoints of "
        "gradient descent from a small initialisation); a training run to take checkpoints "
        "from, which the speed rows' networks (one w* each) do not have. Both sides: "
        f"{CHAINS} chains × ({settings['num_warmup']} warmup + {settings['num_samples']} "
        f"draws) per checkpoint (that section runs 500 + 1000; fewer here to keep devinterp's "
        f"loop near a minute), ε = {settings['step_size']:g}, γ = {settings['gamma']:g} "
        f"(llc's default), nβ = {settings['nbeta']:.1f}, batch {BATCH}. slt: one "
        "`llc_trajectory` call, warm (compiled once for all checkpoints in "
        f"{trajectory['slt_compile']:.2f} s by a first call, not counted); devinterp 2.0.1: "
        "`for model in checkpoints: llc(model, ...)` as above, wall = the sum of its calls. "
        f"Medians of {TRAJECTORY_ROUNDS} alternating rounds; draws/s counts kept draws over "
        f"all checkpoints (each chain takes {steps} steps).",
        "",
        "| computation | wall s | s per checkpoint | draws/s | CPU s / wall s | devinterp "
        "2.0.1 / this, wall (CPU) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "λ̂ per checkpoint (last round). The checkpoints lie on the way down, not at minima: "
        f"at γ = {settings['gamma']:g} the chains keep descending from them, so λ̂ (the mean "
        "loss rise times nβ) is negative where the loss still falls, and both sides compute "
        "that same quantity at each. devinterp 2.0.1's `llc_mean` averages every "
        "step, burn-in included (`compute_llc`), so it differs from slt's, which drops the "
        "warmup; the same average over its draws alone (from the `loss_trace` it returns) is "
        "the like-for-like number: it differs from slt's by "
        f"{np.median(in_se):.1f} of slt's standard errors at the median checkpoint, "
        f"{np.max(in_se):.1f} at most (devinterp's own error comes on top: its chains share "
        f"their minibatches, so their spread does not measure it).{fixed_text}",
        "",
        *table,
        "",
    ]


def _report(raw: dict) -> str:
    """The Markdown section from the raw measurements of `measure`."""
    from slt import truth

    results, workers_info, memory = raw["results"], raw["devinterp"], raw["memory"]
    floor, devinterp_errors = raw["floor"], raw["devinterp_errors"]
    rrr, mlp = results["rrr"], results["mlp"]
    infos = workers_info.get("rrr", {})
    lines = ["## LLC speed: slt against devinterp 1.3.2 and 2.0.1, and against a bare "
             "`lax.scan` loop", ""]
    setup = (
        f"CPU, float32 on both sides, JAX {raw['jax']} at its defaults. Same data (one "
        "NumPy seed, handed to devinterp as an .npz), same step size ε, γ, nβ = n / log n, "
        f"batch {BATCH}, {CHAINS} chains, no warmup. slt: `llc` with vmapped chains, timed "
        "warm (compile time below), end to end (validation, L_n(w*) on the full data, "
        "sampling, ESS / R-hat summary); per step one gradient, the SGLD update and the paired "
        "loss L_b(w*), gathered from per-example losses at w* computed once (no forward pass). "
        "slt's default run also measures every 10 steps the MALA acceptance and the "
        "configurational temperature (one gradient and one forward-over-reverse "
        "Hessian-vector product); the speed rows use `SGLD(mala_every=0)`, as devinterp "
        "computes neither. "
    )
    if "1.3.2" in infos:
        setup += (
            "devinterp 1.3.2 (the last release with the v1 API): "
            "`estimate_learning_coeff_with_summary`, its default SGLD, `cores=1` (its "
            "default: chains one after another in one process), a "
            f"`DataLoader(TensorDataset(x, y), batch_size={BATCH}, shuffle=True)`, given "
            "L_n(w*) on the full data as `init_loss`. "
        )
    if "2.0.1" in infos:
        setup += (
            "devinterp 2.0.1 (the current release): `devinterp.slt.llc.llc(model, dataset, "
            "observables={}, lr=ε, n_beta=nβ, localization=γ, loss_fn=..., num_chains, "
            f"num_draws, batch_size={BATCH}, num_init_loss_batches=n // {BATCH}, "
            "output_path=...)`, its default SGLD (`sgmcmc_sgld`, the same update) and its "
            "other defaults: chains one after another, every chain on the same minibatches "
            "(`match_sampling_input_ids_across_chains=True`) in one fixed order (it cycles over "
            "a single shuffle of the data, dropping the last incomplete batch). 2.0.1 takes a "
            "HuggingFace `Dataset` with an \"input_ids\" column of integer sequences (length "
            "≥ 2) and a `loss_fn(model, input_ids)` returning per-token losses (batch, "
            "length − 1): for these regressions each example's sequence is [i, i], its row "
            "index, and the loss_fn gathers x_i, y_i and returns the example's loss as one "
            "token. It computes L_n(w*) itself (there is no `init_loss` argument), from "
            "`num_init_loss_batches` minibatches; set here to one pass over the batches its "
            "chains see (its default, 32 batches = "
            f"{32 * BATCH:,} examples, would put L_n(w*) off by a subset's error: nβ × the "
            "loss sd × √(1/8192 − 1/n) ≈ "
            + (f"±{_subset_error(rrr, 32 * BATCH):.0f} in λ̂ on the RRR below). "
               if "loss_sd" in rrr else "a large amount in λ̂). ")
            + "It writes each step's per-example losses to a Zarr store (here a temporary "
            "folder, deleted after each call outside the timing); `observables={}` adds no "
            "other losses (its README's `{\"train\": dataset}` would add 3 batches' forward "
            "passes per draw). "
        )
    if infos:
        info = next(iter(infos.values()))
        setup += (
            f"torch {info['torch']} with `torch.set_num_threads({info['threads']})` "
            "(`SLT_BENCH_TORCH_THREADS`; torch's default of 2 OpenMP threads slows ~50× on "
            "this shared 2-core machine whenever another process holds a core). "
        )
    for version, error in devinterp_errors.items():
        setup += f"devinterp {version} could not be installed, so it is missing below ({error}). "
    setup += (
        f"Wall times are medians of {ROUNDS} rounds in which the contenders alternate (slt "
        "runs 3 times a round on RRR); "
        "draws/s = chains × draws / wall seconds. λ̂ is shown to check that all compute the "
        "same thing (devinterp's estimators are unpaired, slt's paired, so their noise "
        f"differs). {os.cpu_count()} cores; 1-minute load average {raw['load'][0]:.1f} at the "
        f"start, {raw['load'][1]:.1f} at the end (this benchmark accounts for about 1; above "
        "that other processes compete, CPU s / wall s falls below 1 and the ratio by CPU time "
        "is the steadier one)."
    )
    lines += [setup, ""]

    # reduced-rank regression
    config = rrr["config"]
    draws_total = CHAINS * config["num_samples"]
    rlct = truth.rrr_rlct(RRR["M"], RRR["N"], RRR["H"], RRR["r"])
    lines += [
        f"### Reduced-rank regression (M, N, H, r) = ({RRR['M']}, {RRR['N']}, {RRR['H']}, "
        f"{RRR['r']}), d = {rrr['dim']}",
        "",
        f"n = {RRR['n']:,}, {CHAINS} chains × {config['num_samples']} draws, ε = "
        f"{config['step_size']:g}, γ = {GAMMA:g}, nβ = {config['nbeta']:.1f}; w* is the exact "
        f"rank-{RRR['H']} MLE (true λ = {rlct.as_float:g}; the step size biases λ̂ upward).",
        "",
        *_side_table(rrr, draws_total, infos),
        "",
        *_targets(rrr, draws_total, 30, "RRR"),
    ]

    # two-layer MLP
    config = mlp["config"]
    draws_total = CHAINS * config["num_samples"]
    lines += [
        f"### Two-layer tanh network {MLP['inputs']}-{MLP['hidden']}-{MLP['outputs']}, "
        f"d = {mlp['dim']:,}",
        "",
        f"n = {MLP['n']:,}, Gaussian loss, {CHAINS} chains × {config['num_samples']} draws, "
        f"ε = {config['step_size']:g}, γ = {GAMMA:g}, nβ = {config['nbeta']:.1f}; slt through "
        "`Problem.from_loss` with a plain-JAX loss, devinterp with the same `torch.nn` network. "
        "w* is the teacher, not a fitted minimum: this case measures speed only.",
        "",
        *_side_table(mlp, draws_total, workers_info.get("mlp", infos)),
        "",
        *_targets(mlp, draws_total, 3, "MLP"),
    ]
    if raw.get("restricted"):
        lines += _restricted_report(raw["restricted"])
    if raw.get("trajectory"):
        lines += _trajectory_report(raw["trajectory"])

    # the floor
    median, draws_total = floor["median"], CHAINS * RRR["draws"]
    same = median["same"]
    rows = [
        ("slt `llc`, end to end", median["slt"]),
        ("slt sampling loop only (`result.run_time`: chunked scan + host copies)",
         median["slt_run"]),
        ("bare, same per-step work: minibatch indices (`epoch_indices`), gather, "
         "value-and-grad, SGLD update (slt's noise generator), paired loss L_b(w*) gathered "
         "from cached per-example losses", same),
        ("bare, without the paired loss", median["unpaired"]),
    ]
    lines += [
        "### Overhead against a hand-written `lax.scan` SGLD loop (the floor)",
        "",
        f"The RRR problem above, {CHAINS} vmapped chains × {RRR['draws']} steps, one jitted "
        "`lax.scan` in bare JAX, no divergence check, distance trace, chunking or host "
        f"copies; medians of {FLOOR_REPEATS} interleaved repeats (warm).",
        "",
        "| loop | ms | draws/s | slt `llc` / loop |",
        "|---|---|---|---|",
        *[f"| {label} | {1e3 * seconds:.1f} | {draws_total / seconds:,.0f} | "
          f"{median['slt'] / seconds:.2f} |" for label, seconds in rows],
        "",
    ]
    overhead_run = median["slt_run"] / same - 1
    overhead_all = median["slt"] / same - 1
    paired_share = 1 - median["unpaired"] / same
    lines += [
        f"slt overhead over the same-work floor: sampling loop {100 * overhead_run:+.0f}%, "
        f"end to end {100 * overhead_all:+.0f}%; target ≤ 15%: "
        f"{_verdict(overhead_all, 0.15, False)} end to end, "
        f"{_verdict(overhead_run, 0.15, False)} for the sampling loop. On this "
        f"{rrr['dim']}-parameter problem the paired loss takes {100 * paired_share:.0f}% of the "
        f"floor's time. λ̂ for the same key: slt {floor['estimates']['slt']:.6g}, floor "
        f"{floor['estimates']['bare']:.6g}; they draw the same minibatches and noise, and "
        "their per-draw losses L_b(w_t), L_b(w*) differ by at most "
        f"{floor['estimates'].get('max_loss_difference', float('nan')):.2g} (float32 rounding).",
        "",
    ]

    # compile time and memory
    lines += [
        "### Compile time and peak memory",
        "",
        "Host resident set size from /proc/self/status: baseline = VmRSS once imports, data "
        "and model are loaded (for slt's second call: the RSS left by the first); peak = VmHWM "
        "during the run, reset just before it, so the last column is what the run itself needs. "
        "slt: a fresh process per problem, a first `llc` call (compile included), then a second "
        f"one; each devinterp version: its runner process, the largest of its {ROUNDS} runs. "
        "Compile time: "
        "slt's first `llc` call on the problem in that fresh process (devinterp runs eagerly, "
        "nothing to compile)."
        + ("" if all(entry.get("peak_is_run_only", True) for entry in memory.values()) else
           " This kernel refused to reset VmHWM: peaks are since process start."),
        "",
        "| | compile s | baseline RSS MiB | peak RSS MiB | added by the run MiB |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("rrr", "RRR"), ("mlp", f"MLP d = {mlp['dim']:,}")):
        entry = memory[name]
        baseline, warm_baseline = entry["baseline_rss_mb"], entry["warm_baseline_rss_mb"]
        lines += [
            f"| slt, {label}, first call | {entry['compile_time']:.2f} | {baseline:.0f} | "
            f"{entry['peak_rss_mb']:.0f} | {entry['peak_rss_mb'] - baseline:.0f} |",
            f"| slt, {label}, second call | — | {warm_baseline:.0f} | "
            f"{entry['warm_peak_rss_mb']:.0f} | "
            f"{entry['warm_peak_rss_mb'] - warm_baseline:.0f} |",
        ]
        for version, (baseline, peak, added) in results[name]["devinterp_memory"].items():
            lines.append(f"| devinterp {version}, {label} | — | {baseline:.0f} | {peak:.0f} | "
                         f"{added:.0f} |")
    lines += [
        "",
        f"In the benchmark process (JAX already warm) slt's first `llc` call compiled in "
        f"{rrr['slt_compile']:.2f} s (RRR) and {mlp['slt_compile']:.2f} s (MLP); the bare "
        f"floor compiles in {floor['compile']['same']:.2f} s.",
        "",
        *_limits(rrr, mlp, floor),
    ]
    return "\n".join(lines)


def _limits(rrr, mlp, floor) -> list[str]:
    """What limits the ratios, in numbers from this run."""
    median = floor["median"]
    draws_rrr = CHAINS * rrr["config"]["num_samples"]
    slt_step, floor_step = median["slt"] / draws_rrr, median["same"] / draws_rrr
    overhead = median["slt"] / median["same"] - 1
    lines = [
        "### What limits the ratios",
        "",
        f"- RRR, d = {rrr['dim']}: slt takes {1e6 * slt_step:.0f} µs per chain-step end to "
        f"end in the floor comparison, the bare same-work loop {1e6 * floor_step:.0f} µs "
        f"(slt / bare loop = {1 + overhead:.2f}: slt's validation, bookkeeping and summary "
        "included); the time is "
        "one step of a compiled XLA CPU loop on a tiny problem (minibatch indices, a gather "
        f"of {BATCH} rows, a gradient, the update and the paired loss, for {CHAINS} chains).",
    ]
    if "devinterp" in rrr["median"]:
        devinterp = rrr["median"]["devinterp"][0]
        lines[-1] += (
            f" devinterp 1.3.2's median time is {devinterp / median['same']:.0f}× the bare "
            f"loop's. It is Python-bound: {1e3 * devinterp / draws_rrr:.2f} ms per step; its "
            f"DataLoader alone takes {1e3 * rrr['loader_seconds_per_batch']:.2f} ms per batch "
            "(per-row `__getitem__` and collation of 256 rows) and SGLD hand-written in plain "
            f"torch {1e3 * rrr['torch_seconds_per_step']:.2f} ms per step (both timed alone, "
            "once a round)."
        )
    if "devinterp2" in rrr["median"]:
        devinterp = rrr["median"]["devinterp2"][0]
        lines[-1] += (
            f" devinterp 2.0.1: {1e3 * devinterp / draws_rrr:.2f} ms per step, its per-call "
            "costs included (L_n(w*), the Zarr store, `gc.collect()` around every chain: see "
            "the trajectory section); it reads minibatches through the HuggingFace dataset in "
            "the first pass only and then replays that pass's batches from memory "
            "(`itertools.cycle` over its DataLoader, devinterp/slt/sampler.py), so its loader "
            "costs once a chain, not once a step."
        )
    draws_mlp = CHAINS * mlp["config"]["num_samples"]
    slt_step = mlp["median"]["slt"][0] / draws_mlp
    line = (f"- MLP, d = {mlp['dim']:,}: the matmuls dominate. slt takes "
            f"{1e3 * slt_step:.2f} ms per chain-step (a gradient on batch {BATCH}; the paired "
            "loss is a gather)")
    if "devinterp" in mlp["median"]:
        devinterp_step = mlp["median"]["devinterp"][0] / draws_mlp
        loader = mlp["loader_seconds_per_batch"]
        torch_step = mlp["torch_seconds_per_step"]
        line += (f"; SGLD hand-written in plain torch (no devinterp, no DataLoader, no "
                 f"paired loss) {1e3 * torch_step:.2f} ms per step; devinterp 1.3.2 "
                 f"{1e3 * devinterp_step:.2f} ms, its DataLoader alone {1e3 * loader:.2f} ms "
                 "per batch. So the ratio factors into devinterp 1.3.2 over plain torch "
                 f"({devinterp_step / torch_step:.1f}×: what devinterp adds around the same "
                 f"math) times plain torch over slt ({torch_step / slt_step:.1f}×: one fused, "
                 "vmapped XLA program against eager torch ops).")
        if "devinterp2" in mlp["median"]:
            line += (" devinterp 2.0.1: "
                     f"{1e3 * mlp['median']['devinterp2'][0] / draws_mlp:.2f} ms per step, "
                     "its per-call costs included.")
    else:
        line += "."
    return [*lines, line, ""]


def run(key=None) -> str:
    """The Markdown section, measured in a child process (float32, its own RSS)."""
    seed = 0
    if key is not None:
        import jax

        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.llc_speed", "--seed", str(seed)],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    )
    return completed.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", metavar="NPZ", help=argparse.SUPPRESS)
    parser.add_argument("--report", metavar="RAW_JSON",
                        help="only render the section from a raw.json of an earlier run")
    arguments = parser.parse_args()
    if arguments.memory:
        _memory_main(arguments.memory, arguments.seed)
    elif arguments.report:
        print(_report(json.loads(Path(arguments.report).read_text())))
    else:
        print(measure(arguments.seed))


if __name__ == "__main__":
    main()
