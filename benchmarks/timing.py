"""Side-by-side timing: interleave the contenders so machine noise hits them alike."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np


def interleaved_medians(contenders: dict[str, Callable[[], object]], repeats: int = 15):
    """Median wall time (seconds) of each zero-argument callable, run in turns.

    Every callable is run once first (compilation and warm-up, not counted); then the
    contenders take turns `repeats` times, each result blocked on, and the medians returned.
    """
    for run in contenders.values():
        jax.block_until_ready(run())
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(values)) for name, values in times.items()}
