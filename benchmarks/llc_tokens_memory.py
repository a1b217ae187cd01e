"""λ̂ of a language model on 20 000 sequences in bounded memory (`Problem.from_tokens`, issue 36).

Case. A tiny causal language model over V = 5 000 tokens (embeddings of width 16, the running
mean of the prefix's embeddings, a linear readout to the vocabulary: d = 165 000 parameters) on
n = 20 000 random sequences of T = 256 tokens. The token tensor is 20 MB; the logits of all n
sequences at once would be n T V float32 = 102 GB. `Problem.from_tokens` evaluates the full
data (its validation, L_n(w*), the centre's measurements) `chunk_size` sequences at a time
(`slt.chunks`, the chunk size from memory), and `slt.llc` samples on minibatches of sequences.

Run in a fresh process (`python -m benchmarks.llc_tokens_memory CHILD [n]`), on the CPU: build
the Problem, then `slt.llc` with a small plan (2 chains, 10 warmup steps and 20 draws, SGLD at
a fixed step 1e-6, batches of 4 sequences, no MALA diagnostics). Reported: the peak resident
set size of the whole process (`resource.getrusage`, JAX's runtime included), the wall time of
the construction and of `llc`, the chunk size, the machine's load average and its cores. The
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
SEQUENCES, LENGTH, VOCABULARY, WIDTH = 20_000, 256, 5_000, 16
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


def report(row: dict) -> str:
    gib = row["peak_rss_bytes"] / 2**30
    logits = row["sequences"] * row["tokens"] * row["vocabulary"] * 4 / 1e9
    verdict = "within" if row["peak_rss_bytes"] < TARGET_BYTES else "ABOVE"
    return (
        "\n## A language model's λ̂ in bounded memory (`Problem.from_tokens`)\n\n"
        + (__doc__.split("\n\n", 1)[1].strip()) + "\n\n"
        "| sequences × tokens | V | d | chunk | peak RSS | build | llc | load (1, 5, 15 min) |\n"
        "|---|---|---|---|---|---|---|---|\n"
        f"| {row['sequences']:,} × {row['tokens']} | {row['vocabulary']:,} | {row['dim']:,} "
        f"| {row['chunk_size']} | {gib:.2f} GiB | {row['build_seconds']:.0f} s "
        f"| {row['llc_seconds']:.0f} s "
        f"| {', '.join(f'{v:.1f}' for v in row['load_average'])} on {row['cores']} cores |\n\n"
        f"The peak is {verdict} the 3 GB target; all logits at once would be {logits:.0f} GB.\n"
    )


def run() -> str:
    return report(_in_child(SEQUENCES))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "CHILD":
        print(json.dumps(_child(int(sys.argv[2]) if len(sys.argv) > 2 else SEQUENCES)))
    elif len(sys.argv) == 3 and sys.argv[1] == "REPORT":  # a CHILD's JSON line, saved
        print(report(json.loads(Path(sys.argv[2]).read_text().strip().splitlines()[-1])))
    else:
        print(run())
