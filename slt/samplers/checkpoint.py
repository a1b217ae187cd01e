"""Checkpoints of long sampling runs: stop with Ctrl-C or SIGTERM, resume to the same numbers.

The samplers advance in units: `run_chains` and `sample_nuts` in compiled chunks of steps,
`tempered_smc` in tempering stages. Given a checkpoint path, they write after every unit
everything needed to continue (the sampler state, what was recorded so far, the number of
units done) to that path, and on start they continue from what is there. The estimators pass
the path through (`slt.llc`, `slt.wbic`, `slt.free_energy`: argument `checkpoint`).

Resume semantics (path given):

* no file at the path: a fresh run; the file is created after the first unit;
* a file from the same run (same fingerprint, below), incomplete: the run continues after its
  last unit. Every unit's randomness depends only on the key and the unit's index (or on PRNG
  state saved in the file), and units have the same length whether the run was interrupted
  or not, so the result is **bitwise equal** to an uninterrupted run with the same key on the
  same platform (tested on CPU; on GPU as far as XLA's kernels there are deterministic);
* a complete file from the same run: the result is rebuilt from it without sampling. The file
  is kept when the run succeeds (flag `complete`); delete it to sample afresh;
* a file from another run, or not a checkpoint: `CheckpointError`, the file untouched.

The fingerprint identifies a run by the sampler's name, every setting that changes the numbers
(sizes, step sizes, temperatures, chunk length, ...), and SHA-256 digests of the data, the key
and the starting points. It cannot see code: the model or loss function and a custom prior
sampler must be the same when resuming. Preparatory work that is not checkpointed (a MAP fit,
`step_size="auto"` calibration) is repeated on resume; with the same key it gives the same
values, hence the same fingerprint.

Interrupts (`slt.samplers.runner`). A `KeyboardInterrupt` during a checkpointed run (Ctrl-C;
the `slt` command turns SIGTERM into one) raises `Interrupted`, a `KeyboardInterrupt` carrying
the path, and loses only the unit in progress; so does a hard kill (SIGKILL, power loss): writes
are atomic (`slt.results.atomic_path`), so the file always holds a complete unit boundary. The
library installs no signal handler. Without a path nothing is written.

File format: one uncompressed NumPy ``.npz`` archive (whatever the path's suffix) holding

* ``meta``: JSON text: ``format`` (1), ``fingerprint`` (dict), ``units_done``, ``complete``,
  ``run_time`` (seconds spent sampling, over all sessions), ``key_impls`` (PRNG
  implementation of each state leaf that is a typed key, by leaf index), ``num_records``;
* ``state/<i>``: leaf i of the sampler's state pytree (typed keys as their key data);
* ``record/<j>``: record j of the run so far, units concatenated along axis 1.

Cost: each write holds the whole record so far (O(draws so far) bytes, uncompressed) and is
flushed to disk. Measured on a 2-core VM with `run_chains` in 500-step chunks: 12 ms per write
(4 chains, file 0.6 MB at the end) and 17 ms (8 chains x 20000 steps, 5 MB), mostly the fsync
and the file replacement. Against chunks that do real work that is noise; on toy problems,
whose chunks take milliseconds, it can exceed the sampling itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt.problem import Problem
from slt.results import atomic_path

__all__ = ["Checkpoint", "CheckpointError", "Interrupted", "Resumed", "join_records"]

# 2: an observing run's records hold its summaries per chunk (slt.samplers.local_chains).
FORMAT = 2

Records = tuple[np.ndarray, ...]


class CheckpointError(ValueError):
    """The file at a checkpoint path belongs to another run or is not a readable checkpoint."""


class Interrupted(KeyboardInterrupt):
    """A checkpointed run stopped on a KeyboardInterrupt (SIGINT, or the `slt` command's
    SIGTERM); every unit before the one in progress is saved.

    Attributes:
      path: the checkpoint file; the same call with the same arguments resumes from it.
      signal: the number of the signal received.
    """

    def __init__(self, path: Path, signum: int):
        super().__init__(
            f"{signal.Signals(signum).name} received: progress saved in {str(path)!r}; "
            f"call again with the same arguments to resume"
        )
        self.path = path
        self.signal = signum


class Resumed(NamedTuple):
    """Where a run starts: the saved progress, or nothing done.

    state: the sampler state to continue from (the template given when nothing was saved).
    chunks: records so far, a list of tuples of arrays (empty when nothing was saved).
    units_done: units (chunks, stages) completed.
    run_time: seconds spent sampling so far.
    """

    state: Any
    chunks: list[Records]
    units_done: int
    run_time: float


def join_records(chunks: Sequence[Records]) -> Records:
    """Concatenate per-unit records, tuples of (chain, step, ...) arrays, along axis 1."""
    return tuple(np.concatenate(parts, axis=1) for parts in zip(*chunks, strict=True))


class Checkpoint:
    """The checkpoint of one sampler run at `path` (None: checkpointing off); see module doc.

    Args:
      path: the file, or None. Its directory must exist.
      sampler: the sampler's name, part of the fingerprint.
      **identity: what identifies the run: a `Problem` (its n, dim, dtype, site names and a
        digest of its data), None, a str, bool, int or float (kept as is), or any pytree of
        arrays or PRNG keys (a SHA-256 digest of its structure, dtypes, shapes and bytes).

    Raises:
      FileNotFoundError: the directory of `path` does not exist (checked before any work).

    Example:
      >>> import tempfile, pathlib
      >>> folder = tempfile.TemporaryDirectory()     # removed when `folder` is
      >>> path = pathlib.Path(folder.name) / "run.npz"
      >>> def run(num_units, stop_after):   # `slt.samplers.runner.run_units` does this
      ...     store = Checkpoint(path, "counter", problem=problem, key=key, num_units=num_units)
      ...     state, chunks, done, run_time = store.resume(jnp.zeros(2))  # template state
      ...     for unit in range(done, min(num_units, stop_after)):
      ...         state = state + 1.0                        # one unit of work
      ...         chunks.append((np.full((2, 1), unit),))    # its records, (chain, step)
      ...         store.save(state, chunks, units_done=unit + 1, run_time=0.0,
      ...                    complete=unit + 1 == num_units)
      ...     return state, done
      >>> run(num_units=3, stop_after=2)          # (state, units done before): stopped after 2
      (Array([2., 2.], dtype=float64), 0)
      >>> run(num_units=3, stop_after=3)          # resumes at the third unit
      (Array([3., 3.], dtype=float64), 2)
    """

    def __init__(self, path: str | os.PathLike | None, sampler: str, **identity):
        self.path = None if path is None else Path(path)
        self._fingerprint = None
        if self.path is not None:
            if not self.path.parent.is_dir():
                raise FileNotFoundError(
                    f"checkpoint {str(self.path)!r}: directory {str(self.path.parent)!r} does "
                    f"not exist"
                )
            described = {"sampler": sampler} | {k: _describe(v) for k, v in identity.items()}
            self._fingerprint = json.loads(json.dumps(described))

    def resume(self, template) -> Resumed:
        """The saved progress, its state shaped like `template`; or `template` with nothing done.

        Raises:
          CheckpointError: the file is not a readable checkpoint, was written by another run
            (the message names the settings that differ), or its state does not fit
            `template`.
        """
        if self.path is None or not self.path.exists():
            return Resumed(template, [], 0, 0.0)
        try:
            with np.load(self.path, allow_pickle=False) as archive:
                meta = json.loads(str(archive["meta"]))
                arrays = {name: archive[name] for name in archive.files}
            if meta["format"] != FORMAT:
                raise ValueError(f"format {meta['format']}, expected {FORMAT}")
            stored = meta["fingerprint"]
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
            raise CheckpointError(
                f"{str(self.path)!r} is not a readable slt checkpoint ({error}); delete it or "
                f"pass another path"
            ) from error
        differ = sorted(
            name for name in stored.keys() | self._fingerprint.keys()
            if json.dumps(stored.get(name)) != json.dumps(self._fingerprint.get(name))
        )
        if differ:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} was written by a different run (it differs in: "
                f"{', '.join(differ)}); delete it to start afresh or pass another path"
            )
        leaves, structure = jax.tree.flatten(template)
        restored = []
        for index, leaf in enumerate(leaves):
            value = arrays.get(f"state/{index}")
            impl = meta["key_impls"].get(str(index))
            value = None if value is None else (
                jax.random.wrap_key_data(value, impl=impl) if impl else jnp.asarray(value)
            )
            if value is None or value.shape != leaf.shape or value.dtype != leaf.dtype:
                raise CheckpointError(
                    f"checkpoint {str(self.path)!r}: state leaf {index} does not fit this run "
                    f"(expected {leaf.dtype}{list(leaf.shape)}); delete it or pass another path"
                )
            restored.append(value)
        records = tuple(arrays[f"record/{i}"] for i in range(meta["num_records"]))
        return Resumed(
            structure.unflatten(restored),
            [records] if records else [],
            int(meta["units_done"]),
            float(meta["run_time"]),
        )

    def save(self, state, chunks: Sequence[Records], *, units_done: int, run_time: float,
             complete: bool) -> None:
        """Write the run's progress atomically (nothing without a path)."""
        if self.path is None:
            return
        arrays, key_impls = {}, {}
        for index, leaf in enumerate(jax.tree.leaves(state)):
            if _is_key(leaf):
                key_impls[str(index)] = str(jax.random.key_impl(leaf))
                leaf = jax.random.key_data(leaf)
            arrays[f"state/{index}"] = np.asarray(leaf)
        records = join_records(chunks) if chunks else ()
        arrays.update({f"record/{index}": record for index, record in enumerate(records)})
        meta = {
            "format": FORMAT, "fingerprint": self._fingerprint, "units_done": int(units_done),
            "complete": bool(complete), "run_time": float(run_time), "key_impls": key_impls,
            "num_records": len(records),
        }
        with atomic_path(self.path, overwrite=True) as temporary, open(temporary, "wb") as file:
            np.savez(file, meta=np.asarray(json.dumps(meta)), **arrays)


def _describe(value) -> Any:
    """A JSON-able description of `value` for the fingerprint (see `Checkpoint`)."""
    if isinstance(value, Problem):
        return {
            "n": value.n, "dim": value.dim, "dtype": str(value.dtype),
            "sites": list(value.site_names), "data": _digest(value.data),
        }
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return _digest(value)


def _digest(tree) -> str:
    """SHA-256 (first 16 hex digits) of a pytree's structure, and its leaves' dtypes, shapes
    and bytes (typed PRNG keys by implementation and key data)."""
    digest = hashlib.sha256(str(jax.tree.structure(tree)).encode())
    for leaf in jax.tree.leaves(tree):
        if _is_key(leaf):
            digest.update(str(jax.random.key_impl(leaf)).encode())
            leaf = jax.random.key_data(leaf)
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{leaf.dtype}{leaf.shape}".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()[:16]


def _is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
