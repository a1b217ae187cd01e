"""Independent calls of compiled programs made side by side, one thread per CPU core.

A compiled JAX program releases Python's GIL while it runs, but on a CPU the calls made from one
thread run one after another, even independent ones: JAX dispatches them asynchronously to one
queue per device. Calls made from several threads run at once (measured: one 100 000-step
loop 0.99 s, two dispatched back to back 2.09 s, two from two threads 1.04 s;
benchmarks/RESULTS.md). Where a step of slt is several calls of one compiled program with
different arguments (`sample_nuts`' chain groups, `fit_map`'s restarts on a CPU),
`side_by_side` makes them in threads: the same programs with the same arguments, so bitwise
the numbers of the calls made in turn.

The calls must only run compiled programs and NumPy: a NumPyro model must not be traced in two
threads at once (its effect handlers live on one process-wide stack), and
`warnings.catch_warnings` is process-wide too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["side_by_side"]


def side_by_side(calls: Sequence[Callable[[], Any]]) -> list:
    """The results of `calls` (functions of no arguments, each running compiled programs), in
    order, the calls made in up to one thread per CPU core at once (module doc); with one
    call or one core they are made in turn in the caller's thread. The first failed call's
    exception is raised here (from threads: after every call has returned)."""
    workers = min(len(calls), _usable_cores())
    if workers <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slt-side-by-side") as pool:
        futures = [pool.submit(call) for call in calls]
    return [future.result() for future in futures]


def _usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
