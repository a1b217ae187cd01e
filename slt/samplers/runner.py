"""The one loop every sampler runs: compiled units one after another, each followed by a
progress update and a checkpoint.

A unit is what one call of a sampler's compiled program does: a chunk of `lax.scan`ned steps of
vmapped chains (`run_chains`, `sample_nuts`) or one stage of every copy (`tempered_smc`). The
sampler builds `advance(state, unit) -> (state, record)` around its program; `run_units` calls
it for units `done, done + 1, ...`, collects the records (tuples of host arrays, one column
block per unit, joined by `slt.samplers.checkpoint.join_records`), moves the progress bar, and
writes the checkpoint after every unit (`Checkpoint.save`: atomic, so the file always holds a
whole number of units).

Interrupts. The library installs no signal handler (that is the `slt` command's business: it
turns SIGTERM into a `KeyboardInterrupt`). A `KeyboardInterrupt` during a checkpointed run
(Ctrl-C in a notebook or a script) loses only the unit in progress: the file holds every unit
before it, and `run_units` raises `Interrupted`, a `KeyboardInterrupt` that names the file; the
same call with the same arguments resumes from there to the bitwise same result. Without a
checkpoint the `KeyboardInterrupt` propagates unchanged.

A unit of several independent program calls (`sample_nuts`' chain groups) makes them side by
side (`slt.threads.side_by_side`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from tqdm.auto import tqdm

from slt.samplers.checkpoint import Checkpoint, Interrupted, Records, Resumed

__all__ = ["ProgressBar", "run_units"]


class ProgressBar(NamedTuple):
    """What the progress bar shows.

    total: the bar's full length (steps, or 1.0 for an inverse temperature).
    position: `position(state, units_done)` -> where the bar stands after that many units.
    description: the bar's label.
    unit: the label of the bar's quantity ("step", "beta", ...).
    show: False hides the bar.
    """

    total: float
    position: Callable[[Any, int], float]
    description: str
    unit: str = "step"
    show: bool = True


def run_units(
    advance: Callable[[Any, int], tuple[Any, Records]],
    start: Resumed,
    store: Checkpoint,
    bar: ProgressBar,
    *,
    num_units: int,
    finished: Callable[[Any, list], bool] | None = None,
) -> Resumed:
    """Run units `start.units_done, ..., num_units - 1` (see the module doc).

    Args:
      advance: `advance(state, unit) -> (state, record)`, one compiled unit; `record` is a
        tuple of host (NumPy) arrays with the unit's columns along axis 1.
      start: where to begin, from `store.resume(initial_state)`.
      store: the run's checkpoint (path None: nothing is written).
      bar: the progress bar.
      num_units: the number of units of a whole run (at most, with `finished`).
      finished: `finished(state, records) -> bool` (`records`: one per unit done so far), for
        runs of adaptive length: stop as soon as it holds (checked once before the first unit
        and after every unit, whose checkpoint it marks complete). None: run all `num_units`.

    Returns:
      `Resumed(state, records of every unit so far, units done, seconds spent sampling over
      every session of the run)`.

    Raises:
      Interrupted: a KeyboardInterrupt arrived during a checkpointed run; every unit before the
        one in progress is in the file. Its `signal` is the interrupt's `signal` attribute
        where it has one (the `slt` command's SIGTERM), SIGINT otherwise.
    """
    state, records, done, previous_time = start
    records = list(records)
    run_time = previous_time
    clock = time.perf_counter()

    def is_complete(state, units_done):
        return (finished(state, records) if finished is not None
                else units_done == num_units)

    complete = is_complete(state, done)
    try:
        with tqdm(total=bar.total, initial=bar.position(state, done), desc=bar.description,
                  unit=bar.unit, disable=not bar.show, leave=False) as progress:
            while not complete and done < num_units:
                state, record = advance(state, done)
                records.append(record)
                done += 1
                complete = is_complete(state, done)
                progress.update(bar.position(state, done) - progress.n)
                run_time = previous_time + time.perf_counter() - clock
                store.save(state, records, units_done=done, run_time=run_time, complete=complete)
    except KeyboardInterrupt as interrupt:
        if store.path is None:
            raise
        raise Interrupted(store.path, getattr(interrupt, "signal", signal.SIGINT)) from interrupt
    return Resumed(state, records, done, run_time)
