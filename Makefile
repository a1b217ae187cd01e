# Every target bootstraps its own virtual environment in .venv: nothing is installed by hand.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.slt-installed

.PHONY: demo test bench lint clean

# uv installs the same packages as pip, compiled to bytecode as pip does, in 19 s instead of 39
# (clean clone). Without that bytecode every test process compiles the packages it imports,
# where PYTHONDONTWRITEBYTECODE is set, as on this project's machines: the suite then took 47 s
# longer. pip installs them where uv cannot be had.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	($(PY) -m pip install --quiet uv && $(VENV)/bin/uv pip install --quiet --compile-bytecode \
	  --python $(PY) -e '.[dev,bench]') \
	  || ($(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -e '.[dev,bench]')
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/slt demo

test: $(STAMP)
	$(PY) -m pytest -q -n 3 --dist loadscope  # a module stays on one worker (compiles once); 3 workers on 2 cores fill the gaps of compiling and waiting (clean clone: 514-562 s for 1,053 tests)

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check slt tests benchmarks conftest.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
