"""The `slt` command's signal handling: SIGTERM stops a run the way Ctrl-C does.

The library installs no signal handler (`slt.samplers.runner`): a `KeyboardInterrupt` during
a checkpointed run raises `slt.Interrupted` with every finished unit saved. A process manager
(a batch scheduler, `timeout`, `kill`) sends SIGTERM, whose default action ends the process at
once; while a command runs, `sigterm_as_interrupt` turns it into `Terminated`, a
`KeyboardInterrupt`, so a terminated run ends like an interrupted one: outputs are not left
half-written (`slt.results.atomic_path`), checkpoints name their file, the exit status is 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["Terminated", "sigterm_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM received while a command ran (`signal` names it for `slt.Interrupted`)."""

    signal = signal.SIGTERM


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While active (in the main thread, where Python delivers signals), SIGTERM raises
    `Terminated`; the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(f"{signal.Signals(signum).name} received")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
