"""XLA compile time of `jax.random` draws, multi-dimensional against drawn flat (`slt.flat_random`).

Each row lowers and compiles one program holding one draw (a fresh `jax.jit`, the persistent
cache off) and reports the median of `REPEATS` compilations, with the shapes the free energy's
proposal draws and the chains' starts use. Run: `python -m benchmarks.flat_random_compile`
(`SLT_COMPILATION_CACHE=off` is set here).
"""

from __future__ import annotations

import os
import statistics
import time

os.environ["SLT_COMPILATION_CACHE"] = "off"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from slt import flat_random  # noqa: E402

REPEATS = 5
LOGITS = jnp.log(jnp.array([0.1, 0.2, 0.3, 0.4, 1e-9, 0.0]))


def compile_seconds(function, *args) -> float:
    """Median seconds to lower and compile `function` at `args` (a new jit each time)."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        jax.jit(lambda *a: function(*a)).lower(*args).compile()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rows() -> list[str]:
    key = jax.random.key(0)
    keys = jax.random.split(key, 8)
    cases = [
        ("normal (20000, 11)", lambda k: jax.random.normal(k, (20000, 11)),
         lambda k: flat_random.normal(k, (20000, 11)), key),
        ("normal (4, 30)", lambda k: jax.random.normal(k, (4, 30)),
         lambda k: flat_random.normal(k, (4, 30)), key),
        ("uniform (100, 11)", lambda k: jax.random.uniform(k, (100, 11)),
         lambda k: flat_random.uniform(k, (100, 11)), key),
        ("categorical, 20000 of 6", lambda k: jax.random.categorical(k, LOGITS, shape=(20000,)),
         lambda k: flat_random.categorical(k, LOGITS, 20000), key),
        ("normal (11,) under vmap over 8 keys (not changed)",
         lambda ks: jax.vmap(lambda k: jax.random.normal(k, (11,)))(ks), None, keys),
    ]
    out = []
    for name, shaped, flat, argument in cases:
        before = compile_seconds(shaped, argument)
        after = compile_seconds(flat, argument) if flat is not None else float("nan")
        out.append(f"| {name} | {before:.3f} | {after:.3f} |")
    return out


if __name__ == "__main__":
    print(f"jax {jax.__version__}, threefry partitionable: {jax.config.jax_threefry_partitionable}")
    print("| draw | jax.random, s | slt.flat_random, s |\n|---|---|---|")
    print("\n".join(rows()))
