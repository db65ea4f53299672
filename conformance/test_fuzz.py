"""Fault fuzzing in CI (marker ``fuzz``): generated scenarios against the client, judged by the contracts.

At least 1,000 in-process examples, split into shards so ``pytest -n auto`` spreads them over cores;
a small sample also runs against ``fake-codex`` as a process, under the no-leak fixture (autouse from the
plugin). A failure is shrunk and written as a scenario file; the assertion message says how to replay it.

Knobs (environment): ``CODEX_HARNESS_FUZZ_EXAMPLES`` (total in-process examples, default 1000),
``CODEX_HARNESS_FUZZ_SEED`` (base seed, default 20261130), ``CODEX_HARNESS_FUZZ_OUT`` (where failures go).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.fuzz.driver import FAST_FAULTS, fuzz
from harness.fuzz.strategies import scenarios

pytestmark = pytest.mark.fuzz

SHARDS = 8
TOTAL = int(os.environ.get("CODEX_HARNESS_FUZZ_EXAMPLES", "1000"))
SEED = int(os.environ.get("CODEX_HARNESS_FUZZ_SEED", "20261130"))
#: Examples of the process sample (all faults but the slow oversized line).
PROCESS_SAMPLE = 6


def _out(tmp_path: Path) -> Path:
    configured = os.environ.get("CODEX_HARNESS_FUZZ_OUT")
    return Path(configured) if configured else tmp_path / "fuzz-failures"


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_in_process(shard: int, tmp_path: Path) -> None:
    examples = -(-TOTAL // SHARDS)  # ceil: the shards together run at least TOTAL
    report = fuzz(examples, seed_value=SEED + shard, out=_out(tmp_path))
    print(report.text())
    assert report.failure is None, report.text()
    assert report.generated >= examples


def test_fuzz_sample_on_fake_process(tmp_path: Path) -> None:
    # Real time: only actions that cannot race (held approvals, a silent server) and short waits.
    strategy = scenarios(fault_kinds=FAST_FAULTS, real_time=True, max_turns=2)
    report = fuzz(PROCESS_SAMPLE, seed_value=SEED, out=_out(tmp_path), target="fake-process", strategy=strategy)
    print(report.text())
    assert report.failure is None, report.text()
