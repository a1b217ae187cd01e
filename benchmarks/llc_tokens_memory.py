"""λ̂ of a language model on 20 000 sequences in bounded memory (`Problem.from_tokens`, issue 36).

Case. A tiny causal language model over V = 5 000 tokens (embeddings of width 16, the running
mean of the prefix's embeddings, a linear readout to the vocabulary: d = 165 000 parameters) on
n = 20 000 random sequences of T = 256 tokens. The token tensor is 20 MB; the logits of all n
sequences at once would be n T V float32 = 102 GB. `Problem.from_tokens` evaluates the full
data (its validation, L_n(w*), the centre's measurements) `chunk_size` sequences at a time
(`slt.chunks`, the chunk size from memory), and `slt.llc` samples on minibatches of sequences.

Each size runs in a fresh process (`python -m benchmarks.llc_tokens_memory CHILD n`), on the
CPU, at n = 300 and at n = 20 000 (the memory should not grow with n): build
the Problem, then `slt.llc` with a small plan (2 chains, 10 warmup steps and 20 draws, SGLD at
a fixed step 1e-6, batches of 4 sequences, no MALA diagnostics). Reported: the peak resident
set size of the whole process (`resource.getrusage`, JAX's runtime included), the wall time of
the construction and of `llc`, the process's CPU time (user, where recorded), the chunk size,
the machine's load average and its cores. The
point is the memory, not λ̂: w* is the model's random initialisation, not a trained minimum,
so λ̂ is not meaningful here (`llc` says so in its warnings).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES, LENGTH, VOCABULARY, WIDTH = (300, 20_000), 256, 5_000, 16
TARGET_BYTES = 3 * 2**30  # the bound on the peak memory: 3 GB


def logits_fn(params, tokens):
    """Causal: position t's logits read the mean embedding of tokens 0 ... t."""
    import jax.numpy as jnp

    hidden = params["embed"][tokens]                                    # (b, T, D)
    prefix = jnp.cumsum(hidden, axis=1) / jnp.arange(1, tokens.shape[1] + 1)[:, None]
    return jnp.tanh(prefix) @ params["out"] + params["bias"]           # (b, T, V)


def _child(sequences: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import slt

    keys = jax.random.split(jax.random.key(0), 3)
    params = {"embed": jax.random.normal(keys[0], (VOCABULARY, WIDTH), jnp.float32),
              "out": jax.random.normal(keys[1], (WIDTH, VOCABULARY), jnp.float32) / 4,
              "bias": jnp.zeros(VOCABULARY, jnp.float32)}
    tokens = np.random.default_rng(0).integers(0, VOCABULARY, (sequences, LENGTH), np.int32)
    start = time.perf_counter()
    problem = slt.Problem.from_tokens(logits_fn, params, tokens)
    built = time.perf_counter() - start
    start = time.perf_counter()
    result = slt.llc(problem, params, jax.random.key(1),
                     sampler=slt.samplers.SGLD(step_size=1e-6, batch_size=4, mala_every=0),
                     plan=slt.RunPlan(num_chains=2, num_warmup=10, num_samples=20,
                                      progress=False))
    sampled = time.perf_counter() - start
    return {"sequences": sequences, "tokens": LENGTH, "vocabulary": VOCABULARY,
            "dim": problem.dim, "chunk_size": problem.chunk_size,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "build_seconds": built, "llc_seconds": sampled,
            "cpu_seconds": resource.getrusage(resource.RUSAGE_SELF).ru_utime,
            "init_loss": result.init_loss, "llc_mean": result.llc_mean,
            "load_average": os.getloadavg(), "cores": os.cpu_count(),
            "device": str(jax.devices()[0].device_kind)}


def _in_child(sequences: int) -> dict:
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.llc_tokens_memory", "CHILD", str(sequences)],
        cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def report(rows: list[dict]) -> str:
    lines = [
        "\n## A language model's λ̂ in bounded memory (`Problem.from_tokens`)\n",
        __doc__.split("\n\n", 1)[1].strip() + "\n",
        "| sequences × tokens | V | d | chunk | peak RSS | logits of all n | build | llc | CPU "
        "| load (1, 5, 15 min) |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        logits = row["sequences"] * row["tokens"] * row["vocabulary"] * 4 / 1e9
        cpu = f"{row['cpu_seconds']:.0f} s" if "cpu_seconds" in row else "–"
        lines.append(
            f"| {row['sequences']:,} × {row['tokens']} | {row['vocabulary']:,} | {row['dim']:,} "
            f"| {row['chunk_size']} | {row['peak_rss_bytes'] / 1e9:.2f} GB | {logits:.1f} GB "
            f"| {row['build_seconds']:.0f} s | {row['llc_seconds']:.0f} s | {cpu} "
            f"| {', '.join(f'{v:.1f}' for v in row['load_average'])} on {row['cores']} cores |")
    largest = max(rows, key=lambda row: row["sequences"])
    verdict = "within" if largest["peak_rss_bytes"] < TARGET_BYTES else "ABOVE"
    lines.append(f"\nAt n = {largest['sequences']:,} the peak is {verdict} the 3 GB target.\n")
    return "\n".join(lines)


def run() -> str:
    return report([_in_child(size) for size in SIZES])


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "CHILD":
        print(json.dumps(_child(int(sys.argv[2]) if len(sys.argv) > 2 else SIZES[-1])))
    elif len(sys.argv) >= 3 and sys.argv[1] == "REPORT":  # CHILD JSON lines, saved in files
        print(report([json.loads(Path(path).read_text().strip().splitlines()[-1])
                      for path in sys.argv[2:]]))
    else:
        print(run())
