# Every target bootstraps its own virtual environment in .venv: nothing is installed by hand.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.slt-installed
DOCS_STAMP := $(VENV)/.slt-docs-installed

.PHONY: demo test bench lint clean dist docs notebooks test-notebooks test-packaging test-slow

# uv installs the same packages as pip, compiled to bytecode as pip does, in 19 s instead of 39
# (clean clone). Without that bytecode every test process compiles the packages it imports,
# where PYTHONDONTWRITEBYTECODE is set, as on this project's machines: the suite then took 47 s
# longer. pip installs them where uv cannot be had.
# The distribution was called `slt` before it became `singular-learning`: a venv made then has
# both installed, and uninstalling either would remove the other's `slt` command, so the old
# one goes first (nothing happens where it is not installed).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	($(PY) -m pip install --quiet uv && $(VENV)/bin/uv pip uninstall --quiet --python $(PY) slt \
	  && $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[dev,bench]') \
	  || ($(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip uninstall --quiet --yes slt \
	      && $(PY) -m pip install --quiet -e '.[dev,bench]')
	touch $(STAMP)

# The documentation's tools (the docs extra), in the same venv: mkdocstrings reads slt's source.
$(DOCS_STAMP): $(STAMP)
	($(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[dev,bench,docs]') \
	  || $(PY) -m pip install --quiet -e '.[dev,bench,docs]'
	touch $(DOCS_STAMP)

demo: $(STAMP)
	$(VENV)/bin/slt demo

test: $(STAMP)
	$(PY) -m pytest -q -n 3 --dist loadscope  # a module stays on one worker (compiles once); 3 workers on 2 cores fill the gaps of compiling and waiting (2 workers: longer). Clean clone, empty compilation cache, this project's 2-core machine: 584-624 s for 1,295 tests on 2026-11-29, 470 s on a faster one the same evening (581 s beside other work), 460-481 s for 1,309-1,312 tests on that one in the twentieth session (benchmarks/RESULTS.md has the history); the notebooks' executions are in test-notebooks

# Every notebook executed top to bottom at its test sizes (tests/test_notebooks.py), two at a
# time: about 190 s of CPU, most of it compiling, which make test's 10 minutes do not hold;
# .ci/run runs it after make test.
test-notebooks: $(STAMP)
	$(PY) -m pytest -q -m notebooks -n 2 --dist load tests/test_notebooks.py

# The long statistical checks (`@pytest.mark.slow`) that make test's 10 minutes leave out:
# accuracy against exact answers at realistic sizes, bitwise checks against recorded values.
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow -n 2 --dist loadscope

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check slt tests benchmarks tools conftest.py

# sdist and wheel in dist/, by the standard front end (PEP 517, an isolated build environment;
# uv installs setuptools into it where uv is there, pip otherwise).
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --installer uv --outdir dist . || $(PY) -m build --outdir dist .

# The wheel installed into a fresh venv and run from outside the source tree, and the docs site
# built in strict mode and read back (tests/distribution; .ci/run runs it after make test, whose
# 10 minutes it does not fit in).
test-packaging: $(DOCS_STAMP)
	$(PY) -m pytest -q -p no:xdist -m packaging tests/distribution

# The site in site/, offline, in strict mode: a broken link or cross-reference, or a docstring
# griffe cannot read, fails the build. Notebooks are rendered from docs/notebooks/ as stored.
# (NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 and its own end of life in 2027.)
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --site-dir site

# Re-executes notebooks/ at their own sizes into docs/notebooks/ (several minutes on 2 cores):
# run it after changing a notebook, and commit the result.
notebooks: $(STAMP)
	$(PY) tools/execute_notebooks.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis dist site
