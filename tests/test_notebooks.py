"""The notebooks in notebooks/ run top to bottom without error, and are stored without outputs.

Running them (`test_notebook_executes`, marked `notebooks`: seven kernels, about 190 s of CPU,
most of it compiling) is `make test-notebooks`, which CI runs after `make test` (`.ci/run`):
in `make test` they were 14% of its 1,400 CPU seconds and put it over its 10 minutes. The
checks that need no kernel run in `make test`.

Each notebook is executed by nbclient in a fresh `python3` kernel. The kernel must be this
interpreter (the one running pytest, i.e. .venv's): ipykernel's kernelspec names `python`,
which jupyter_client replaces by `sys.executable` of the launching process;
`test_kernel_runs_this_interpreter` checks that this is what happens.
"""

import os
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "python3"
# Per-cell limit. Each notebook takes under a minute on 2 idle cores (JAX compilation, mostly);
# the margin is for a loaded CI machine.
CELL_TIMEOUT = 600
# Sizes the test runs a notebook at, in place of those of its first code cell (its "Sizes"
# cell, which names them for users to raise): every cell still runs, on fewer particles.
# Notebook 01 at its own 300 particles per copy took 28.5 s on 2 idle cores, at 100 15.1 s.
# Notebook 05 at its test sizes: 27 s on 2 heavily loaded cores, most of it compiling its two
# sampler programs and two training loops (its full sizes: 100 s).
# Notebook 06 at its test sizes: 15-16 s on 2 nearly idle cores (19-20 s with other jobs), most
# of it compiling its three sampler programs (kernel, BIF, susceptibilities: ~2.3 s each),
# imports and plots; MALA_EVERY = 0 drops the MALA check from those programs (-1.4 s each) and
# a fixed step size skips the calibration (its full sizes: 3 to 5 minutes).
TEST_SIZES = {
    "01_compare_model_classes.ipynb": {"NUM_PARTICLES": 100, "N": 200},
    "02_llc_of_a_trained_network.ipynb": {"N": 1000, "TRAIN_STEPS": 1000, "NUM_WARMUP": 200,
                                          "NUM_SAMPLES": 300},
    "04_your_own_model_landscape.ipynb": {"HIDDEN": 8, "TRAIN_STEPS": 200, "GRID": 3,
                                          "SEGMENT_POINTS": 5, "NUM_PROBES": 2,
                                          "LANCZOS_STEPS": 10},
    "05_llc_along_training.ipynb": {"N": 1000, "TRAIN_STEPS": 3000, "NUM_CHECKPOINTS": 10,
                                    "NUM_WARMUP": 50, "NUM_SAMPLES": 100, "HIDDEN": 8,
                                    "MLP_TRAIN_STEPS": 200, "MLP_NUM_WARMUP": 50,
                                    "MLP_NUM_SAMPLES": 100},
    "06_what_the_posterior_says_about_the_data.ipynb": {
        "HIDDEN": 8, "TRAIN_STEPS": 100, "NUM_CHAINS": 2, "NUM_WARMUP": 20, "NUM_SAMPLES": 40,
        "EVERY": 2, "STEP_SIZE": 1e-3, "MALA_EVERY": 0, "NUM_QUERIES": 2, "PER_CLASS": 3},
    "07_transformer_heads_along_training.ipynb": {
        "VOCAB": 8, "CONTEXT": 8, "BRANCHING": 4, "N": 64, "TRAIN_STEPS": 20, "BATCH_SIZE": 16,
        "NUM_CHECKPOINTS": 3, "NUM_CHAINS": 1, "NUM_WARMUP": 5, "NUM_SAMPLES": 10,
        "SGLD_BATCH": 8},
}


def _kernel_env() -> dict:
    """The environment of the kernel: this one, with matplotlib left to the inline backend."""
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    return env


def _execute(notebook) -> None:
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute(env=_kernel_env())


def _code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _with_sizes(notebook, sizes: dict):
    """The notebook with `NAME = value` lines of its first code cell set to `sizes` (each name
    must be assigned there: a renamed size fails here instead of silently running full size)."""
    cell = _code_cells(notebook)[0]
    for name, value in sizes.items():
        source, count = re.subn(rf"^{name} = [^#\n]*", f"{name} = {value!r}  ", cell.source,
                                flags=re.MULTILINE)
        assert count == 1, f"{name} is not assigned in the first code cell"
        cell.source = source
    return notebook


def test_the_notebooks_exist():
    assert [path.name for path in NOTEBOOKS] == [
        "01_compare_model_classes.ipynb",
        "02_llc_of_a_trained_network.ipynb",
        "03_fisher_landscapes.ipynb",
        "04_your_own_model_landscape.ipynb",
        "05_llc_along_training.ipynb",
        "06_what_the_posterior_says_about_the_data.ipynb",
        "07_transformer_heads_along_training.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == KERNEL
    for index, cell in enumerate(_code_cells(notebook)):
        assert cell.outputs == [], f"{path.name}: code cell {index} has stored outputs"
        assert cell.execution_count is None, f"{path.name}: code cell {index} has a count"


def test_kernel_runs_this_interpreter():
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import sys\nprint(sys.prefix)\nprint(sys.executable)")]
    )
    _execute(notebook)
    prefix, executable = notebook.cells[0].outputs[0]["text"].split()
    assert Path(prefix) == Path(sys.prefix)
    assert Path(executable) == Path(sys.executable)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes(path):
    notebook = _with_sizes(nbformat.read(path, as_version=4), TEST_SIZES.get(path.name, {}))
    _execute(notebook)  # raises CellExecutionError, with the cell and traceback, on any error
    cells = _code_cells(notebook)
    assert all(cell.execution_count is not None for cell in cells)
    outputs = [output for cell in cells for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    # every notebook shows tables and figures, and ends on a computed result
    assert any("image/png" in output.get("data", {}) for output in outputs), "no figure shown"
    assert any(
        output.output_type == "execute_result" for output in outputs
    ), "no cell returned a result"
    assert cells[-1].outputs, "the last code cell produced no output"
