"""Langevin noise: slt's Threefry written out in `jax.numpy` against `jax.random`'s generators.

Issue 17 asks whether `slt.samplers.noise.standard_normal` (Threefry-2x32-20 in uint32 array
operations, module doc there) still earns its place against `jax.random.normal` with the
generators JAX ships: "threefry2x32" (the default), "rbg" and "unsafe_rbg" (XLA's
RngBitGenerator; "unsafe_rbg" also derives keys with it instead of Threefry).

What is timed is what an SGLD step draws: every step folds the step number into the chain's
key and draws one N(0, 1) per parameter for each of `CHAINS` chains, float32, inside one jitted
`lax.scan` of `STEPS` steps (the draws summed so that none is optimised away). The contenders
alternate for `ROUNDS` rounds; the median time per step is reported, and the ratio of each
`jax.random` generator's time to slt's. Sizes: the 100 600-parameter network of the LLC speed
benchmark and a 10^6-parameter one. Run alone: `python -m benchmarks.noise_generators`.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from slt.samplers.noise import standard_normal

CHAINS = 4
STEPS = 200
ROUNDS = 5
SIZES = (100_600, 1_000_000)
IMPLEMENTATIONS = ("threefry2x32", "rbg", "unsafe_rbg")


def _scan_of_draws(draw, size: int):
    """Jitted: STEPS steps, each `draw(fold_in(key, step), (CHAINS, size))`, summed."""

    @jax.jit
    def run(key):
        def step(total, index):
            noise = draw(jax.random.fold_in(key, index), (CHAINS, size))
            return total + jnp.sum(noise), None

        return jax.lax.scan(step, jnp.float32(0.0), jnp.arange(STEPS))[0]

    return run


def _contenders(size: int) -> dict:
    """{name: (jitted run, key)}: slt's generator on a Threefry key, then `jax.random.normal`
    on a key of each implementation."""
    contenders = {"slt standard_normal (threefry2x32 key)": (
        _scan_of_draws(lambda key, shape: standard_normal(key, shape, jnp.float32), size),
        jax.random.key(0),
    )}
    for impl in IMPLEMENTATIONS:
        contenders[f"jax.random.normal ({impl})"] = (
            _scan_of_draws(lambda key, shape: jax.random.normal(key, shape, jnp.float32), size),
            jax.random.key(0, impl=impl),
        )
    return contenders


def _median_step_times(size: int) -> dict[str, float]:
    contenders = _contenders(size)
    for run, key in contenders.values():
        run(key).block_until_ready()  # compile
    times = {name: [] for name in contenders}
    for _ in range(ROUNDS):
        for name, (run, key) in contenders.items():
            start = time.perf_counter()
            run(key).block_until_ready()
            times[name].append((time.perf_counter() - start) / STEPS)
    return {name: float(np.median(values)) for name, values in times.items()}


def run() -> str:
    device = jax.devices()[0]
    lines = [
        "## Langevin noise: slt's Threefry against `jax.random` (rbg, unsafe_rbg)\n",
        __doc__.split("\n\n", 1)[1].strip(),
        "",
        f"Device: {device.platform} ({device.device_kind}).",
        "",
        "| parameters | generator | time per step (ms) | time / slt's |",
        "|---|---|---|---|",
    ]
    for size in SIZES:
        times = _median_step_times(size)
        reference = times["slt standard_normal (threefry2x32 key)"]
        for name, seconds in times.items():
            lines.append(f"| {CHAINS} x {size:,} | {name} | {1e3 * seconds:.3f} | "
                         f"{seconds / reference:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
