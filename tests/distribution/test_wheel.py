"""The wheel works where users install it: built, installed (not editable) into a fresh venv,
and run from a directory outside the source tree.

Marked `packaging`: `make test` leaves it out (its 10 minutes are taken) and `.ci/run` runs it
beside `make test` with `make test-packaging`. What it costs on 2 shared CPU cores: the build
about 6 s, the fresh venv with slt's dependencies about 10 s (uv, from its cache: the versions
of this venv, hard-linked), `slt validate --quick` about 20 s of CPU, the README's tour about
10 s.

The wheel is built by the standard front end (`python -m build`, as `make dist`): an sdist
first, then the wheel from the unpacked sdist, so a file missing from the sdist fails here too.
"""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "slt"
DISTRIBUTION = "singular-learning"

pytestmark = pytest.mark.packaging


def _run(command, cwd, env=None, timeout=600):
    """Run `command`; its stdout, or a failure showing its stdout and stderr."""
    process = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=timeout)
    assert process.returncode == 0, (
        f"{' '.join(map(str, command))} exited {process.returncode}\n"
        f"--- stdout\n{process.stdout[-4000:]}\n--- stderr\n{process.stderr[-4000:]}")
    return process.stdout


def _uv():
    """uv as this venv has it (the Makefile installs it), else None: pip and venv are used."""
    probe = subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True)
    return [sys.executable, "-m", "uv"] if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    installer = ["--installer", "uv"] if _uv() else []
    _run([sys.executable, "-m", "build", *installer, "--outdir", str(out), str(ROOT)], cwd=ROOT)
    (path,) = out.glob("*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """A fresh venv with the wheel installed, and an empty working directory outside the
    source tree; the environment runs nothing from the source tree (no PYTHONPATH)."""
    base = tmp_path_factory.mktemp("installed")
    venv, work = base / "venv", base / "work"
    work.mkdir()
    uv = _uv()
    if uv:
        # The versions of this venv's packages as constraints: what the suite tested, and
        # what uv's cache holds. The requirements themselves are the wheel's metadata.
        frozen = _run([*uv, "pip", "freeze", "--python", sys.executable], cwd=base)
        pins = [line for line in frozen.splitlines()
                if "==" in line and not line.lower().startswith(("slt", "singular"))]
        (base / "constraints.txt").write_text("\n".join(pins) + "\n")
        _run([*uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=base)
        _run([*uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
              "-c", str(base / "constraints.txt"), str(wheel)], cwd=base)
    else:
        _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
             cwd=base)
    # Bytecode is written: the first process compiles what it imports once for the others
    # (where PYTHONDONTWRITEBYTECODE is set, each process compiled jax anew, +40 s in all).
    env = {key: value for key, value in os.environ.items() if key not in (
        "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return {"python": str(venv / "bin" / "python"), "slt": str(venv / "bin" / "slt"),
            "cwd": work, "env": env}


def _source_files() -> set[str]:
    """Every file of the package in the source tree (modules and the data they read), as
    paths in the wheel: git's list where this is a checkout (untracked files are not the
    package's), else every file but caches."""
    listed = subprocess.run(["git", "ls-files", "slt"], cwd=ROOT, capture_output=True,
                            text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return set(listed.stdout.split())
    files = set()
    for path in PACKAGE.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and "__pycache__" not in parts and not path.name.startswith("."):
            files.add("/".join(parts))
    return files


def test_wheel_is_named_and_versioned(wheel):
    import slt

    assert wheel.name == f"singular_learning-{slt.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        entry_points = archive.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    assert re.search(rf"^Name: {DISTRIBUTION}$", text, flags=re.M)
    assert re.search(rf"^Version: {re.escape(slt.__version__)}$", text, flags=re.M)
    assert "slt = slt.cli:main" in entry_points


def test_wheel_holds_every_file_of_the_package(wheel):
    """Modules, py.typed and every data file slt reads (slt/data: the CSV data sets the demo
    and the CLI load through importlib.resources): a file added to slt/ that the package data
    of pyproject.toml does not name fails here."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    source = _source_files()
    assert {"slt/py.typed", "slt/data/old_faithful.csv", "slt/data/README.md"} <= source
    assert source - names == set()
    assert not [name for name in names if name.startswith(("tests/", "benchmarks/"))]


def test_installed_not_editable(installed):
    out = _run([installed["python"], "-c", (
        "import importlib.metadata as m, importlib.resources as r, pathlib, slt\n"
        "print(pathlib.Path(slt.__file__).resolve())\n"
        "print(slt.__version__, m.version('singular-learning'))\n"
        "print((pathlib.Path(slt.__file__).parent / 'py.typed').is_file())\n"
        "print(r.files('slt.data').joinpath('old_faithful.csv').read_text().count(chr(10)))\n"
    )], cwd=installed["cwd"], env=installed["env"])
    location, versions, typed, lines = out.splitlines()
    assert "site-packages" in location and not Path(location).is_relative_to(ROOT)
    version, metadata_version = versions.split()
    assert version == metadata_version
    assert typed == "True"
    assert int(lines) > 200  # 272 eruptions and a header
    assert _run([installed["slt"], "--version"], cwd=installed["cwd"],
                env=installed["env"]).strip() == f"slt {version} (singular-learning)"


def test_validate_runs_from_the_wheel(installed):
    """The estimators against exact answers, from the installed command: `--quick`, the
    deterministic cases and a short LLC run (the full `slt validate` runs minutes)."""
    out = _run([installed["slt"], "validate", "--quick", "--no-progress"],
               cwd=installed["cwd"], env=installed["env"])
    assert re.search(r"(\d+) of \1 cases within tolerance", out), out


def test_demo_reads_the_bundled_data(installed):
    """The data set the demo compares mixtures on, found by the demo's own functions through
    importlib.resources in the installed package, and read as the demo reads it."""
    out = _run([installed["python"], "-c", (
        "from slt.cli.inputs import bundled_path, load_data, parse_model\n"
        "path = bundled_path('old_faithful.csv')\n"
        "data = load_data(path, parse_model('gaussian_mixture(2)'), y_columns='eruptions')\n"
        "print(path)\n"
        "print(data['y'].shape, round(float(data['y'].mean()), 3))\n"
    )], cwd=installed["cwd"], env=installed["env"])
    path, summary = out.splitlines()
    assert not Path(path).is_relative_to(ROOT)
    assert summary == "(272,) 3.488"  # Old Faithful's 272 eruption durations, in minutes


def test_readme_tour_runs_from_the_wheel(installed):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    (installed["cwd"] / "tour.py").write_text(blocks[0])
    out = _run([installed["python"], "tour.py"], cwd=installed["cwd"], env=installed["env"])
    assert "restarts agree" in out
    assert "λ = 8 (multiplicity 1)" in out
