"""Execute the notebooks at their own sizes and store the executed copies for the docs site.

    python tools/execute_notebooks.py [NAME ...]      # `make notebooks`

notebooks/*.ipynb are kept without outputs (tests/test_notebooks.py checks that, and runs them
at small sizes). The documentation shows them with their outputs: this script runs each one
top to bottom at the sizes of its first cell, in a fresh `python3` kernel of this interpreter,
and writes the executed copy to docs/notebooks/ (same file name). The docs build renders those
copies as they are, without executing anything (six notebooks at full size take minutes, the
docs build must take less than two). tests/distribution/test_docs.py checks that each copy holds
the same cells as its source, so a notebook changed without `make notebooks` fails there.
"""

import base64
import io
import os
import re
import sys
import time
from pathlib import Path

import nbclient
import nbformat
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "notebooks"
TARGET_DIR = ROOT / "docs" / "notebooks"
CELL_TIMEOUT = 1800  # seconds per cell; notebook 06's sampling cells run minutes on 2 cores


def shrink_figures(notebook) -> None:
    """Store each PNG figure with a palette of 256 colours (matplotlib's colour maps have 256),
    optimised: the six notebooks' figures take 0.5 MB instead of 1.3 MB in the repository."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data:
                continue
            image = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
            if image.mode == "P":  # already done
                continue
            palette = image.convert("RGB").quantize(
                colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
            buffer = io.BytesIO()
            palette.save(buffer, "PNG", optimize=True)
            data["image/png"] = base64.b64encode(buffer.getvalue()).decode("ascii")


# tqdm.auto's complaint, in a kernel without ipywidgets, that it draws text bars instead of
# widgets: a line about this machine's Jupyter, not about the notebook.
_IPROGRESS = re.compile(r"^.*TqdmWarning: IProgress not found.*\n(?:\s+from \.autonotebook.*\n)?",
                        flags=re.M)


def drop_iprogress_warnings(notebook) -> None:
    """Remove tqdm's IProgress warning from the stderr outputs (and outputs left empty)."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stderr":
                output.text = _IPROGRESS.sub("", output.text)
                if not output.text.strip():
                    continue
            kept.append(output)
        cell.outputs = kept


def execute(source: Path, target: Path) -> float:
    """Run `source` in a fresh kernel, write it with its outputs to `target`; the seconds taken."""
    notebook = nbformat.read(source, as_version=4)
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # matplotlib's inline backend, as in Jupyter
    start = time.perf_counter()
    nbclient.NotebookClient(
        notebook,
        kernel_name="python3",  # jupyter_client runs it with sys.executable: this venv
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(SOURCE_DIR)}},
    ).execute(env=env)
    seconds = time.perf_counter() - start
    for cell in notebook.cells:  # timestamps would change every copy on every run
        cell.metadata.pop("execution", None)
    drop_iprogress_warnings(notebook)
    shrink_figures(notebook)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return seconds


def main(names: list[str]) -> None:
    sources = sorted(SOURCE_DIR.glob("*.ipynb"))
    if names:
        sources = [path for path in sources if any(name in path.name for name in names)]
    for source in sources:
        target = TARGET_DIR / source.name
        seconds = execute(source, target)
        size = target.stat().st_size / 1024
        print(f"{source.name}: {seconds:.0f} s, {size:.0f} KiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
