"""The README's tour runs as written and prints what it claims."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.heavy
def test_readme_tour_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace = {}
    exec(compile(blocks[0], "README tour", "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    assert "restarts agree" in printed
    assert "λ = 8 (multiplicity 1)" in printed
    assert namespace["fit"].num_agree >= 1
