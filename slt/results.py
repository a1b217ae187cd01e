"""The result protocol, result persistence, and atomic file writes.

The protocol
------------
Every result type (a frozen dataclass deriving from `Persistable`) has ``summary()`` (a pandas
DataFrame), ``plot()`` (a matplotlib Figure or Axes, drawn by `slt.plots`), ``to_xarray()`` (an
xarray Dataset of its numbers: arrays with named dims, scalars as attributes or 0-d
variables), and ``save(path)`` / ``load(path)`` (below); the types that hold posterior draws
(`LLCResult`, `WBICResult`, `RLCTResult`) also have ``to_inference_data()`` (ArviZ).
tests/test_results.py checks all of it for every type. `point_variables` turns a parameter
point into Dataset variables, named as the sites of the results' InferenceData.

Atomic writes
-------------
`atomic_path(path)` yields a temporary path in the same directory as ``path``; the caller writes
there, and only when the block finishes without an exception is the temporary moved onto
``path`` with `os.replace` (atomic on POSIX and Windows within one file system). On any exception,
``KeyboardInterrupt`` included, the temporary is removed and ``path`` is left as it was: there is
never a half-written output file. An existing ``path`` is refused with `FileExistsError` unless
``overwrite=True``. `atomic_write(path, write_fn)` is the same as a function call.

Example::

    with atomic_path("table.csv") as tmp:
        frame.to_csv(tmp)

File format
-----------
`save(result, path)` writes one NetCDF-4 file (HDF5, xarray's "h5netcdf" engine; ``.nc`` is
the customary suffix), atomically. Its root group holds

* the attributes ``slt_format = "slt-result"``, ``slt_format_version`` (`FORMAT_VERSION`) and
  ``slt_class`` (the result's class, e.g. ``"slt.estimators.local.llc:LLCResult"``);
* ``slt_manifest``, a string variable: a JSON tree mirroring the result's fields. Python
  ``None``, ``bool``, ``int``, ``float`` (NaN and infinities included) and ``str`` are stored
  in it as they are; every other value is a JSON object whose ``"type"`` names how to rebuild
  it (numpy scalar, array, tuple, list, dict with string keys, `fractions.Fraction`, nested
  result dataclass or NamedTuple, pandas DataFrame, ArviZ `ELPDData`, xarray Dataset /
  DataArray, ArviZ InferenceData);
* the numeric and boolean arrays packed by dtype: one flat variable per dtype
  (``slt_buffer.float64``, ``slt_buffer.int32``, ...) holding every array of that dtype one
  after another, each array's manifest entry giving its variable, offset and shape. NetCDF
  costs time per variable, growing with how many the file holds (a variable per array made a
  trajectory of 8 parts x 10 checkpoints, 409 arrays, take 4.6 s to save and 12 s to load),
  so a result of thousands of arrays saves and loads as fast as one of a few. String arrays
  are one variable each, named after their field path (e.g. ``run.names``) with dimensions
  ``<name>#0``, ``<name>#1``, ..., as every array was before format version 4 (such files
  load as before). Arrays keep their dtype (bool, integer, float, str) and shape exactly;
  JAX arrays load as JAX arrays.
* checksums: the CRC-32 of every array (its values and shape) in its manifest entry, of every
  subgroup variable in the subgroup's entry, and of the manifest in the root attribute
  ``slt_manifest_crc32``. `load` verifies them, so a file whose data bytes were overwritten
  is refused (HDF5 itself catches damage to its headers and truncation, not to data).

xarray Datasets and DataArrays go to subgroups named after their field path, one subgroup per
InferenceData group (``<path>.posterior``, ...), so any NetCDF reader can open them; their
attributes are kept in the manifest (NetCDF attributes cannot hold booleans or None, and
xarray reinterprets some names, such as "coordinates", when reading). A result
is rebuilt by calling its constructor with the stored fields (fields declared ``init=False``
are not stored: the constructor recomputes them), so a class that gains a field with a
default still loads older files, and a file written before a field was renamed loads with
its old field names mapped to the new ones (`RENAMED_FIELDS`), and one written before a
class's module moved loads from its new module (`MOVED_MODULES`). An object shared between
several places (the WBIC run that `compare` reuses from the RLCT run) is stored once and is
shared again after loading.

`load(path)` reads any such file and returns the result; ``ResultClass.load(path)`` also
checks the class. A file that is not NetCDF, a NetCDF file written by something else, or one
written by a newer format version raises `ValueError` saying so; an object of a type not
listed above raises `TypeError` at `save`, before anything is written.

Example::

    result = slt.llc(problem, w_star, key)
    result.save("llc.nc")
    again = LLCResult.load("llc.nc")
    assert repr(again) == repr(result)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import re
import secrets
import shutil
import zlib
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

__all__ = [
    "FORMAT_VERSION",
    "MOVED_MODULES",
    "Persistable",
    "RENAMED_FIELDS",
    "atomic_path",
    "atomic_write",
    "leaf_name",
    "load",
    "point_variables",
    "save",
    "warnings_note",
]

FORMAT = "slt-result"
# Version 1: the layout described in the module docstring. Version 2: the same layout, with
# the result fields renamed to the one vocabulary of docs/glossary.md (`RENAMED_FIELDS`).
# Version 3: FisherResult's standard_error and num_samples renamed std_error and num_draws.
# Version 4: the numeric and boolean arrays packed into one flat variable per dtype (module
# docstring); earlier files, one variable per array, load as before.
# Raise it when a change would make older readers misread a file; a reader refuses versions
# above its own.
FORMAT_VERSION = 4
# Fields renamed by a format version: {version: {class: {old name: new name}}}, the classes
# under their current names (`MOVED_MODULES` applied). A record (dataclass or NamedTuple) in a
# file written before that version has its old names mapped to the new ones when it is
# decoded; the renames of later versions then apply in turn.
RENAMED_FIELDS: dict[int, dict[str, dict[str, str]]] = {
    2: {
        "slt.estimators.local.llc:LLCResult": {"llc_std_error": "std_error",
                                         "num_burnin": "num_warmup"},
        "slt.estimators.evidence.bic:BICResult": {"num_params": "dim"},
        "slt.estimators.evidence.rlct:RLCTResult": {
            "num_params": "dim", "two_temperature_se": "two_temperature_std_error",
            "expected_nll_se": "expected_nll_std_error",
            "singular_bic_se": "singular_bic_std_error",
        },
        "slt.estimators.evidence.sbic:SBICResult": {"num_params": "dims"},
        "slt.fit.natural_gradient:NaturalGradientResult": {"compile_seconds": "compile_time",
                                                           "seconds": "run_time"},
        "slt.geometry.scan:FisherScan": {"seconds": "run_time"},
        "slt.samplers.importance:ImportanceRun": {"num_draws": "num_samples"},
    },
    3: {
        "slt.geometry.fisher:FisherResult": {"standard_error": "std_error",
                                             "num_samples": "num_draws"},
    },
}
# Modules whose classes moved, {old module: new module}. A file names each class by the module
# that defined it when the file was written ("module:qualname", `_class_name`); a file written
# before a move names the old module, and is read as naming the new one. The moves needed no
# new format version: the stored fields are the same.
MOVED_MODULES: dict[str, str] = {
    # issue 34: slt/fit.py and slt/natural_gradient.py became the package slt.fit, and
    # slt/truth.py the package slt.truth (the old names still import, but a class's name is
    # its defining module's: one name per class for RENAMED_FIELDS).
    "slt.fit": "slt.fit.map",
    "slt.natural_gradient": "slt.fit.natural_gradient",
    "slt.truth": "slt.truth.learning_coefficients",
    # issue 34: the estimators' two families, a folder each
    "slt.estimators.bif": "slt.estimators.local.bif",
    "slt.estimators.llc": "slt.estimators.local.llc",
    "slt.estimators.llc_calibration": "slt.estimators.local.calibration",
    "slt.estimators.llc_parts": "slt.estimators.local.parts",
    "slt.estimators.llc_trajectory": "slt.estimators.local.trajectory",
    "slt.estimators.local_run": "slt.estimators.local.posterior",
    "slt.estimators.loss_kernel": "slt.estimators.local.loss_kernel",
    "slt.estimators.observed": "slt.estimators.local.observed",
    "slt.estimators.susceptibilities": "slt.estimators.local.susceptibilities",
    "slt.estimators.bic": "slt.estimators.evidence.bic",
    "slt.estimators.compare": "slt.estimators.evidence.compare",
    "slt.estimators.free_energy": "slt.estimators.evidence.free_energy",
    "slt.estimators.laplace": "slt.estimators.evidence.laplace",
    "slt.estimators.rlct": "slt.estimators.evidence.rlct",
    "slt.estimators.sbic": "slt.estimators.evidence.sbic",
    "slt.estimators.wbic": "slt.estimators.evidence.wbic",
}
ENGINE = "h5netcdf"  # NetCDF-4: groups, int64 and variable-length strings (NetCDF-3 has none)
MANIFEST = "slt_manifest"
# The root attribute holding the manifest's CRC-32 (every array's is in the manifest).
MANIFEST_CHECKSUM = "slt_manifest_crc32"
DATAARRAY_VARIABLE = "__xarray_dataarray_variable__"  # xarray's own name for a lone DataArray
# numpy dtype kinds stored as arrays: bool, signed / unsigned integer, float, str; object
# arrays are accepted when every element is a str.
_ARRAY_KINDS = "biufUO"


def _refuse_existing(path: Path) -> None:
    if path.exists():
        raise FileExistsError(
            f"{str(path)!r} already exists; refusing to overwrite it "
            "(pass overwrite=True, or --force on the command line, to replace it)"
        )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` only if the block succeeds.

    The temporary is named ``.<name>.<random hex>.tmp<suffix>`` in the directory of ``path``
    (same file system, so the final `os.replace` is atomic; the original suffix is kept so that
    writers choosing a format by extension still work). It does not exist when yielded. After
    the block, a regular file written there is flushed to disk (``fsync``) and renamed onto
    ``path``. If the block raises anything, ``KeyboardInterrupt`` and ``SystemExit`` included,
    whatever was written at the temporary (file or directory) is removed and the exception
    propagates; ``path`` is untouched.

    Args:
      path: destination file. Its directory must exist.
      overwrite: replace an existing ``path``. When False, an existing ``path`` raises
        `FileExistsError`, checked both before the block (fail before any expensive work) and
        again just before the rename.

    Yields:
      The temporary `pathlib.Path` to write to.

    Raises:
      FileExistsError: ``path`` exists and ``overwrite`` is False.
      FileNotFoundError: the directory of ``path`` does not exist.
      RuntimeError: the block finished without writing the temporary.
    """
    path = Path(path)
    if not overwrite:
        _refuse_existing(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {str(path)!r}: directory {str(path.parent)!r} "
                                "does not exist")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp{path.suffix}")
    try:
        yield tmp
        if not tmp.exists():
            raise RuntimeError(f"nothing was written for {str(path)!r}")
        if tmp.is_file():
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if not overwrite:
            _refuse_existing(path)
        os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def atomic_write(
    path: str | os.PathLike, write_fn: Callable[[Path], object], *, overwrite: bool = False
) -> Path:
    """Call ``write_fn(tmp)`` on a temporary path and move the result onto ``path`` atomically.

    Same guarantees as `atomic_path`: ``path`` either receives the complete output or is left
    as it was; no temporary survives an exception (``KeyboardInterrupt`` included).

    Args:
      path: destination file.
      write_fn: writes the output to the path it is given (e.g. ``lambda p: ds.to_netcdf(p)``).
      overwrite: replace an existing ``path`` instead of raising `FileExistsError`.

    Returns:
      ``path`` as a `pathlib.Path`.

    Example::

        atomic_write("fig.png", lambda tmp: fig.savefig(tmp), overwrite=force)
    """
    with atomic_path(path, overwrite=overwrite) as tmp:
        write_fn(tmp)
    return Path(path)


def leaf_name(path) -> str:
    """A site name from a pytree path: "w" for {"w": ...}, "layers.0.kernel" when nested."""
    parts = []
    for entry in path:
        for attribute in ("key", "idx", "name"):
            if hasattr(entry, attribute):
                parts.append(str(getattr(entry, attribute)))
                break
    return ".".join(parts) or "params"


def point_variables(values: Any) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """One parameter point's site values as xarray variables, for a result's `to_xarray`.

    Args:
      values: a pytree of arrays, e.g. the constrained values ``{"w": (2,) array}``.

    Returns:
      ``{name: (dims, array)}``, one entry per leaf, named as in the "posterior" group of the
      results' InferenceData (`leaf_name`: "w", "layers.0.kernel"); dims follow ArviZ's
      convention, ``"<name>_dim_0"``, ``"<name>_dim_1"``, ... (none for a scalar site).
    """
    variables = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(values)[0]:
        name, array = leaf_name(path), np.asarray(leaf)
        variables[name] = (tuple(f"{name}_dim_{i}" for i in range(array.ndim)), array)
    return variables


def warnings_note(warnings) -> str:
    """What a result's repr says of its warnings: ", N warning(s)", or nothing without any."""
    return f", {len(warnings)} warning(s)" if warnings else ""


class Persistable:
    """Mixin giving a result dataclass `save` and `load` (the format: `slt.results`)."""

    __slots__ = ()

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write this result to ``path`` (NetCDF-4, conventionally ``.nc``), atomically.

        Raises:
          FileExistsError: ``path`` exists and ``overwrite`` is False.
          TypeError: a field holds an object the format cannot store (nothing is written).
        """
        return save(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike):
        """Read a result of this class written by `save`.

        Raises:
          TypeError: the file holds a result of another class.
          ValueError: not an slt result file, or one from a newer format version.
        """
        result = load(path)
        if not isinstance(result, cls):
            raise TypeError(
                f"{str(path)!r} holds a {type(result).__name__}, not a {cls.__name__} "
                "(slt.results.load reads a result of any class)"
            )
        return result


def save(result: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a result dataclass to one NetCDF-4 file, atomically (format: module docstring).

    Args:
      result: an instance of a result dataclass (`LLCResult`, `ComparisonResult`, ...).
      path: the file to write; its directory must exist.
      overwrite: replace an existing file instead of raising `FileExistsError`.

    Returns:
      ``path`` as a `pathlib.Path`.

    Raises:
      TypeError: ``result`` is not a dataclass instance, or one of its fields holds an object
        of a type the format cannot store (the message names the field); nothing is written.
      FileExistsError: ``path`` exists and ``overwrite`` is False.

    Example:
      >>> import tempfile, pathlib
      >>> folder = tempfile.TemporaryDirectory()     # removed when `folder` is
      >>> spec = slt.models.fixed_component_mixture()
      >>> fisher = slt.fisher_information(spec, {"pi": 0.5, "mu": 0.0, "sigma": 1.0})
      >>> path = slt.results.save(fisher, pathlib.Path(folder.name) / "fisher.nc")
      >>> loaded = slt.results.load(path)
      >>> type(loaded).__name__, loaded.rank, bool(np.array_equal(loaded.matrix, fisher.matrix))
      ('FisherResult', 2, True)
    """
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"save takes a result dataclass instance, got {type(result).__name__}")
    encoder = _Encoder()
    manifest = encoder.encode(result, "")
    root = xr.Dataset(
        {**encoder.variables(), MANIFEST: xr.Variable((), json.dumps(manifest))},
        attrs={"slt_format": FORMAT, "slt_format_version": FORMAT_VERSION,
               "slt_class": _class_name(type(result)),
               MANIFEST_CHECKSUM: _checksum(json.dumps(manifest))},
    )

    def write(tmp: Path) -> None:
        root.to_netcdf(tmp, engine=ENGINE)
        for group, dataset in encoder.groups.items():
            dataset.to_netcdf(tmp, engine=ENGINE, mode="a", group=group)

    return atomic_write(path, write, overwrite=overwrite)


def load(path: str | os.PathLike) -> Any:
    """Read a result written by `save` and rebuild it (its class is recorded in the file).

    Args:
      path: a file written by `save`.

    Returns:
      The result, equal in content to the one saved.

    Raises:
      FileNotFoundError: no such file.
      ValueError: the file is not NetCDF, is NetCDF but not an slt result, was written by a
        newer format version, or is damaged (an array, subgroup variable or the manifest
        that does not match the checksum written with it included).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no result file at {str(path)!r}")
    try:
        root = _read_group(path, None)
    except Exception as error:
        raise ValueError(
            f"{str(path)!r} is not an slt result file: it cannot be read as NetCDF ({error})"
        ) from error
    if (root.attrs.get("slt_format") != FORMAT or "slt_format_version" not in root.attrs
            or MANIFEST not in root):
        raise ValueError(
            f"{str(path)!r} is a NetCDF file but not an slt result file (written by "
            "slt.results.save)"
        )
    version = int(root.attrs["slt_format_version"])
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} was written in slt result format version {version}; this version "
            f"of slt reads versions up to {FORMAT_VERSION}: upgrade slt to load it"
        )
    try:
        text = str(root[MANIFEST].values.item())
        _verify(root.attrs.get(MANIFEST_CHECKSUM), text, "the manifest")
        return _Decoder(path, root, version).decode(json.loads(text))
    except (KeyError, IndexError, TypeError, ValueError, OSError) as error:
        raise ValueError(
            f"{str(path)!r} is damaged or was written by an incompatible version of slt: "
            f"{type(error).__name__}: {error}"
        ) from error


def _checksum(value: Any) -> str:
    """The CRC-32 of an array's values and shape (of a string's UTF-8 bytes), as 8 hex
    digits: what `save` writes beside every array and `load` verifies.

    Strings are hashed as text, so that an object array of str and the fixed-width str array
    NetCDF returns for it agree.
    """
    if isinstance(value, str):
        return f"{zlib.crc32(value.encode()):08x}"
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        data = "\x1f".join(str(item) for item in array.ravel()).encode()
    else:
        data = np.ascontiguousarray(array).tobytes()
    return f"{zlib.crc32(data, zlib.crc32(repr(array.shape).encode())):08x}"


def _verify(expected: str | None, value: Any, what: str) -> None:
    """Raise ValueError when `value`'s `_checksum` is not `expected` (None: a file written
    before checksums, nothing to verify)."""
    if expected is not None and _checksum(value) != expected:
        raise ValueError(f"{what} does not match the checksum written with it: the file's "
                         f"bytes changed after it was saved")


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _read_group(path: Path, group: str | None) -> xr.Dataset:
    """One group of the file, loaded into memory (the file is closed again)."""
    with xr.open_dataset(path, engine=ENGINE, group=group) as dataset:
        return dataset.load()


class _Encoder:
    """Walks a result, returning its JSON manifest; collects arrays and groups on the way."""

    def __init__(self):
        self.arrays: dict[str, xr.Variable] = {}
        self.groups: dict[str, xr.Dataset] = {}
        self._seen: dict[int, int] = {}  # id(dataclass instance) -> its reference number
        # the numeric and boolean arrays, flattened, by their buffer variable's name
        self._buffers: dict[str, list[np.ndarray]] = {}
        self._buffer_names: dict[str, str] = {}  # dtype.str -> the buffer variable's name
        self._buffer_sizes: dict[str, int] = {}

    def variables(self) -> dict[str, xr.Variable]:
        """The root group's variables: the string arrays, and one flat buffer per dtype."""
        buffers = {name: xr.Variable([f"{name}#0"], np.concatenate(parts))
                   for name, parts in self._buffers.items()}
        return {**self.arrays, **buffers}

    def _name(self, path: str) -> str:
        """A variable or group name from a field path, unique in the file."""
        base = re.sub(r"[^\w.=+-]", "_", path) or "value"
        name, suffix = base, 1
        while (name in self.arrays or name in self.groups or name in self._buffers
               or name == MANIFEST):
            name, suffix = f"{base}~{suffix}", suffix + 1
        return name

    def encode(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, str)) or type(value) in (int, float):
            return value
        if isinstance(value, np.generic):
            return self._scalar(value, path)
        if isinstance(value, (np.ndarray, jax.Array)):
            return self._array(value, path)
        if isinstance(value, Fraction):
            return {"type": "fraction", "value": str(value)}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._record(value, path)
        if _is_namedtuple(value):
            return {"type": "namedtuple", "class": _class_name(type(value)),
                    "fields": self._mapping(value._asdict(), path)}
        if type(value) in (tuple, list):
            return {"type": type(value).__name__,
                    "items": [self.encode(item, f"{path}.{i}") for i, item in enumerate(value)]}
        if type(value) is dict:
            return {"type": "dict", "items": self._mapping(value, path)}
        if isinstance(value, az.ELPDData):
            return {"type": "elpd", "dtype": str(value.dtype), "index": list(value.index),
                    "values": [self.encode(v, f"{path}.{k}") for k, v in value.items()]}
        if isinstance(value, pd.DataFrame):
            return self._frame(value, path)
        if isinstance(value, xr.DataArray):
            return {"type": "dataarray", "name": value.name,
                    **self._group(value.to_dataset(name=DATAARRAY_VARIABLE), path)}
        if isinstance(value, xr.Dataset):
            return {"type": "dataset", **self._group(value, path)}
        if isinstance(value, az.InferenceData):
            return {"type": "inference_data", "groups": {
                name: self._group(value[name], f"{path}.{name}") for name in value.groups()}}
        raise TypeError(
            f"cannot save {path.lstrip('.') or 'the result'}: objects of type "
            f"{type(value).__module__}.{type(value).__qualname__} are not supported (see "
            "slt.results for the types that are)"
        )

    def _mapping(self, mapping: dict, path: str) -> dict:
        bad = [key for key in mapping if not isinstance(key, str)]
        if bad:
            raise TypeError(f"cannot save {path.lstrip('.')}: dict keys must be str, got {bad!r}")
        return {key: self.encode(item, f"{path}.{key}") for key, item in mapping.items()}

    def _record(self, value: Any, path: str) -> dict:
        if id(value) in self._seen:
            return {"type": "ref", "id": self._seen[id(value)]}
        self._seen[id(value)] = len(self._seen)
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return {"type": "dataclass", "class": _class_name(type(value)),
                "id": self._seen[id(value)], "fields": self._mapping(fields, path)}

    def _scalar(self, value: np.generic, path: str) -> dict:
        if value.dtype.kind not in "biuf":
            raise TypeError(f"cannot save {path.lstrip('.')}: numpy scalar of dtype {value.dtype}")
        return {"type": "scalar", "dtype": value.dtype.str, "value": value.item()}

    def _array(self, value, path: str) -> dict:
        array = np.asarray(value)
        if array.dtype.kind not in _ARRAY_KINDS or (
            array.dtype.kind == "O" and not all(isinstance(v, str) for v in array.flat)
        ):
            raise TypeError(
                f"cannot save {path.lstrip('.')}: arrays of dtype {array.dtype} are not "
                "supported (bool, integer, float or str only)"
            )
        entry = {"dtype": array.dtype.str, "jax": isinstance(value, jax.Array),
                 "crc32": _checksum(array)}
        if array.dtype.kind in "biuf":
            key = array.dtype.str
            if key not in self._buffer_names:
                name = self._name(f"slt_buffer.{array.dtype.name}")
                self._buffer_names[key], self._buffers[name] = name, []
                self._buffer_sizes[name] = 0
            name = self._buffer_names[key]
            offset = self._buffer_sizes[name]
            self._buffers[name].append(array.ravel())
            self._buffer_sizes[name] += array.size
            return {"type": "array", "buffer": name, "offset": offset,
                    "shape": list(array.shape), **entry}
        name = self._name(path.lstrip("."))
        self.arrays[name] = xr.Variable([f"{name}#{i}" for i in range(array.ndim)], array)
        return {"type": "array", "var": name, **entry}

    def _frame(self, frame: pd.DataFrame, path: str) -> dict:
        for axis in (frame.index, frame.columns):
            if isinstance(axis, pd.MultiIndex) or not axis.is_unique:
                raise TypeError(f"cannot save {path.lstrip('.')}: DataFrames need a unique, "
                                "single-level index and columns")
        return {
            "type": "dataframe",
            "columns": list(frame.columns),
            "dtypes": [str(dtype) for dtype in frame.dtypes],
            "data": [self._array(frame[column].to_numpy(), f"{path}.{column}")
                     for column in frame.columns],
            "index": self._array(frame.index.to_numpy(), f"{path}.index"),
            "index_dtype": str(frame.index.dtype),
            "index_name": frame.index.name,
        }

    def _group(self, dataset: xr.Dataset, path: str) -> dict:
        """Queue ``dataset`` as a subgroup; its attributes go to the manifest (module
        docstring)."""
        name = self._name(path.lstrip("."))
        self.groups[name] = dataset.copy(deep=False)
        self.groups[name].attrs = {}
        return {"group": name, "attrs": self._mapping(dict(dataset.attrs), f"{path}.attrs"),
                "crc32": {key: _checksum(variable.values)
                          for key, variable in dataset.variables.items()}}


class _Decoder:
    """Rebuilds a result from its manifest, reading arrays and groups from the file."""

    def __init__(self, path: Path, root: xr.Dataset, version: int = FORMAT_VERSION):
        self.path, self.root, self.version = path, root, version
        self._objects: dict[int, Any] = {}
        self._buffers: dict[str, np.ndarray] = {}  # the packed arrays' variables, read once

    def decode(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        kind = node["type"]
        if kind == "scalar":
            return np.dtype(node["dtype"]).type(node["value"])
        if kind == "array":
            return self._array(node)
        if kind == "fraction":
            return Fraction(node["value"])
        if kind in ("dataclass", "namedtuple"):
            return self._record(node)
        if kind == "ref":
            return self._objects[node["id"]]
        if kind in ("tuple", "list"):
            return (tuple if kind == "tuple" else list)(self.decode(v) for v in node["items"])
        if kind == "dict":
            return {key: self.decode(item) for key, item in node["items"].items()}
        if kind == "elpd":
            return az.ELPDData(data=[self.decode(v) for v in node["values"]],
                               index=node["index"], dtype=node["dtype"])
        if kind == "dataframe":
            index = pd.Index(self._array(node["index"]), dtype=node["index_dtype"],
                             name=node["index_name"])
            columns = [pd.Series(self._array(data), index=index, dtype=dtype)
                       for data, dtype in zip(node["data"], node["dtypes"], strict=True)]
            return pd.DataFrame(dict(zip(node["columns"], columns, strict=True)), index=index)
        if kind == "dataarray":
            array = self._dataset(node)[DATAARRAY_VARIABLE]
            array.name = node["name"]
            return array
        if kind == "dataset":
            return self._dataset(node)
        if kind == "inference_data":
            return az.InferenceData(
                **{name: self._dataset(group) for name, group in node["groups"].items()})
        raise ValueError(f"unknown entry type {kind!r} in the manifest")

    def _dataset(self, node: dict) -> xr.Dataset:
        dataset = _read_group(self.path, node["group"])
        for key, expected in node.get("crc32", {}).items():
            _verify(expected, dataset.variables[key].values, f"variable {key!r} of group "
                   f"{node['group']!r}")
        dataset.attrs = {key: self.decode(value) for key, value in node["attrs"].items()}
        return dataset

    def _array(self, node: dict):
        if "buffer" in node:  # format version 4: a slice of its dtype's buffer
            name = node["buffer"]
            if name not in self._buffers:
                self._buffers[name] = np.asarray(self.root[name].values)
            size = int(np.prod(node["shape"], dtype=np.int64))
            flat = self._buffers[name][node["offset"]:node["offset"] + size]
            array = flat.astype(np.dtype(node["dtype"])).reshape(node["shape"])
            where = f"the array at {name}[{node['offset']}:{node['offset'] + size}]"
        else:
            array = np.asarray(self.root[node["var"]].values).astype(np.dtype(node["dtype"]))
            where = f"the array {node['var']!r}"
        _verify(node.get("crc32"), array, where)
        return jnp.asarray(array) if node["jax"] else array

    def _record(self, node: dict) -> Any:
        name = _current_class_name(node["class"])
        cls = _resolve_class(name)
        fields = {key: self.decode(item) for key, item in node["fields"].items()}
        for renamed_in in sorted(v for v in RENAMED_FIELDS if v > self.version):
            renames = RENAMED_FIELDS[renamed_in].get(name, {})
            fields = {renames.get(key, key): value for key, value in fields.items()}
        try:
            value = cls(**fields)
        except TypeError as error:
            raise ValueError(f"cannot rebuild {name} from the stored fields "
                             f"({error})") from error
        if node["type"] == "dataclass":
            self._objects[node["id"]] = value
        return value


def _current_class_name(name: str) -> str:
    """A recorded "module:qualname" with its module moved as `MOVED_MODULES` says."""
    module_name, colon, qualname = name.partition(":")
    return f"{MOVED_MODULES.get(module_name, module_name)}{colon}{qualname}"


def _resolve_class(name: str) -> type:
    """The slt class recorded as "module:qualname"; only classes inside slt are imported."""
    module_name, _, qualname = name.partition(":")
    if module_name != "slt" and not module_name.startswith("slt."):
        raise ValueError(f"the file names the class {name!r}, which is not part of slt")
    try:
        cls: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"the file names the class {name!r}, whose module this version of "
                         "slt does not have") from error
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if not isinstance(cls, type) or not (dataclasses.is_dataclass(cls) or hasattr(cls, "_fields")):
        raise ValueError(f"the file names the class {name!r}, which slt does not define as a "
                         "result dataclass or NamedTuple")
    return cls
