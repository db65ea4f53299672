# Each target does its own setup: a fresh machine needs only python3 (3.11+), pip and npm.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The default release and the other profiled ones are read from the release folders (contracts/releases/), their
# one home: a new folder is installed and tested without an edit here.
CODEX_VERSION := $(shell sed -n 's/.*"default": *"\([^"]*\)".*/\1/p' contracts/releases/default.json)
CODEX  := .tools/node_modules/.bin/codex

.PHONY: run test test-fast lint typecheck install codex codex-releases clean screenshots reference docs

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

# Earlier releases with a fake profile, for their fidelity and trace-format tests (each in .tools/codex-X/).
OLDER_RELEASES := $(filter-out $(CODEX_VERSION),$(patsubst contracts/releases/codex-cli-%,%,$(wildcard contracts/releases/codex-cli-*)))
OLDER_CODEX    := $(foreach v,$(OLDER_RELEASES),.tools/codex-$(v)/node_modules/.bin/codex)

.tools/codex-%/node_modules/.bin/codex:
	npm install --silent --no-audit --no-fund --prefix .tools/codex-$* @openai/codex@$*

# A release with no folder in the package, learned in the suite (`codex-harness release learn`, tests/real/test_real_learn.py).
LEARNED_RELEASES := 0.160.0 0.150.0
LEARNED_CODEX    := $(foreach v,$(LEARNED_RELEASES),.tools/codex-$(v)/node_modules/.bin/codex)

codex-releases: $(CODEX) $(OLDER_CODEX) $(LEARNED_CODEX)

## The main job: every built-in scenario against the in-process fake app-server; the table in the terminal,
## the HTML report (sequence diagrams, failed checks) in reports/latest/index.html.
run: $(BIN)/.installed
	$(BIN)/codex-harness run --report reports/latest

## The screenshots of docs/report.md (needs Chromium: apt-get install chromium).
screenshots: $(BIN)/.installed
	$(BIN)/python bench/screenshots.py

# The package's bytecode, written once before the tests: every fake-codex and client the suite starts imports it,
# and an interpreter run with PYTHONDONTWRITEBYTECODE (as CI machines may) would compile the sources at each start
# (about a fifth of a process test's CPU time, measured on tests/process/test_fake_process.py and test_fake_says.py).
COMPILE = $(BIN)/python -m compileall -q contracts fake_server harness conformance >/dev/null

# Workers of the whole suite: three per core, at most 16. Most of its time is spent waiting (a hung client's
# deadline, a real binary's answer): on a 2-core machine, 4 workers ran it in 19 min 44 s where 2 took 31 min 43 s at
# the same load, and CI's pytest took 14 min 0 s with 4 workers, using half the machine's CPU time.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); n=$$((n * 3)); [ $$n -gt 16 ] && n=16; echo $$n)

## The whole test suite, real-binary tests included (the pinned codex, the earlier profiled releases and the
## release learned in the suite are installed first).
test: $(BIN)/.installed $(CODEX) $(OLDER_CODEX) $(LEARNED_CODEX)
	$(COMPILE)
	CODEX_BIN=$(abspath $(CODEX)) \
	$(foreach v,$(OLDER_RELEASES) $(LEARNED_RELEASES),CODEX_BIN_$(subst .,_,$(v))=$(abspath .tools/codex-$(v)/node_modules/.bin/codex)) \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -q $(PYTEST_ARGS)

## The tests a developer runs on every change (docs/tests.md): none starts a process (one that does fails), none
## needs the real binary; under a minute.
test-fast: $(BIN)/.installed
	$(COMPILE)
	$(BIN)/python -m pytest -n auto -q -p no:cacheprovider --fast tests $(PYTEST_ARGS)

## Re-record the reference set (tests/data/real/reference.txt) from the real binary into
## tests/data/real/<its version>/{transcripts,probes,trace-bundles}/. Another binary: make reference CODEX=PATH.
reference: $(BIN)/.installed $(CODEX)
	@version=$$($(BIN)/python -c 'import sys; from harness.codex_bin import codex_version; print(codex_version(sys.argv[1]))' $(CODEX)); \
	out=tests/data/real/$$version; \
	test -n "$$version" || { echo "cannot read the version of $(CODEX)"; exit 3; }; \
	grep -v '^#' tests/data/real/reference.txt | while read -r set name scenario; do \
	  test -n "$$name" || continue; \
	  $(BIN)/codex-harness record --codex $(CODEX) --scenario $$scenario \
	    --out $$out/$$set/$$name.jsonl --trace-out $$out/trace-bundles/$$name || exit $$?; \
	done || exit $$?; \
	for set in transcripts probes trace-bundles; do \
	  test -f $$out/$$set/README.md || sed -e "s/@VERSION@/$$version/g" -e "s/@SET@/$$set/g" \
	    tests/data/real/README.set.md > $$out/$$set/README.md; \
	done

## Every generated block of the docs (tables, counts the code knows) rewritten from the code; CI fails when one is stale.
docs: $(BIN)/.installed
	$(BIN)/python scripts/docs.py

## mypy over the six packages, at the level [tool.mypy] in pyproject.toml sets; 0 errors, or lint (and CI) fails.
typecheck: $(BIN)/.installed
	$(BIN)/mypy

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory typecheck

clean:
	rm -rf $(VENV) .tools
