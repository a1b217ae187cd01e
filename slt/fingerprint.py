"""Digests of Python values and functions that mean the same thing in another process.

`digest(value)` is a SHA-256 hex digest of what a value computes with: numbers, strings,
arrays (dtype, shape and bytes), containers, dataclasses and named tuples field by field, and
functions by their code, defaults, closure cells and the globals they read. It is None where
the value's meaning cannot be read off it (an object of a class of the user's whose methods
could change, a module of the user's, a traced value): such a value has no digest, and whoever
keys a store by one then does not store. Two values with one digest compute the same thing
for the code of the same library versions (`environment()` digests those: the Python and
package versions, slt's own source files, JAX's configuration and devices).

Objects of slt and of the libraries it builds on (module-level functions and classes of slt,
JAX, NumPyro, NumPy, Optax, BlackJAX, SciPy and Python's standard library) are named by their
module and qualified name, since `environment()` fixes their code; a function defined inside
another (a closure: `<locals>` in its name) is digested with its closure cells too, and a
function of the user's with its code object and the globals its code reads.

An object of slt's with a `fingerprint` attribute (a `Problem`: its model, settings and data)
is digested as that.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.metadata
import os
import sys
import types
from typing import Any

import numpy as np

__all__ = ["LIBRARIES", "digest", "environment"]

# Top-level packages whose objects are named, not read: their code is fixed by `environment()`.
LIBRARIES = ("slt", "jax", "jaxlib", "numpyro", "numpy", "optax", "blackjax", "scipy",
             "flatbuffers")


class _Unreadable(Exception):
    """A value whose meaning a digest cannot capture."""


def digest(value: Any) -> str | None:
    """The SHA-256 hex digest of `value` (module doc), or None where it has none."""
    hasher = hashlib.sha256()
    try:
        _feed(hasher, value, set())
    except (_Unreadable, RecursionError):
        return None
    return hasher.hexdigest()


def environment() -> str:
    """A digest of what fixes the code a digest names: Python's version, the versions of the
    libraries in `LIBRARIES`, slt's own source files and JAX's devices (read once per process:
    slt's sources are about 1 MB), and JAX's configuration as it is now (`jax.enable_x64` and
    the other context managers included) with NumPyro's argument validation."""
    import jax
    from numpyro.distributions import Distribution

    configuration = sorted((name, repr(getattr(jax.config, name, None)))
                           for name in jax.config.values)
    configuration.append(("numpyro validation", repr(Distribution._validate_args)))
    return hashlib.sha256((_installation() + repr(configuration)).encode()).hexdigest()


@functools.cache
def _installation() -> str:
    import jax

    hasher = hashlib.sha256(sys.version.encode())
    for package in LIBRARIES[1:]:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        hasher.update(f"{package}={version};".encode())
    root = os.path.dirname(os.path.abspath(__file__))
    for folder, subfolders, files in sorted(os.walk(root)):
        subfolders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                hasher.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as source:
                    hasher.update(source.read())
    hasher.update(repr([(device.platform, device.device_kind) for device in jax.devices()])
                  .encode())
    return hasher.hexdigest()


def _feed(hasher, value: Any, visiting: set[int]) -> None:
    """Write a type tag and the content of `value` into `hasher` (raises `_Unreadable`)."""
    def tag(text: str) -> None:
        hasher.update(text.encode() + b"\0")

    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        tag(f"{type(value).__name__}:{value!r}")
        return
    if id(value) in visiting:  # a function that refers to itself, a cyclic container
        tag("cycle")
        return
    visiting.add(id(value))
    try:
        _feed_composite(hasher, value, visiting, tag)
    finally:
        visiting.discard(id(value))


def _feed_composite(hasher, value: Any, visiting: set[int], tag) -> None:
    feed = functools.partial(_feed, hasher, visiting=visiting)
    if type(value).__module__.startswith("slt.") and hasattr(value, "fingerprint"):
        fingerprint = value.fingerprint  # a Problem, and what slt derives from one
        if fingerprint is None:
            raise _Unreadable(f"a {type(value).__name__} without a fingerprint")
        tag(f"{type(value).__qualname__}:{fingerprint}")
    elif isinstance(value, enum.Enum | np.dtype | np.ufunc) or _is_library_object(value):
        tag(f"named:{_qualified_name(value)}")
    elif isinstance(value, types.FunctionType):
        _feed_function(hasher, value, visiting, tag)
    elif _is_jitted(value):  # `jax.jit(f)`: its function (its options are in the code that made it)
        tag("jitted")
        feed(value.__wrapped__)
    elif isinstance(value, types.MethodType):
        tag("method")
        feed(value.__func__)
        feed(value.__self__)
    elif isinstance(value, functools.partial):
        tag("partial")
        for part in (value.func, value.args, value.keywords):
            feed(part)
    elif type(value).__name__ == "ShapeDtypeStruct":
        tag(f"shape:{value.shape}:{value.dtype}")
    elif type(value).__name__ == "PyTreeDef":
        tag(f"treedef:{value}")
    elif type(value).__name__ == "HashablePartial":  # JAX's partial (`ravel_pytree`'s unravel)
        tag("partial")
        for part in (value.f, value.args, value.kwargs):
            feed(part)
    elif isinstance(value, np.ndarray | np.generic) or _is_jax_array(value):
        _feed_array(hasher, value, tag)
    elif isinstance(value, tuple | list):
        tag(f"{_class_name(type(value))}:{len(value)}")  # a named tuple: its class named
        for item in value:
            feed(item)
    elif isinstance(value, dict):
        tag(f"dict:{len(value)}")
        for key, item in value.items():
            feed(key)
            feed(item)
    elif isinstance(value, set | frozenset):
        parts = sorted(digest(item) or "" for item in value)
        if "" in parts:
            raise _Unreadable("a set of values without digests")
        tag(f"set:{','.join(parts)}")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        tag(f"dataclass:{_class_name(type(value))}")
        for field in dataclasses.fields(value):
            feed(field.name)
            feed(getattr(value, field.name))
    elif type(value).__module__.startswith("slt.") and hasattr(value, "__dict__"):
        tag(f"object:{_class_name(type(value))}")  # an object of slt's: its attributes
        feed(vars(value))
    else:
        raise _Unreadable(type(value).__qualname__)


def _feed_function(hasher, function: types.FunctionType, visiting: set[int], tag) -> None:
    """A library's module-level function by name; a library's nested function by name,
    defaults and closure; a user's function by its code, defaults, closure and the globals
    its code reads."""
    feed = functools.partial(_feed, hasher, visiting=visiting)
    library = _in_library(getattr(function, "__module__", None))
    tag(f"function:{function.__module__}.{function.__qualname__}")
    nested = "<locals>" in function.__qualname__ or "<lambda>" in function.__qualname__
    if library and not nested:
        return
    if not library:
        _feed_code(hasher, function.__code__, tag)
    feed(function.__defaults__)
    feed(function.__kwdefaults__)
    for cell in function.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell: a name assigned after the function was made
            tag("empty cell")
            continue
        feed(contents)
    if not library:
        for name in sorted(_global_names(function.__code__)):
            if name in function.__globals__:
                feed(name)
                feed(function.__globals__[name])


def _feed_code(hasher, code: types.CodeType, tag) -> None:
    """The code object's bytecode, names and constants, nested code objects included."""
    tag(f"code:{code.co_argcount}:{code.co_kwonlyargcount}:{code.co_flags}")
    hasher.update(code.co_code)
    tag(repr(code.co_names))
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            _feed_code(hasher, constant, tag)
        else:
            tag(f"{type(constant).__name__}:{constant!r}")


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _feed_array(hasher, value: Any, tag) -> None:
    import jax

    if isinstance(value, jax.core.Tracer):
        raise _Unreadable("a traced value")
    if _is_jax_array(value) and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        tag(f"key:{value.dtype}")
        value = jax.random.key_data(value)
    array = np.asarray(value)
    tag(f"array:{array.dtype.str}:{array.shape}")
    hasher.update(np.ascontiguousarray(array).tobytes())


def _is_jitted(value: Any) -> bool:
    return type(value).__name__ == "PjitFunction" and hasattr(value, "__wrapped__")


def _is_jax_array(value: Any) -> bool:
    import jax

    return isinstance(value, jax.Array)


def _is_library_object(value: Any) -> bool:
    """A module, or a module-level class or function (or builtin) of a library in `LIBRARIES`
    or of Python's standard library."""
    if isinstance(value, types.ModuleType):
        return _in_library(value.__name__)
    if isinstance(value, type | types.BuiltinFunctionType):
        return _in_library(getattr(value, "__module__", None)) and "<locals>" not in getattr(
            value, "__qualname__", "<locals>")
    return False


def _in_library(module: str | None) -> bool:
    top = (module or "").partition(".")[0]
    return top in LIBRARIES or top in sys.stdlib_module_names or top == "builtins"


def _qualified_name(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, enum.Enum):
        return f"{_class_name(type(value))}.{value.name}"
    if isinstance(value, np.dtype):
        return f"dtype.{value.str}"
    if isinstance(value, np.ufunc):
        return f"numpy.{value.__name__}"
    return _class_name(value)


def _class_name(kind: Any) -> str:
    """A class's module and qualified name; a user's class has no readable meaning here."""
    module, name = getattr(kind, "__module__", ""), getattr(kind, "__qualname__", "")
    if kind in (tuple, list) or (_in_library(module) and "<locals>" not in name):
        return f"{module}.{name}"
    raise _Unreadable(f"an instance of {name}, a class of the user's")
