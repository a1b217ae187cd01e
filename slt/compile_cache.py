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

**Traced once** (`program_for`): JAX keys its cache by the lowered program, so a second
process still traces and lowers every program before it can load it (a warm `compare` of Old
Faithful K = 1...4: about 9 s of its 29). With the cache on, the programs that `program_for`
builds (the MAP fit, Laplace's derivatives, NUTS, the importance-sampling path) are also kept
traced, as serialized `jax.export.Exported` modules in the cache's `slt-traced/` folder,
keyed by a digest of what they compute (`slt.fingerprint`: the function's code and closure,
the problem's model, settings and data, the arguments' shapes, the library versions and
slt's own sources). A problem whose model's meaning cannot be read off it (a class of the
user's; a problem built from a loss) is traced as usual. The key names slt's functions by
module and name: slt's code patched at run time is not seen (a test that patches a function
these programs trace must turn the cache off). A stored program keyed by a problem's data is
not shared between data sets of one shape: programs that do not close over the data could
be, once that is shown for each.

**How quickly** (`compile_quickly`): on a CPU the programs of the MAP fit and of the evidence
path (NUTS, the importance weights and draws) are compiled with `QUICK_COMPILE`, LLVM at
optimisation level 1 without its expensive passes: in a comparison they compile for longer
than they run, and their code runs as fast (the measurements are in the comment at
`QUICK_COMPILE`). Programs that run once or a few times (Laplace's Hessian, a problem's
initial-point check, NUTS's initialisation, the proposals' draws) are compiled with
`BRIEF_COMPILE`, XLA's older CPU fusion emitters too, which compile faster and run slower.
"""

from __future__ import annotations

import collections
import os
import pickle
import weakref
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["BRIEF_COMPILE", "MAX_PER_PROBLEM", "QUICK_COMPILE", "compiled_for", "compile_count",
           "compile_quickly", "enable_persistent_cache", "program_for", "slt_cache_directory",
           "stored_program_count"]

# The environment variable that names slt's cache directory, or turns it off ("off", "0").
CACHE_ENVIRONMENT = "SLT_COMPILATION_CACHE"
# Programs that compile faster than this are not written to the persistent cache. JAX's own
# default is 1 s, which leaves out most of slt's per-model programs (a fit or a NUTS chunk of a
# small model compiles in 0.3-1 s) and every small one (an eager reshape, a key split: 0.01-0.3 s
# each, about 170 in a comparison). Cached, all of them load for less than they compile: a warm
# `compare` of Old Faithful K = 1...4 spent 8.5 s compiling and 2.4 s loading with a 0.2 s
# minimum, 3.0 s and 2.8 s with none (benchmarks/RESULTS.md, "Every program cached"); the cache
# grew 3.7 -> 4.6 MB.
MIN_COMPILE_SECONDS = 0.0
_JAX_DEFAULT_MIN_COMPILE_SECONDS = 1.0

# XLA options for the MAP fit's and the evidence path's programs on a CPU (`compile_quickly`):
# LLVM at optimisation level 1, without its expensive passes, as the test suite compiles
# everything. In a comparison they compile for longer than they run: XLA's compile of
# `compare`'s 250 programs (Old Faithful K = 1...4, cold) 49.2 -> 44.8 s, while NUTS's leapfrog
# steps run as fast (K = 4: 44 against 45 ms per draw of 4 chains) and so does a long fit
# (`fit_map` of a 4-32-1 network at n = 20 000: 65-67 s against 70-80 s); benchmarks/RESULTS.md,
# "Random draws drawn flat". The local chains keep XLA's defaults.
QUICK_COMPILE = {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True}
# For a program that runs briefly (once or a few times: a Hessian, a check, a batch of draws),
# XLA's older CPU fusion emitters too: they compile about a third faster and emit slower code.
# Measured on `compare` of Old Faithful K = 1...4 with them on every quickly compiled program:
# XLA's compile of the Laplace Hessians 4.0 -> 2.2 s, of the MAP fits 7.8 -> 5.0 s, but NUTS's
# chains ran twice as long (10.7 -> 22.8 s, warm), hence only for the brief ones.
BRIEF_COMPILE = QUICK_COMPILE | {"xla_cpu_use_fusion_emitters": False}

_BRIEF_ACCEPTED = [True]  # whether this XLA took BRIEF_COMPILE (False after it refused)
MAX_PER_PROBLEM = 16
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILATIONS = collections.Counter()
# The traced programs' store, in the persistent cache's directory: one serialized
# `jax.export.Exported` a file (10-75 kB; 1.4 MB for a comparison of K = 1...4), named by its
# key, pickled with its outputs' tree structure.
TRACED_FOLDER = "slt-traced"
# The store's size limit: past it, the programs least recently stored or loaded are removed
# until it holds three quarters of it. Its keys include the data (`Problem.fingerprint`), so
# a study over many data sets of one shape adds about 1.4 MB per comparison of K = 1...4.
MAX_TRACED_BYTES = 256 * 2**20
_STORE_USE = collections.Counter()  # "loaded", "stored", "unkeyed" (`stored_program_count`)


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


def program_for(problem, signature: tuple, function: Callable, *args: Any,
                compile: str = "quick", keep: bool = True, traced_from: Any = None) -> Any:
    """`jax.jit(function)` compiled for `args`' shapes, kept per problem (`compiled_for`, whose
    contract `signature` keeps) and, for a problem with a `fingerprint`, traced once across
    processes: with the persistent cache on, the program JAX traced and lowered is stored as
    a serialized `jax.export.Exported` in `<cache>/slt-traced/`, keyed by the digests of
    `function` (its code and closure: the problem, the settings), `signature`, the arguments'
    shapes and dtypes and `slt.fingerprint.environment()` (versions, slt's sources, JAX's
    configuration); a later process loads it instead of tracing `function` again, and the
    compiled program from JAX's cache. Where `function` has no digest (a model of the user's
    whose meaning cannot be read, a problem built from a loss) or JAX cannot export it, it
    is traced as usual.

    `compile`: "quick" (`compile_quickly`), "brief" (`compile_quickly(brief=True)`) or
    "default" (XLA's defaults). `keep=False` for a program run once (it is not kept in memory).
    `traced_from`: what `function` is made from, digested in its place, for a function whose
    closure another library's tracing changes (NumPyro's NUTS kernels configure theirs when
    their initialisation is traced: a digest of them would differ between a process that
    traced it and one that loaded it).
    """
    import jax

    def build():
        path = _stored_path(problem, signature,
                            function if traced_from is None else traced_from, args)
        program = None if path is None else _stored_program(path, function, args, compile)
        if program is None:
            _STORE_USE["unkeyed"] += 1
            program = _compiled(jax.jit(function).lower(*args), compile)
        return program

    return compiled_for(problem, signature, build)[0] if keep else build()


def stored_program_count(what: str) -> int:
    """How many programs this process "loaded" from the traced store, "stored" in it, or
    traced "unkeyed" (no digest, the cache off, or a program JAX cannot export), for tests."""
    return _STORE_USE[what]


class _Unflattened:
    """A compiled program of the arguments' leaves, called with (and returning) the pytrees:
    the form in which programs are stored (`jax.export` serializes lists of arrays; a NamedTuple
    state would need registering). `out_info`: the outputs' shapes and dtypes, as a pytree."""

    def __init__(self, compiled, out_tree):
        self._compiled, self._out_tree = compiled, out_tree

    def __call__(self, *args):
        import jax

        return jax.tree_util.tree_unflatten(
            self._out_tree, self._compiled(*jax.tree_util.tree_leaves(args)))

    @property
    def out_info(self):
        import jax

        return jax.tree_util.tree_unflatten(self._out_tree, self._compiled.out_info)


def _compiled(lowered, compile: str):
    if compile == "default":
        return lowered.compile()
    return compile_quickly(lowered, brief=compile == "brief")


def _from_serialized(serialized: bytes, out_tree, leaves: list, compile: str) -> _Unflattened:
    """The compiled program of a serialized `jax.export.Exported`, for these leaves."""
    import jax

    exported = jax.export.deserialize(bytearray(serialized))
    return _Unflattened(_compiled(jax.jit(exported.call).lower(*leaves), compile), out_tree)


def _stored_program(path: str, function: Callable, args: tuple,
                    compile: str) -> _Unflattened | None:
    """The program from the traced store's file `path`, or traced, exported and stored there;
    None where JAX cannot export it."""
    import jax

    leaves, in_tree = jax.tree_util.tree_flatten(args)
    try:
        with open(path, "rb") as stored:
            out_tree, serialized = pickle.load(stored)
        os.utime(path)  # recently used: the last to go when the store is trimmed
        program = _from_serialized(serialized, out_tree, leaves, compile)
        _STORE_USE["loaded"] += 1
        return program
    except Exception:  # noqa: BLE001 - absent, unreadable or from another JAX: trace it
        pass
    out_trees = []

    def of_leaves(*leaves):
        out, out_tree = jax.tree_util.tree_flatten(
            function(*jax.tree_util.tree_unflatten(in_tree, leaves)))
        out_trees.append(out_tree)
        return out

    try:
        serialized = jax.export.export(jax.jit(of_leaves))(*leaves).serialize()
    except Exception:  # noqa: BLE001 - a program JAX cannot export (a host callback)
        return None
    stored = pickle.dumps((out_trees[0], serialized))
    partial = f"{path}.{os.getpid()}.part"
    try:
        with open(partial, "wb") as file:
            file.write(stored)
        os.replace(partial, path)  # whole or not at all, for processes side by side
        _STORE_USE["stored"] += 1
        _trim(os.path.dirname(path))
    except OSError:
        pass  # a full or read-only disk: the program is still right
    # called as loaded: the exported object holds the traced function (and the problem's
    # arrays through it), and JAX keeps what it calls in a cache
    return _from_serialized(serialized, out_trees[0], leaves, compile)


def _trim(folder: str) -> None:
    """Keep the traced store within `MAX_TRACED_BYTES`: past it, remove the files least
    recently stored or loaded until it holds three quarters of the limit."""
    files = []
    for entry in os.scandir(folder):
        try:
            status = entry.stat()
        except OSError:
            continue  # removed meanwhile by another process
        files.append((status.st_mtime, status.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    if total <= MAX_TRACED_BYTES:
        return
    for _, size, path in sorted(files):
        if total <= 0.75 * MAX_TRACED_BYTES:
            break
        try:
            os.remove(path)
        except OSError:
            pass
        total -= size


def _stored_path(problem, signature, source, args) -> str | None:
    """The file of this program in the traced store, or None (no store, no digest); `source`,
    the function or what it is made from."""
    import jax

    from slt import fingerprint

    directory = jax.config.jax_compilation_cache_dir
    if not directory or "://" in directory or getattr(problem, "fingerprint", None) is None:
        return None
    settings = fingerprint.digest(signature) or repr(signature)
    if " at 0x" in settings:  # an object named by its address: the key of one process only
        return None
    shapes = [str(jax.typeof(leaf)) for leaf in jax.tree_util.tree_leaves(args)]
    key = fingerprint.digest((fingerprint.environment(), source, settings,
                              str(jax.tree_util.tree_structure(args)), shapes))
    if key is None:
        return None
    folder = os.path.join(directory, TRACED_FOLDER)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return os.path.join(folder, key)


def compile_quickly(lowered, *, brief: bool = False) -> Any:
    """`lowered.compile()` (a `jax.stages.Lowered`) with `QUICK_COMPILE` on a CPU, or
    `BRIEF_COMPILE` for a program that runs briefly (`brief=True`; where this XLA lacks the
    older emitters' option, `QUICK_COMPILE`); XLA's defaults on an accelerator, whose code
    generation these options would slow."""
    import jax

    if jax.default_backend() != "cpu":
        return lowered.compile()
    if brief and _BRIEF_ACCEPTED[0]:
        try:
            return lowered.compile(compiler_options=BRIEF_COMPILE)
        except Exception:  # noqa: BLE001 - an XLA without the option: never ask again
            _BRIEF_ACCEPTED[0] = False
    return lowered.compile(compiler_options=QUICK_COMPILE)


def compile_count(kind: Hashable) -> int:
    """How many programs of this kind were built in this process (for recompilation tests)."""
    return _COMPILATIONS[kind]


def slt_cache_directory() -> str | None:
    """slt's own cache directory: `$SLT_COMPILATION_CACHE`, else `$XDG_CACHE_HOME/slt/jax`
    (`~/.cache/slt/jax`); None when `SLT_COMPILATION_CACHE` turns the cache off. (The
    directory in use is JAX's `jax_compilation_cache_dir`, which a user may have set.)"""
    setting = os.environ.get(CACHE_ENVIRONMENT, "").strip()
    if setting.lower() in ("off", "0", "false", "no", "none"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return setting or os.path.join(base, "slt", "jax")


def enable_persistent_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in slt's directory (module doc), keeping a
    user's own setting. Returns the directory in use, or None when the cache is off."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return current  # the user's
    directory = slt_cache_directory()
    if directory is None:
        return None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile as before
    jax.config.update("jax_compilation_cache_dir", directory)
    if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_SECONDS:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return directory
