"""The installed distribution's metadata agrees with the source (fast: part of `make test`;
the built wheel itself is checked by test_wheel.py, in `make test-packaging`)."""

import importlib.metadata
import tomllib
from pathlib import Path

import slt
from slt.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_single_sourced():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "singular-learning"
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "slt.__version__"}
    assert importlib.metadata.version("singular-learning") == slt.__version__


def test_typed_and_named_in_the_command():
    assert (Path(slt.__file__).parent / "py.typed").is_file()
    parser = build_parser()
    assert "pip install singular-learning" in parser.format_help()
    version = next(action for action in parser._actions if "--version" in action.option_strings)
    assert version.version == f"slt {slt.__version__} (singular-learning)"
