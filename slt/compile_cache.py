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
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["MAX_PER_PROBLEM", "compiled_for", "compile_count"]

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
