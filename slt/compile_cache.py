"""Compiled programs kept per `Problem`, and released with it.

slt's samplers build their programs as closures over a Problem (its model, `unravel`,
log-likelihood) and the settings that change the program, and compile them ahead of time
(`jax.jit(...).lower(...).compile()`); the data enter as arguments. A compiled executable holds
no reference to the Python closure that built it, so the programs are kept here in a
`weakref.WeakKeyDictionary` keyed by the Problem: a Problem the user drops is collected with
its programs, while one in use compiles each program once.

Per Problem at most `MAX_PER_PROBLEM` programs are kept (the least recently used goes first):
every compiled XLA CPU program holds memory mappings of its own, and keeping all of them ran
a long benchmark session into the kernel's limit on mappings ("LLVM compilation error: Cannot
allocate memory").

**Across processes** (`enable_persistent_cache`, called when slt is imported): JAX's persistent
compilation cache (`jax_compilation_cache_dir`) keeps compiled XLA programs on disk, keyed by
the program, the jax / jaxlib versions, the flags and the device, so that a second process that
builds the same programs (the same comparison run again, `make demo` twice) loads them instead
of compiling. slt points it at `$SLT_COMPILATION_CACHE` or, by default,
`$XDG_CACHE_HOME/slt/jax` (`~/.cache/slt/jax`), and caches programs that took at least
`MIN_COMPILE_SECONDS` to compile. A user's own setting is kept: a `jax_compilation_cache_dir`
already set (in code or by `JAX_COMPILATION_CACHE_DIR`) is not changed, nor a minimum compile
time other than JAX's default; `SLT_COMPILATION_CACHE=off` leaves the cache off. The setting
is JAX's, per process: it applies to the user's own JAX programs in that process too.
Measured cold and warm in benchmarks/RESULTS.md ("Evidence in a minute").
"""

from __future__ import annotations

import collections
import os
import weakref
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["MAX_PER_PROBLEM", "compiled_for", "compile_count", "enable_persistent_cache"]

# The environment variable that names slt's cache directory, or turns it off ("off", "0").
CACHE_ENVIRONMENT = "SLT_COMPILATION_CACHE"
# Programs that compile faster than this are not written to the persistent cache: reading a
# file costs about as much as compiling a tiny program. JAX's own default is 1 s, which leaves
# out most of slt's per-model programs on a fast machine (a fit or a NUTS chunk of a small
# model compiles in 0.3-1 s and a comparison has dozens).
MIN_COMPILE_SECONDS = 0.2
_JAX_DEFAULT_MIN_COMPILE_SECONDS = 1.0

MAX_PER_PROBLEM = 16
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILATIONS = collections.Counter()


def compiled_for(problem, signature: tuple, build: Callable[[], Any]) -> tuple[Any, bool]:
    """(`build()`'s program, False) the first time `signature` is asked for with `problem`,
    then (the same program, True) while it is among the problem's most recently used.

    `signature`, a tuple, must name everything but the problem that changes the program (settings,
    argument shapes and dtypes); its first element names the program's kind, which
    `compile_count` counts by. What `build` returns must not reference the problem.
    """
    programs = _PROGRAMS.setdefault(problem, collections.OrderedDict())
    if signature in programs:
        programs.move_to_end(signature)
        return programs[signature], True
    program = build()
    programs[signature] = program
    _COMPILATIONS[signature[0]] += 1
    while len(programs) > MAX_PER_PROBLEM:
        programs.popitem(last=False)
    return program, False


def compile_count(kind: Hashable) -> int:
    """How many programs of this kind were built in this process (for recompilation tests)."""
    return _COMPILATIONS[kind]


def enable_persistent_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in slt's directory (module doc), keeping a
    user's own setting. Returns the directory in use, or None when the cache is off."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return current  # the user's
    setting = os.environ.get(CACHE_ENVIRONMENT, "").strip()
    if setting.lower() in ("off", "0", "false", "no", "none"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = setting or os.path.join(base, "slt", "jax")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile as before
    jax.config.update("jax_compilation_cache_dir", directory)
    if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_SECONDS:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return directory
