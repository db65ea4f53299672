#!/usr/bin/env bash
# codex-harness's contracts against our client: fails only on a new must failure (exit 1) or a usage error (3).
set -euo pipefail
CLIENT_CMD=${CLIENT_CMD:?set CLIENT_CMD to the command that runs your adapter}
HARNESS=${CODEX_HARNESS:-"codex-harness @ git+https://github.com/YOU/codex-harness"}
BASELINE=${BASELINE:-known-failures.toml}
OUT=${OUT:-out}
VENV=${VENV:-.codex-harness-venv}

[ -x "$VENV/bin/codex-harness" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet "$HARNESS"
[ -f "$BASELINE" ] || echo "failures = []" > "$BASELINE"   # first run: nothing accepted yet
status=0
"$VENV/bin/codex-harness" run --client-cmd "$CLIENT_CMD" \
    --baseline "$BASELINE" --stale warn --report "$OUT" ${SCENARIOS:-} || status=$?
echo "report: $OUT/index.html (artifact), $OUT/junit.xml (test view)"
echo "accept today's failures for now: $VENV/bin/codex-harness baseline $OUT > $BASELINE (review it in the PR)"
exit "$status"
