"""The GPU part of benchmarks/llc_transformer.py: draws per second of slt and devinterp 2.0.1
on one GPU, and where a step's time goes.

Run by `benchmarks/llc_transformer.py --device gpu --sizes hoogland,pythia` (the exact command
is at the top of that file). The sizes (`SIZES` there): "hoogland", the spec's attention-only
transformer at Hoogland et al.'s size (2 layers, d_model 256, 8 heads, V = 5000, T = 256:
3.2M parameters), and "pythia", a Pythia-70M-shaped GPT-NeoX (benchmarks/pythia_shaped.py:
6 layers, d_model 512, 8 heads, MLP 2048, rotary positions, V = 50 304, T = 128: 70.4M
parameters; torch side HuggingFace's `GPTNeoXForCausalLM` built from a config). For each
size: the model is built and trained briefly (Adam, a few hundred steps) on synthetic induction
tokens (no downloads), then on the same device, at the same settings:

  * the model's own forward + backward on one minibatch, per step: JAX (`jax.value_and_grad`
    of the mean per-token loss, jitted) and torch (the twin, plain `backward`);
  * lambda_hat of the whole model and of head l0h0: slt `llc` (vmapped chains, warm: its
    compile time reported apart) and devinterp 2.0.1 `llc` (chains in turn); draws per second
    = chains x draws / wall seconds, and the seconds per SGLD step: slt's sampling loop
    (`run_time`) over its steps (all chains together), devinterp's wall time of a long call
    minus a short one over the chain-steps between them (its per-call costs cancel);
  * at the Hoogland size, every head's lambda_hat by both (the CPU comparison's heads' run:
    slt's one `llc_trajectory(..., parts)` against devinterp's one call per head), their wall
    and CPU times and their agreement in combined standard errors.

Each finished measurement is written at once to $OUT/llc_transformer_gpu.json (or the
system's temporary folder without $OUT), so a run stopped by its time limit keeps what it had.
JAX does not preallocate the GPU's memory here (XLA_PYTHON_CLIENT_PREALLOCATE=false, set before
JAX loads), since the devinterp runner's torch shares the GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks import llc_transformer as bench

SHORT_DRAWS = 10  # devinterp's short call (per-call costs), against the full call's draws
FORWARD_BACKWARD_STEPS = 50
# the sizes at which every head's lambda_hat is also measured by both libraries (the CPU
# comparison's heads' run, on this device)
HEADS_TRAJECTORY_SIZES = ("hoogland",)


def _output_path() -> Path:
    return Path(os.environ.get("OUT") or tempfile.gettempdir()) / bench.GPU_RESULTS


def _save(results: dict) -> None:
    path = _output_path()
    path.write_text(json.dumps(results, indent=1))
    bench.log(f"saved {path}")


def _jax_forward_backward(params, tokens, batch_size: int, seed: int) -> float:
    """Seconds per step of JAX's jitted value-and-grad of the mean per-token loss on a
    minibatch (the same 8 minibatches in turn as the torch twin's timing), after warm-up."""
    import jax

    from slt.precision import at_full_precision

    step = jax.jit(at_full_precision(jax.value_and_grad(
        lambda p, batch: bench.per_token_nll(p, batch).mean())))
    rows = np.random.default_rng(seed).integers(len(tokens), size=(8, batch_size))
    batches = [jax.device_put(tokens[row]) for row in rows]
    for index in range(3):
        jax.block_until_ready(step(params, batches[index]))
    start = time.perf_counter()
    for index in range(FORWARD_BACKWARD_STEPS):
        jax.block_until_ready(step(params, batches[index % len(batches)]))
    return (time.perf_counter() - start) / FORWARD_BACKWARD_STEPS


def _slt_llc(problem, params, key, config, part=None):
    """One warm slt `llc` call (a first one compiles): wall seconds and the result."""
    import slt

    values = bench.slt_settings(config, restrict_to=part)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = slt.llc(problem, params, key, **values)
        start = time.perf_counter()
        result = slt.llc(problem, params, key, **values)
    return time.perf_counter() - start, first.compile_time, result


def _heads(worker, problem, params, seed: int, config: dict, m: int) -> dict:
    """Every head's lambda_hat at the checkpoint, the CPU comparison's heads' run on this
    device: slt's one `llc_trajectory(..., parts)` (every head's chains in one program; a
    first call compiles, the second is timed) against devinterp 2.0.1's one `llc` call per
    head, and their agreement in combined standard errors."""
    import jax

    parts = bench.head_parts(params)
    key = jax.random.key(seed)
    first = bench.slt_parts(problem, [params], key, parts, config)
    means, ses, wall, cpu = bench.slt_parts(problem, [params], key, parts, config)
    bench.log(f"{len(parts)} heads: slt {wall:.2f} s (first call {first[2]:.1f} s)")
    reply = bench.devinterp_parts(worker, [0], list(parts), config, seed, config["nbeta"] * m)
    bench.log(f"{len(parts)} heads: devinterp 2.0.1 {reply['wall']:.1f} s")
    gaps = bench.agreement(means, ses, reply["means"], reply["ses"])
    return {"parts": list(parts), "slt_first_call": first[2], "slt_wall": wall, "slt_cpu": cpu,
            "devinterp_wall": reply["wall"], "devinterp_cpu": reply["cpu"],
            "slt_means": means[0].tolist(), "slt_ses": ses[0].tolist(),
            "devinterp_means": reply["means"][0].tolist(),
            "devinterp_ses": reply["ses"][0].tolist(), "gaps": gaps[0].tolist()}


MEASUREMENTS = ("full", "l0h0", "heads")


def measure_size(name: str, seed: int, dry: bool, results: dict,
                 parts: tuple[str, ...] = MEASUREMENTS) -> None:
    """The measurements `parts` of one size (the model's training, the twin and mask checks
    and the forward + backward timing always), saved into results[name] as each finishes."""
    import jax

    from benchmarks.llc_speed import DevinterpWorker

    sized = {"pythia": "pythia-dry"}.get(name, "dry") if dry else name  # --dry-run: tiny
    size, config = bench.SIZES[sized], dict(bench.SAMPLING[sized])
    entry = results.setdefault(name, {"size": size, "config": config})
    device = "cuda" if jax.devices()[0].platform == "gpu" else "cpu"
    start = time.perf_counter()
    tokens = bench.induction_tokens(seed, size)
    checkpoints = bench.train(seed, size, tokens)
    params = checkpoints[-1]
    problem = bench.slt_problem(tokens, params)
    m = size["length"] - 1
    config["nbeta"] = float(problem.n / np.log(problem.n))
    entry.update(dim=problem.dim, n=problem.n, m=m, train_seconds=time.perf_counter() - start,
                 train_loss=float(problem.loss(params)) / m)
    bench.log(f"{name}: d = {problem.dim:,}, trained in {entry['train_seconds']:.1f} s")
    _save(results)
    folder = Path(tempfile.mkdtemp(prefix="slt-llc-transformer-gpu-"))
    npz = folder / f"{name}.npz"
    bench.write_npz(npz, tokens, [params])
    worker = DevinterpWorker(bench.devinterp_python("gpu"), npz, folder)
    try:
        entry["devinterp_info"] = worker.info
        with jax.default_matmul_precision("highest"):
            entry["twin_max_difference"] = bench.twin_check(
                worker, params, tokens, 0, folder, "gpu" if device == "cuda" else "cpu")
        entry["masks_differ"] = bench.masks_check(worker, bench.head_parts(params), folder)
        batch = config["batch_size"]
        entry["forward_backward"] = {
            "jax": _jax_forward_backward(params, tokens, batch, seed),
            "torch": worker.run({"forward_backward_steps": FORWARD_BACKWARD_STEPS,
                                 "checkpoint": 0, "batch_size": batch, "seed": seed,
                                 "device": device})["seconds_per_step"]}
        bench.log(f"{name}: forward + backward per step {entry['forward_backward']}")
        _save(results)
        steps = config["num_warmup"] + config["num_samples"]
        chains = config["num_chains"]
        for part_name in [part for part in ("full", "l0h0") if part in parts]:
            part = None if part_name == "full" else bench.head_parts(params)[part_name]
            wall, compile_time, result = _slt_llc(problem, params, jax.random.key(seed), config,
                                                  part)
            slt_entry = {"wall": wall, "compile": compile_time, "run_time": result.run_time,
                         "llc": result.llc_mean, "se": result.std_error,
                         "draws_per_second": chains * config["num_samples"] / wall,
                         "seconds_per_step": result.run_time / steps}
            bench.log(f"{name} {part_name}: slt {slt_entry}")
            entry[f"slt_{part_name}"] = slt_entry
            _save(results)
            job = {"checkpoints": [0], "parts": [part_name], "device": device, "seed": seed}
            long = bench.devinterp_parts(worker, [0], [part_name], {**config, **job},
                                         seed, config["nbeta"] * m)
            short = worker.run({**config, **job, "nbeta": config["nbeta"] * m,
                                "num_samples": SHORT_DRAWS})
            chain_steps = chains * (config["num_samples"] - SHORT_DRAWS)
            devinterp_entry = {
                "wall": long["wall"], "cpu": long["cpu"], "llc": float(long["means"][0, 0]),
                "se": float(long["ses"][0, 0]), "llc_mean": float(long["llc_mean"][0, 0]),
                "draws_per_second": chains * config["num_samples"] / long["wall"],
                "seconds_per_chain_step": (long["wall"] - sum(short["wall"])) / chain_steps,
                "short_call_wall": sum(short["wall"])}
            bench.log(f"{name} {part_name}: devinterp {devinterp_entry}")
            entry[f"devinterp_{part_name}"] = devinterp_entry
            _save(results)
        if name in HEADS_TRAJECTORY_SIZES and "heads" in parts:
            entry["heads"] = _heads(worker, problem, params, seed, config, m)
            _save(results)
    finally:
        worker.close()
        shutil.rmtree(folder)  # the .npz, the checks' files, the runner's log


def measure_gpu(sizes: list[str], seed: int, dry: bool = False,
                parts: tuple[str, ...] | list[str] = MEASUREMENTS) -> dict:
    """Every size in turn, the measurements `parts` of each ("full", "l0h0", "heads" for
    every size, "hoogland:heads" for one); the results (also in
    $OUT/llc_transformer_gpu.json)."""
    import jax

    unknown = sorted({entry.rpartition(":")[2] for entry in parts} - set(MEASUREMENTS))
    if unknown:
        raise SystemExit(f"unknown measurements {unknown}; measurements: {MEASUREMENTS}")

    device = jax.devices()[0]
    results = {"device": f"{device.platform} ({device.device_kind})", "jax": jax.__version__,
               "started": time.strftime("%Y-%m-%d %H:%M:%S"), "measurements": list(parts)}
    for name in sizes:
        if name not in bench.SIZES:
            raise SystemExit(f"unknown size {name!r}; sizes: {', '.join(bench.SIZES)}")
        start = time.perf_counter()
        measure_size(name, seed, dry, results, tuple(
            part for size, _, part in (entry.rpartition(":") for entry in parts)
            if size in ("", name)))
        results[name]["seconds"] = time.perf_counter() - start
        _save(results)
    print(json.dumps(results, indent=1))
    return results


def gpu_report(results: dict) -> str:
    """Markdown tables from a llc_transformer_gpu.json (the sizes it finished)."""
    lines = [f"GPU: {results['device']}, JAX {results['jax']}, run {results['started']}.", ""]
    for name, entry in results.items():
        if not isinstance(entry, dict) or "forward_backward" not in entry:
            continue
        config, size = entry["config"], entry["size"]
        info = entry.get("devinterp_info", {})
        lines += [
            f"**{name}**: d = {entry['dim']:,} ({size['layers']} layers, d_model "
            f"{size['d_model']}, {size['heads']} heads, V = {size['vocab']:,}, T = "
            f"{size['length']}), n = {entry['n']:,} sequences, {config['num_chains']} chains × "
            f"({config['num_warmup']} + {config['num_samples']}) steps, batch "
            f"{config['batch_size']} sequences, ε = {config['step_size']:g}, γ = "
            f"{config['gamma']:g}, nβ = {config['nbeta']:.1f} per sequence; torch "
            f"{info.get('torch', '?')}. Twin: max |torch − JAX| per-token loss "
            f"{entry['twin_max_difference']:.1g}; head masks differ: "
            f"{entry.get('masks_differ') or 'none'}. The model's own forward + backward per "
            f"step: JAX {1e3 * entry['forward_backward']['jax']:.2f} ms, torch "
            f"{1e3 * entry['forward_backward']['torch']:.2f} ms.",
        ]
        rows = [part for part in ("full", "l0h0")
                if entry.get(f"slt_{part}") and entry.get(f"devinterp_{part}")]
        lines += [
            "",
            "| part | slt λ̂ ± se | devinterp λ̂ ± se | slt draws/s | devinterp draws/s | "
            "slt / devinterp | slt s per step (all chains) | devinterp s per chain-step | "
            "slt compile s |",
            "|---|---|---|---|---|---|---|---|---|",
        ] if rows else []
        for part in rows:
            ours, theirs = entry[f"slt_{part}"], entry[f"devinterp_{part}"]
            lines.append(
                f"| {part} | {ours['llc']:.4g} ± {ours['se']:.2g} | {theirs['llc']:.4g} ± "
                f"{theirs['se']:.2g} | {ours['draws_per_second']:,.0f} | "
                f"{theirs['draws_per_second']:,.1f} | "
                f"**{ours['draws_per_second'] / theirs['draws_per_second']:.1f}×** | "
                f"{1e3 * ours['seconds_per_step']:.2f} ms | "
                f"{1e3 * theirs['seconds_per_chain_step']:.2f} ms | {ours['compile']:.1f} |")
        heads = entry.get("heads")
        if heads:
            lines += [
                "",
                f"Every head at the checkpoint: slt one `llc_trajectory(..., parts)` call "
                f"{heads['slt_wall']:.2f} s wall ({heads['slt_cpu']:.2f} s CPU; first call, "
                f"compiling, {heads['slt_first_call']:.1f} s), devinterp 2.0.1 one `llc` call "
                f"per head {heads['devinterp_wall']:.1f} s wall ({heads['devinterp_cpu']:.1f} s "
                f"CPU): **{heads['devinterp_wall'] / heads['slt_wall']:.1f}× by wall time, "
                f"{heads['devinterp_cpu'] / heads['slt_cpu']:.1f}× by CPU time**; "
                f"{sum(g <= 2 for g in heads['gaps'])} of {len(heads['gaps'])} heads' λ̂ within "
                "two combined standard errors.",
                "",
                "| head | slt λ̂ ± se | devinterp λ̂ ± se | gap (combined se) |",
                "|---|---|---|---|"]
            for index, part in enumerate(heads["parts"]):
                lines.append(
                    f"| {part} | {heads['slt_means'][index]:.4g} ± "
                    f"{heads['slt_ses'][index]:.2g} | {heads['devinterp_means'][index]:.4g} ± "
                    f"{heads['devinterp_ses'][index]:.2g} | {heads['gaps'][index]:.1f} |")
        lines.append("")
    return "\n".join(lines)
