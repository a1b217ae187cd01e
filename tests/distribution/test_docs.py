"""The documentation site builds in strict mode, documents every public name of slt, and shows
every notebook with its outputs.

Marked `packaging` (`make test-packaging`, run by `.ci/run` beside `make test`). The site is
built here exactly as `make docs` builds it (`mkdocs build --strict`: a broken link or
cross-reference, or a docstring griffe cannot read, fails the build), into a temporary folder,
and its HTML pages are read back. The build took 18-22 s of wall time on 2 loaded CPU cores.
"""

import html
import importlib
import re
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXECUTED = ROOT / "docs" / "notebooks"

pytestmark = pytest.mark.packaging


def public_names() -> dict[str, str | None]:
    """Every public name of slt, dotted: the names of `slt.__all__` and, recursively, of the
    `__all__` of each module listed there (slt.samplers, slt.geometry.symmetry, ...); each with
    the path of the function or class it names where it was defined (None for constants)."""
    names, modules = {}, ["slt"]
    while modules:
        module = importlib.import_module(modules.pop(0))
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                modules.append(value.__name__)
            else:
                defined = getattr(value, "__qualname__", None)
                names[f"{module.__name__}.{name}"] = (
                    f"{value.__module__}.{defined}" if defined else None)
    return names


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    process = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, f"mkdocs build --strict failed:\n{process.stderr[-6000:]}"
    return out


def test_every_public_name_has_a_reference_entry(site):
    anchors = set()
    for page in (site / "api").glob("*.html"):
        anchors |= set(re.findall(r'id="(slt(?:\.\w+)+)"', page.read_text()))
    names = public_names()
    assert len(names) > 150  # 55 in slt itself, the rest in its public modules
    # An entry under the public name, or under the path where it is defined: the function
    # slt.samplers.sgld shares its name with its module, and has its entry under
    # slt.samplers.sgld.sgld.
    missing = [name for name, defined in names.items() if not {name, defined} & anchors]
    assert missing == [], f"public names without an entry in the API reference: {missing}"


def test_reference_entries_show_their_docstrings(site):
    """An entry is the docstring rendered, not just a heading: its first line, its
    mathematics as written (no stray emphasis from the stars of w*), and the names of slt it
    mentions as links to their entries (llc's docstring names slt.samplers.SGLD)."""
    page = (site / "api" / "slt.html").read_text()
    text = html.unescape(page)
    assert "Estimate the local learning coefficient lambda_hat(w*) = n beta" in text
    assert "<em>) = n beta" not in text
    assert 'href="samplers.html#slt.samplers.SGLD"' in page


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.stem)
def test_executed_copy_matches_its_notebook(source):
    """docs/notebooks/ holds each notebook executed (make notebooks): the same cells as its
    source, each code cell run, no error. A notebook edited without `make notebooks` fails."""
    executed = nbformat.read(EXECUTED / source.name, as_version=4)
    original = nbformat.read(source, as_version=4)
    assert [(cell.cell_type, cell.source) for cell in executed.cells] == [
        (cell.cell_type, cell.source) for cell in original.cells]
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    assert not [output for cell in code for output in cell.outputs
                if output.output_type == "error"]


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.stem)
def test_notebook_rendered_with_outputs(site, source):
    executed = nbformat.read(EXECUTED / source.name, as_version=4)
    outputs = [output for cell in executed.cells if cell.cell_type == "code"
               for output in cell.outputs]
    figures = sum("image/png" in output.get("data", {}) for output in outputs)
    assert figures >= 1
    page = (site / "notebooks" / f"{source.stem}.html").read_text()
    assert page.count('src="data:image/png;base64,') == figures
    assert page.count('class="jp-OutputArea jp-Cell-outputArea"') == sum(
        1 for cell in executed.cells if cell.cell_type == "code" and cell.outputs)
    assert "jp-OutputArea-error" not in page


@pytest.mark.parametrize("page", sorted((ROOT / "docs" / "uses").glob("*.md")) + [
    ROOT / "docs" / "guide.md", ROOT / "docs" / "index.md"], ids=lambda path: path.stem)
def test_readme_sections_included(site, page):
    """The pages that include README.md's sections (<!-- readme: ... -->) show them: every
    included section's first words are on the built page, as rendered text."""
    markers = re.findall(r"^<!-- readme: (#+) (.+?)((?: \| (?:only|level \d))*) -->$",
                         page.read_text(), flags=re.M)
    assert markers
    readme = (ROOT / "README.md").read_text()
    built = page.relative_to(ROOT / "docs").with_suffix(".html")
    text = re.sub(r"<[^>]+>", "", html.unescape((site / built).read_text()))
    for hashes, title, _ in markers:
        section = readme.split(f"\n{hashes} {title}\n", 1)[1]
        prose, fenced = [], False
        for line in section.splitlines():
            fenced ^= line.startswith("```")
            if not fenced and line.strip() and not line.startswith(("```", "#", "!", "|", "-")):
                prose.append(line)
        first = prose[0]
        words = re.sub(r"[`*\[\]\\]", "", first).split()[:4]
        assert " ".join(words) in re.sub(r"\s+", " ", re.sub(r"[\[\]]", "", text)), (title, words)
