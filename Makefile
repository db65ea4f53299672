# Each target does its own setup: a fresh machine needs only python3 (3.11+), pip and npm.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CODEX_VERSION := 0.171.0
CODEX  := .tools/node_modules/.bin/codex

.PHONY: run test lint install codex clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The real binary, pinned, installed into .tools/ (never globally).
$(CODEX):
	npm install --silent --no-audit --no-fund --prefix .tools @openai/codex@$(CODEX_VERSION)

codex: $(CODEX)

## The main job: every built-in scenario against the in-process fake app-server.
run: $(BIN)/.installed
	$(BIN)/codex-harness run

## The whole test suite, real-binary tests included (the pinned codex is installed first).
test: $(BIN)/.installed $(CODEX)
	CODEX_BIN=$(abspath $(CODEX)) $(BIN)/python -m pytest -n auto -q $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .tools
