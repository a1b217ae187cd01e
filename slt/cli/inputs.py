"""What the `slt` command reads and writes: data files, model specifications, output folders.

Everything a user can get wrong is checked here and reported as a `UsageError`, whose message
is one line naming the file, column, model or option and what is allowed; the command turns it
into ``slt: error: ...`` and exit status 2.

Data (`load_data`)
------------------
* CSV with a header row (a first row of numbers is refused: it would be read as the column
  names, and lost as data). The columns become two arrays, ``x`` (inputs) and ``y`` (outputs):
  ``--y`` and ``--x`` name them (comma-separated). Defaults: for a density model (no inputs,
  e.g. a mixture) every column is ``y`` (a model that cannot take them all is told to name
  y with ``--y``); for a regression model the last column is ``y`` and the others are
  ``x``. One selected column gives a 1-D array (n,), several give (n, k); the built-in
  models then get the shapes they expect (`BUILTINS`).
* NPZ (``numpy.savez``): the arrays are passed to the model under their own names, e.g. ``x``
  and ``y``. ``--x`` / ``--y`` do not apply.

Models (`parse_model`)
----------------------
* a built-in name, optionally called with literal arguments, e.g. ``gaussian_mixture(2)`` or
  ``two_layer_network(1, 3, 1, activation='tanh', bias=False)`` (see `BUILTINS`);
* ``module:attribute`` for your own model: ``attribute`` is a NumPyro model (a function
  taking the data arrays as keyword arguments, ``def model(x, y): ...``) or an
  `slt.models.ModelSpec`. The module is imported from the working directory or
  ``sys.path``; a file path ``path/to/file.py:model`` works too.

Outputs (`OutputFolder`)
------------------------
Every file goes through `slt.results.atomic_write`: it is written beside its destination and
renamed into place when complete, so an interrupt never leaves a half-written file. Existing
files are refused (before any work starts) unless ``--force``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slt import models
from slt.models.base import ModelSpec
from slt.problem import Problem
from slt.results import atomic_write, save

__all__ = [
    "BUILTINS",
    "Builtin",
    "ModelChoice",
    "OutputFolder",
    "UsageError",
    "bundled_path",
    "json_safe",
    "load_data",
    "load_problem",
    "parse_model",
    "parse_point",
]


class UsageError(Exception):
    """A mistake in the command line or its input files; the message is one line."""


# --------------------------------------------------------------------------- bundled data


def bundled_path(name: str) -> Path:
    """The path of a data set shipped in `slt/data` (e.g. "old_faithful.csv")."""
    path = Path(str(resources.files("slt.data").joinpath(name)))
    if not path.is_file():
        raise UsageError(f"no bundled data set {name!r}")
    return path


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class Builtin:
    """A model of `slt.models` as the command line knows it.

    Attributes:
      builder: the `slt.models` function returning a `ModelSpec`.
      inputs: how x is passed: None (density model, no inputs), "column" (one input, shape
        (n,)) or "matrix" (shape (n, k), also for k = 1).
      outputs: how y is passed: "auto" ((n,) for one column, else (n, k)) or "matrix"
        ((n, k) always).
    """

    builder: Callable[..., ModelSpec]
    inputs: str | None
    outputs: str


BUILTINS = {
    "gaussian_mixture": Builtin(models.gaussian_mixture, None, "auto"),
    "fixed_component_mixture": Builtin(models.fixed_component_mixture, None, "auto"),
    "two_component_mixture": Builtin(models.two_component_mixture, None, "auto"),
    "linear_regression": Builtin(models.linear_regression, "matrix", "auto"),
    "reduced_rank_regression": Builtin(models.reduced_rank_regression, "matrix", "matrix"),
    "deep_linear_network": Builtin(models.deep_linear_network, "matrix", "matrix"),
    "two_layer_network": Builtin(models.two_layer_network, "matrix", "matrix"),
    "normal_crossing": Builtin(models.normal_crossing, "column", "auto"),
    "product_model": Builtin(models.product_model, "column", "auto"),
}


@dataclass(frozen=True)
class ModelChoice:
    """A parsed ``--model``: what to build a `Problem` from.

    Attributes:
      label: the text the user gave (used as the model's name in tables).
      model: the NumPyro model.
      spec: the `ModelSpec` (built-in or user-provided), or None for a plain NumPyro model.
      builtin: the `Builtin` entry, or None for a user model.
    """

    label: str
    model: Callable[..., Any]
    spec: ModelSpec | None
    builtin: Builtin | None

    def problem(self, data) -> Problem:
        """The `Problem` on `data` (a `ModelSpec`'s, so that its exchangeable sites carry)."""
        return self.spec.problem(data) if self.spec is not None else Problem(self.model, data)

    @property
    def has_inputs(self) -> bool:
        """Whether the model takes inputs x (built-in: by its entry; user model: an `x`
        argument in its signature)."""
        if self.builtin is not None:
            return self.builtin.inputs is not None
        return "x" in inspect.signature(self.model).parameters


def _literal(node: ast.AST, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UsageError(
            f"model {text!r}: arguments must be literals (numbers, strings, lists, True/False/"
            f"None), got {ast.unparse(node)!r}"
        ) from None


def _builtin_names() -> str:
    return ", ".join(BUILTINS)


def _parse_builtin(text: str) -> ModelChoice:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise UsageError(
            f"cannot parse model {text!r}: write NAME or NAME(arguments), e.g. "
            "'gaussian_mixture(2)', or module:function for your own model"
        ) from None
    if isinstance(tree, ast.Name):
        name, args, kwargs = tree.id, [], {}
    elif isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
        name = tree.func.id
        args = [_literal(node, text) for node in tree.args]
        if any(keyword.arg is None for keyword in tree.keywords):
            raise UsageError(f"model {text!r}: **arguments are not supported")
        kwargs = {keyword.arg: _literal(keyword.value, text) for keyword in tree.keywords}
    else:
        raise UsageError(
            f"cannot parse model {text!r}: write NAME or NAME(arguments), "
            "e.g. 'gaussian_mixture(2)'"
        )
    if name not in BUILTINS:
        raise UsageError(
            f"unknown model {name!r}; built-in models: {_builtin_names()} "
            "(or module:function for your own NumPyro model)"
        )
    builtin = BUILTINS[name]
    try:
        spec = builtin.builder(*args, **kwargs)
    except (TypeError, ValueError) as error:
        signature = inspect.signature(builtin.builder)
        raise UsageError(f"model {text!r}: {error} (signature: {name}{signature})") from None
    return ModelChoice(text, spec.model, spec, builtin)


def _import_attribute(text: str) -> Any:
    module_name, _, attribute = text.rpartition(":")
    if not module_name or not attribute:
        raise UsageError(f"model {text!r}: write module:function (e.g. mymodels:model)")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"model {text!r}: no such file {module_name!r}")
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")
            module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"model {text!r}: cannot import {module_name!r}: {error}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"model {text!r}: module {module_name!r} has no {attribute!r}") from None


def parse_model(text: str) -> ModelChoice:
    """A ``--model`` value as a `ModelChoice` (see the module docstring for the forms).

    Raises:
      UsageError: unknown built-in, arguments the builder refuses, an unimportable module,
        or an attribute that is neither a NumPyro model nor a `ModelSpec`.
    """
    if ":" not in text:
        return _parse_builtin(text)
    value = _import_attribute(text)
    if isinstance(value, ModelSpec):
        return ModelChoice(text, value.model, value, None)
    if not callable(value):
        raise UsageError(
            f"model {text!r} is a {type(value).__name__}, not a NumPyro model or ModelSpec"
        )
    return ModelChoice(text, value, None, None)


# --------------------------------------------------------------------------- data


def _columns(option: str, text: str | None, header: list[str]) -> list[str] | None:
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in header]
    if not names or unknown:
        raise UsageError(
            f"{option} {text!r}: no column {', '.join(map(repr, unknown or [text]))}; "
            f"the columns are {', '.join(header)}"
        )
    return names


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "no data"
        raise UsageError(f"{path}: malformed CSV: {first}") from None
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise UsageError(f"{path}: malformed CSV: no data rows (a header row, then one row per "
                         "example)")
    if all(_is_number(column) for column in frame.columns):
        raise UsageError(
            f"{path}: no header row: the first row ({', '.join(map(str, frame.columns))}) "
            f"holds numbers, which would become the column names and be lost as data; add a "
            f"first line naming the columns (e.g. {','.join(_example_names(frame.shape[1]))})"
        )
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            bad = frame[column][pd.to_numeric(frame[column], errors="coerce").isna()
                                & frame[column].notna()]
            example = bad.iloc[0] if len(bad) else frame[column].iloc[0]
            raise UsageError(
                f"{path}: malformed CSV: column {column!r} is not numeric (row "
                f"{bad.index[0] + 2 if len(bad) else 2}: {example!r})"
            )
    return frame


def _is_number(text: str) -> bool:
    try:
        float(str(text))
    except ValueError:
        return False
    return True


def _example_names(count: int) -> list[str]:
    return ["y"] if count == 1 else [*(f"x{i + 1}" for i in range(count - 1)), "y"]


def _arrange(values: np.ndarray, layout: str | None, what: str) -> np.ndarray:
    """`values` (n,) or (n, k) in the shape a built-in model expects (see `Builtin`)."""
    if layout == "matrix":
        return values[:, None] if values.ndim == 1 else values
    if layout == "column":
        if values.ndim == 2 and values.shape[1] != 1:
            raise UsageError(f"this model takes a single {what} column, got {values.shape[1]}")
        return values.reshape(-1)
    if values.ndim == 2 and values.shape[1] == 1:
        return values[:, 0]
    return values


def load_data(
    path: str | Path,
    choice: ModelChoice,
    *,
    x_columns: str | None = None,
    y_columns: str | None = None,
) -> dict[str, np.ndarray]:
    """The data of ``path`` (CSV or NPZ) as the arrays `choice`'s model is called with.

    Args:
      path: a .csv (header row required) or .npz file.
      choice: the model; decides whether x is needed and the arrays' shapes.
      x_columns, y_columns: comma-separated CSV column names (CSV only).

    Returns:
      {"x": ..., "y": ...} (without "x" for a model with no inputs) from a CSV; the NPZ's
      arrays (shaped per `BUILTINS` for a built-in model) from an NPZ.

    Raises:
      UsageError: missing file, unknown suffix, malformed CSV or NPZ, unknown or non-numeric
        columns, no column left for x.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no such data file: {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        if x_columns is not None or y_columns is not None:
            raise UsageError("--x and --y select CSV columns; an NPZ's arrays keep their names")
        try:
            with np.load(path, allow_pickle=False) as archive:
                data = {name: np.asarray(archive[name]) for name in archive.files}
        except (ValueError, OSError, EOFError) as error:
            raise UsageError(f"{path}: not a readable .npz file ({error})") from None
        if not data:
            raise UsageError(f"{path}: the .npz file holds no arrays")
        builtin = choice.builtin
        if builtin is not None:
            needed = ["x", "y"] if builtin.inputs else ["y"]
            missing = [name for name in needed if name not in data]
            if missing:
                raise UsageError(f"{path}: model {choice.label!r} needs arrays "
                                 f"{needed}; the file has {sorted(data)}")
            data = {"y": _arrange(data["y"], builtin.outputs, "y")} | (
                {"x": _arrange(data["x"], builtin.inputs, "x")} if builtin.inputs else {}
            )
        return data
    if suffix != ".csv":
        raise UsageError(f"{path}: data must be a .csv or .npz file, got {suffix or 'no suffix'!r}")
    frame = _read_csv(path)
    header = [str(column) for column in frame.columns]
    frame.columns = header
    y_names = _columns("--y", y_columns, header)
    x_names = _columns("--x", x_columns, header)
    if not choice.has_inputs:
        if x_names:
            raise UsageError(f"model {choice.label!r} takes no inputs; drop --x")
        y_names = y_names or header
    else:
        y_names = y_names or header[-1:]
        x_names = x_names or [name for name in header if name not in y_names]
        if not x_names:
            raise UsageError(f"{path}: no column left for the inputs x; name them with --x")

    def array(names: list[str]) -> np.ndarray:
        values = frame[names].to_numpy(dtype=np.float64)
        return values[:, 0] if len(names) == 1 else values

    builtin = choice.builtin
    data = {"y": array(y_names)}
    if choice.has_inputs:
        data["x"] = array(x_names)
    if builtin is not None:
        data["y"] = _arrange(data["y"], builtin.outputs, "y")
        if builtin.inputs:
            data["x"] = _arrange(data["x"], builtin.inputs, "x")
    return data


def load_problem(
    path: str | Path,
    choice: ModelChoice,
    *,
    x_columns: str | None = None,
    y_columns: str | None = None,
) -> Problem:
    """`choice`'s Problem on the data of ``path`` (`load_data`).

    Raises:
      UsageError: as `load_data`; and, when y defaulted to every column of a CSV (a density
        model without --y) and the model cannot take them, a message saying to name y with
        --y (instead of the model's shape error).
    """
    data = load_data(path, choice, x_columns=x_columns, y_columns=y_columns)
    defaulted = (Path(path).suffix.lower() == ".csv" and y_columns is None
                 and not choice.has_inputs and np.ndim(data["y"]) == 2)
    try:
        return choice.problem(data)
    except (ValueError, TypeError) as error:
        if not defaulted:
            raise
        raise UsageError(
            f"{path}: y defaulted to every column ({np.shape(data['y'])[1]} of them) and model "
            f"{choice.label!r} cannot take them ({str(error).splitlines()[0]}): name the "
            f"column(s) of y with --y"
        ) from None


# --------------------------------------------------------------------------- parameters


def parse_point(assignments: Iterable[str], path: str | None = None) -> dict[str, np.ndarray]:
    """Constrained site values from ``NAME=VALUE`` strings and/or an NPZ of arrays.

    ``VALUE`` is a number or a JSON list (``V=[[1.5],[-1.0]]``). Assignments override the
    file's arrays of the same name.

    Raises:
      UsageError: missing or unreadable file, an assignment without ``=``, a value that is
        not a number or list of numbers.
    """
    values: dict[str, np.ndarray] = {}
    if path is not None:
        if not Path(path).is_file():
            raise UsageError(f"no such parameter file: {path!r}")
        try:
            with np.load(path, allow_pickle=False) as archive:
                values.update({name: np.asarray(archive[name]) for name in archive.files})
        except (ValueError, OSError, EOFError) as error:
            raise UsageError(f"{path}: not a readable .npz file ({error})") from None
    for text in assignments:
        name, equals, value = text.partition("=")
        if not equals or not name.strip():
            raise UsageError(f"--at {text!r}: write NAME=VALUE, e.g. mu=1.0 or 'V=[[1.5],[-1]]'")
        try:
            array = np.asarray(json.loads(value), dtype=np.float64)
        except (json.JSONDecodeError, TypeError, ValueError):
            raise UsageError(f"--at {text!r}: the value must be a number or a JSON list of "
                             "numbers") from None
        values[name.strip()] = array
    return values


# --------------------------------------------------------------------------- outputs


class OutputFolder:
    """A folder of result files, each written atomically, none overwritten without `force`.

    Create it with every file name the command will write; `OutputFolder` refuses at once
    (before any long computation) if one exists and `force` is False, and creates the folder.

    Example:
      >>> import tempfile
      >>> folder = tempfile.TemporaryDirectory()     # removed when `folder` is
      >>> out = OutputFolder(folder.name, ["table.csv"], force=False)
      >>> frame = pd.DataFrame({"F": [141.6]}, index=["d=2"])
      >>> out.write("table.csv", lambda path: frame.to_csv(path)).read_text().splitlines()
      [',F', 'd=2,141.6']
      >>> OutputFolder(folder.name, ["table.csv"], force=False)   # refuses before any work
      Traceback (most recent call last):
      slt.cli.inputs.UsageError: /.../table.csv already exist(s); pass --force to overwrite
    """

    def __init__(self, directory: str | Path, names: Iterable[str], *, force: bool) -> None:
        self.directory = Path(directory)
        self.names = tuple(names)
        self.force = force
        if self.directory.exists() and not self.directory.is_dir():
            raise UsageError(f"--out {str(self.directory)!r} exists and is not a folder")
        existing = [name for name in self.names if (self.directory / name).exists()]
        if existing and not force:
            raise UsageError(
                f"{', '.join(str(self.directory / name) for name in existing)} already "
                "exist(s); pass --force to overwrite"
            )
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """Where `name` goes (one of the names given at construction)."""
        if name not in self.names:
            raise KeyError(f"{name!r} was not declared to OutputFolder")
        return self.directory / name

    def write(self, name: str, write_fn: Callable[[Path], object]) -> Path:
        """Call ``write_fn(temporary_path)`` and move the file onto `name` atomically."""
        return atomic_write(self.path(name), write_fn, overwrite=self.force)

    def write_text(self, name: str, text: str) -> Path:
        """Write `text` (UTF-8) to `name` atomically."""
        return self.write(name, lambda path: path.write_text(text, encoding="utf-8"))

    def write_json(self, name: str, payload: Any) -> Path:
        """Write `payload` as indented JSON (NaN and infinities as null) to `name` atomically."""
        return self.write_text(name, json.dumps(json_safe(payload), indent=2) + "\n")

    def save(self, name: str, result) -> Path:
        """Write a result dataclass with `slt.results.save` (NetCDF-4, atomic) to `name`."""
        return save(result, self.path(name), overwrite=self.force)

    def write_figure(self, name: str, figure) -> Path:
        """Save a matplotlib figure as PNG to `name` atomically and close it."""
        import matplotlib.pyplot as plt

        try:
            return self.write(name, lambda path: figure.savefig(path, dpi=120, format="png"))
        finally:
            plt.close(figure)


def json_safe(value: Any) -> Any:
    """`value` with numpy scalars and arrays as Python numbers and lists, NaN / inf as None,
    `fractions.Fraction` as float, and DataFrames as lists of row records."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, pd.DataFrame):
        return json_safe(value.reset_index().to_dict(orient="records"))
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return number if np.isfinite(number) else None
