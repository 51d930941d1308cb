# Two commands for a fresh clone: `make run` starts the daemon, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench fmt

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --config-settings editable_mode=compat -e '.[dev,local]'
	$(BIN)/python -m compileall -q cofferd cofferctl  # cofferctl starts faster from bytecode
	touch $@

run: $(BIN)/.installed
	$(BIN)/cofferd

test: $(BIN)/.installed
	$(BIN)/python -m pytest

fmt: $(BIN)/.installed
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
