"""LLC speed: slt's `llc` against devinterp (PyTorch) and against a hand-written `lax.scan` floor.

Issue 3, "Speed". Everything is measured side by side in one run, on the same data (generated in
NumPy from one seed and handed to devinterp as an .npz), at the same SGLD configuration:
step size eps, localization gamma, n beta, batch size, chains and draws; float32 on both sides.

Contenders
  * slt: `slt.estimators.llc.llc` with vmapped chains and `mala_every=0` (devinterp computes no
    MALA acceptance by default); timed warm (its chunk program is cached after the first call,
    whose compile time is reported separately), end to end: validation, L_n(w*) on the full
    data, sampling, and the summary (ESS, R-hat). Per step slt does one gradient on the
    minibatch, the SGLD update, and the paired loss L_b(w*): the mean over the minibatch of
    per-example losses at w* computed once before sampling (a gather, no forward pass).
  * devinterp 1.3.2 (`estimate_learning_coeff_with_summary`, its default SGLD, `cores=1`: chains
    one after another in one process, its default; a `torch.utils.data.DataLoader` with
    `shuffle=True` over a `TensorDataset`, the usage of its examples), in its own venv
    `benchmarks/.venv-devinterp`, created on first use (`ensure_devinterp_venv`) and driven as a
    subprocess (`benchmarks/devinterp_runner.py`). Version 1.3.2 is the last release with the
    general model + DataLoader API; devinterp 2.x only takes HuggingFace datasets of token ids.
    init_loss is given (L_n(w*) on the full data, as slt uses), so neither side spends time on it.
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
RRR); each round also times devinterp's DataLoader alone and SGLD hand-written in plain torch,
to tell where devinterp's time goes. slt and the floors take turns `FLOOR_REPEATS` times.
draws/s = chains x draws / wall seconds.

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
VENV = HERE / ".venv-devinterp"
RUNNER = HERE / "devinterp_runner.py"
TORCH_VERSION = "2.13.0"  # the CPU wheel on this machine's disk; a plain `torch` pulls CUDA
DEVINTERP_VERSION = "1.3.2"
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


def log(message: str) -> None:
    print(f"llc_speed: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- devinterp venv


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_devinterp_venv() -> Path:
    """The devinterp venv's python, creating `benchmarks/.venv-devinterp` first if needed.

    It holds torch==2.13.0 (the CPU wheel on this machine's disk) and devinterp==1.3.2 with its
    dependencies, installed with a constraint that keeps that torch. About a minute and 1.2 GB
    the first time; a stamp file marks a finished install, so a broken one is rebuilt.
    """
    stamp = VENV / f".installed-torch{TORCH_VERSION}-devinterp{DEVINTERP_VERSION}"
    if stamp.exists() and _venv_python().exists():
        return _venv_python()
    log(f"creating {VENV.relative_to(ROOT)} with torch=={TORCH_VERSION} (CPU) and "
        f"devinterp=={DEVINTERP_VERSION}: about a minute and 1.2 GB, once")
    _quiet([sys.executable, "-m", "venv", "--clear", str(VENV)])
    pip = [str(_venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _quiet([*pip, f"torch=={TORCH_VERSION}"])
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder) / "constraints.txt"
        constraints.write_text(f"torch=={TORCH_VERSION}\n")
        _quiet([*pip, "-c", str(constraints), f"devinterp=={DEVINTERP_VERSION}"])
    check = "import torch, devinterp.slt.sampler; print(torch.__version__)"
    version = subprocess.run([str(_venv_python()), "-c", check], check=True,
                             capture_output=True, text=True).stdout.strip()
    if not version.startswith(TORCH_VERSION):
        raise RuntimeError(f"the devinterp venv got torch {version}, not {TORCH_VERSION}")
    stamp.touch()
    log("devinterp venv ready")
    return _venv_python()


def _quiet(command: list[str]) -> None:
    """Run an install step; its output is shown only if it fails."""
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode:
        output = (completed.stdout + completed.stderr)[-3000:]
        raise RuntimeError(f"`{' '.join(command)}` failed:\n{output}")


class DevinterpWorker:
    """devinterp_runner.py in the devinterp venv, kept alive to take one job per line."""

    def __init__(self, python: Path, npz: Path, folder: Path):
        self._stderr = open(folder / f"devinterp-{npz.stem}.log", "w+")
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


def _slt_call(problem, params, key, config, mala_every=0):
    """One `llc` call: (wall seconds, CPU seconds, LLCResult)."""
    from slt.estimators.llc import llc

    cpu, start = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = llc(problem, params, key, **config, mala_every=mala_every, progress=False)
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


def _side_by_side(arrays, worker, seed, *, slt_repeats=1, with_default_mala=False) -> dict:
    """devinterp and slt in alternation, ROUNDS rounds: medians of (wall, CPU, lambda_hat, ...).

    A round is one devinterp run, devinterp's DataLoader and a plain-torch SGLD loop timed
    alone, then `slt_repeats` slt runs (and as many with the default MALA measurement).
    """
    import jax

    problem, params = slt_problem(arrays)
    config = _config(arrays)
    key = jax.random.key(seed)
    init_loss = float(problem.loss(params))
    _, _, first = _slt_call(problem, params, key, config)  # compiles
    out = {"dim": problem.dim, "init_loss": init_loss, "config": config,
           "slt_compile": first.compile_time}
    if with_default_mala:
        _slt_call(problem, params, key, config, mala_every=10)  # compiles that variant
    rounds = {name: [] for name in ("devinterp", "loader", "torch", "slt", "slt_mala")}
    peak, baseline, added = 0.0, None, 0.0
    for index in range(ROUNDS):
        if worker is not None:
            job = {**config, "seed": seed + index, "init_loss": init_loss, "cores": 1}
            reply = worker.run(job)
            rounds["devinterp"].append((reply["wall"], reply["cpu"], reply["llc_mean"]))
            peak = max(peak, reply["peak_rss_mb"])
            added = max(added, reply["peak_rss_mb"] - reply["rss_before_mb"])
            baseline = reply["rss_before_mb"] if index == 0 else baseline
            reply = worker.run({"loader_batches": LOADER_BATCHES, "batch_size": BATCH,
                                "seed": seed})
            rounds["loader"].append(reply["loader_seconds_per_batch"])
            reply = worker.run({**config, "torch_steps": TORCH_STEPS, "seed": seed})
            rounds["torch"].append(reply["torch_seconds_per_step"])
        for _ in range(slt_repeats):
            wall, cpu, result = _slt_call(problem, params, key, config)
            rounds["slt"].append((wall, cpu, result.llc_mean, result.run_time))
            if with_default_mala:
                wall, cpu, result = _slt_call(problem, params, key, config, mala_every=10)
                rounds["slt_mala"].append((wall, cpu, result.llc_mean, result.mala_acceptance))
        devinterp = f"devinterp {rounds['devinterp'][-1][0]:.2f} s, " if worker else ""
        log(f"  round {index + 1}/{ROUNDS}: {devinterp}slt {rounds['slt'][-1][0]:.3f} s")
    out["median"] = {name: np.median(np.array(values), axis=0).tolist()
                     for name, values in rounds.items() if values}
    if worker is not None:
        out["devinterp_memory"] = (baseline, peak, added)
        out["loader_seconds_per_batch"] = out["median"].pop("loader")
        out["torch_seconds_per_step"] = out["median"].pop("torch")
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


def _side_table(result, draws_total, info) -> list[str]:
    median = result["median"]
    rows = ["| sampler | wall s | draws/s | CPU s / wall s | λ̂ | speed-up over devinterp | "
            "same, by CPU time |",
            "|---|---|---|---|---|---|---|"]
    reference = median["devinterp"][:2] if "devinterp" in median else None
    if reference is not None:
        wall, cpu, estimate = median["devinterp"]
        rows.append(
            f"| devinterp {info['devinterp']} (torch {info['torch']}, {info['threads']} "
            f"thread, cores=1) | {wall:.2f} | {draws_total / wall:,.0f} | {cpu / wall:.2f} | "
            f"{estimate:.4g} | 1 | 1 |"
        )
    labels = {"slt": "slt `llc`, mala_every=0",
              "slt_mala": "slt `llc`, default mala_every=10 (MALA + temperature)"}
    for name, label in labels.items():
        if name not in median:
            continue
        wall, cpu, estimate, extra = median[name]
        if name == "slt_mala":
            label += f" (MALA acceptance {extra:.2f})"
        ratio, cpu_ratio = "n/a", "n/a"
        if reference is not None:
            ratio, cpu_ratio = f"{reference[0] / wall:.1f}×", f"{reference[1] / cpu:.1f}×"
        if name == "slt" and reference is not None:
            ratio = f"**{ratio}**"
        rows.append(f"| {label} | {wall:.3f} | {draws_total / wall:,.0f} | {cpu / wall:.2f} | "
                    f"{estimate:.4g} | {ratio} | {cpu_ratio} |")
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

    devinterp_python, devinterp_error = None, None
    try:
        devinterp_python = ensure_devinterp_venv()
    except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
        devinterp_error = f"{type(error).__name__}: {error}"
        log(f"devinterp is not available, slt is measured alone: {devinterp_error}")

    results, workers_info, memory = {}, {}, {}
    for name in ("rrr", "mlp"):
        log(f"{name}: devinterp and slt side by side, {ROUNDS} rounds")
        worker = None
        if devinterp_python is not None:
            worker = DevinterpWorker(devinterp_python, paths[name], folder)
            workers_info[name] = worker.info
        try:
            results[name] = _side_by_side(datasets[name], worker, seed,
                                          slt_repeats=3 if name == "rrr" else 1,
                                          with_default_mala=name == "rrr")
        finally:
            if worker is not None:
                worker.close()
        log(f"{name}: slt memory and cold compile time in a fresh process")
        memory[name] = _slt_memory(paths[name], seed)
    log(f"rrr: slt against the hand-written lax.scan floor, {FLOOR_REPEATS} repeats")
    floor = _floor(datasets["rrr"], seed)
    raw = {"jax": jax.__version__, "load": (load_before, os.getloadavg()[0]),
           "results": results, "devinterp": workers_info,
           "memory": memory, "floor": floor, "devinterp_error": devinterp_error}
    (folder / "raw.json").write_text(json.dumps(raw, indent=1))
    for path in paths.values():
        path.unlink()
    log(f"raw measurements in {folder / 'raw.json'}")
    return _report(raw)


def _report(raw: dict) -> str:
    """The Markdown section from the raw measurements of `measure`."""
    from slt import truth

    results, workers_info, memory = raw["results"], raw["devinterp"], raw["memory"]
    floor, devinterp_error = raw["floor"], raw["devinterp_error"]
    rrr, mlp = results["rrr"], results["mlp"]
    info = workers_info.get("rrr")
    lines = ["## LLC speed: slt against devinterp and against a bare `lax.scan` loop", ""]
    setup = (
        f"CPU, float32 on both sides, JAX {raw['jax']} at its defaults. Same data (one "
        "NumPy seed, handed to devinterp as an .npz), same step size ε, γ, nβ = n / log n, "
        f"batch {BATCH}, {CHAINS} chains, no warmup; both sides are given L_n(w*) on the full "
        "data. slt: `llc` with vmapped chains, timed warm (compile time below), end to end "
        "(validation, L_n(w*), sampling, ESS / R-hat summary); per step one gradient, the "
        "SGLD update and the paired loss L_b(w*), gathered from per-example losses at w* "
        "computed once (no forward pass). slt's default run also measures every 10 steps the "
        "MALA acceptance and the configurational temperature (one gradient and one "
        "forward-over-reverse Hessian-vector product); the speed rows use `mala_every=0`, as "
        "devinterp computes neither. "
    )
    if info is not None:
        setup += (
            f"devinterp {info['devinterp']}: `estimate_learning_coeff_with_summary`, its "
            "default SGLD, `cores=1` (its default: chains one after another in one process), "
            f"a `DataLoader(TensorDataset(x, y), batch_size={BATCH}, shuffle=True)`; torch "
            f"{info['torch']} with `torch.set_num_threads({info['threads']})` "
            "(`SLT_BENCH_TORCH_THREADS`; torch's default of 2 OpenMP threads slows ~50× on "
            "this shared 2-core machine whenever another process holds a core). "
        )
    else:
        setup += f"devinterp could not be installed, so it is missing below ({devinterp_error}). "
    setup += (
        f"Wall times are medians of {ROUNDS} rounds in which the contenders alternate (slt "
        "runs 3 times a round on RRR); "
        "draws/s = chains × draws / wall seconds. λ̂ is shown only to check that both compute "
        "the same thing (devinterp's estimator is unpaired, slt's paired, so their noise differs). "
        f"{os.cpu_count()} cores; 1-minute load average {raw['load'][0]:.1f} at the start, "
        f"{raw['load'][1]:.1f} at the end (this benchmark accounts for about 1; above that "
        "other processes compete, CPU s / wall s falls below 1 and the ratio by CPU time is the "
        "steadier one)."
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
        *_side_table(rrr, draws_total, info),
        "",
    ]
    if "devinterp" in rrr["median"]:
        ratio = rrr["median"]["devinterp"][0] / rrr["median"]["slt"][0]
        step = rrr["median"]["devinterp"][0] / draws_total
        lines += [
            f"Target ≥ 30× devinterp: {_cpu_fair_verdict(rrr, 30)}; devinterp "
            f"takes {1e3 * step:.2f} ms per step, slt {1e3 / ratio * step:.3f} ms per "
            "chain-step. See \"What limits the ratios\" below.",
            "",
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
        *_side_table(mlp, draws_total, workers_info.get("mlp", info)),
        "",
    ]
    if "devinterp" in mlp["median"]:
        ratio = mlp["median"]["devinterp"][0] / mlp["median"]["slt"][0]
        step = mlp["median"]["devinterp"][0] / draws_total
        lines += [
            f"Target ≥ 3× devinterp: {_cpu_fair_verdict(mlp, 3)}; devinterp "
            f"takes {1e3 * step:.2f} ms per step, slt {1e3 / ratio * step:.2f} ms per "
            "chain-step.",
            "",
        ]

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
        f"one; devinterp: its runner process, the largest of its {ROUNDS} runs. Compile time: "
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
        if "devinterp_memory" in results[name]:
            baseline, peak, added = results[name]["devinterp_memory"]
            lines.append(f"| devinterp, {label} | — | {baseline:.0f} | {peak:.0f} | "
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
            f" devinterp's median time is {devinterp / median['same']:.0f}× the bare loop's. "
            f"devinterp is Python-bound: {1e3 * devinterp / draws_rrr:.2f} ms per step; its "
            f"DataLoader alone takes {1e3 * rrr['loader_seconds_per_batch']:.2f} ms per batch "
            "(per-row `__getitem__` and collation of 256 rows) and SGLD hand-written in plain "
            f"torch {1e3 * rrr['torch_seconds_per_step']:.2f} ms per step (both timed alone, "
            "once a round)."
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
                 f"paired loss) {1e3 * torch_step:.2f} ms per step; devinterp "
                 f"{1e3 * devinterp_step:.2f} ms, its DataLoader alone {1e3 * loader:.2f} ms "
                 "per batch. So the ratio factors into devinterp over plain torch "
                 f"({devinterp_step / torch_step:.1f}×: what devinterp adds around the same "
                 f"math) times plain torch over slt ({torch_step / slt_step:.1f}×: one fused, "
                 "vmapped XLA program against eager torch ops).")
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
