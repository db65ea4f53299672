"""``codex-harness latency``: nearest-rank percentiles, measurement from a record, the CLI against fake-process."""

from __future__ import annotations

import math

import orjson
import pytest
from test_contracts_records import interrupted_record

from contracts.exitcodes import OK, USAGE
from harness.cli import main
from harness.latency import measure, nearest_rank, percentiles, summary_line


def test_nearest_rank_percentiles() -> None:
    values = list(range(1, 101))
    assert nearest_rank(values, 50) == 50 and nearest_rank(values, 95) == 95 and nearest_rank(values, 99) == 99
    assert nearest_rank([7.0], 99) == 7.0
    assert percentiles([3.0, 1.0, 2.0]) == {"p50": 2.0, "p95": 3.0, "p99": 3.0, "max": 3.0}
    assert math.isnan(nearest_rank([], 50))


def test_summary_line_format() -> None:
    line = summary_line("cancel_to_result", {"n": 3, "p50": 1.0, "p95": 2.0, "p99": 2.5, "max": 3.0})
    assert line == "SUMMARY cancel_to_result n=3 p50=1.00ms p95=2.00ms p99=2.50ms max=3.00ms"


def test_measure_reads_the_wire_and_the_result() -> None:
    sample = measure(interrupted_record(server_delay=0.010))
    assert sample.status == "aborted" and sample.error is None
    assert sample.interrupt_to_completed_ms == pytest.approx(12.0, abs=0.01)
    assert sample.cancel_to_result_ms == pytest.approx(13.0, abs=0.01)
    assert sample.client_overhead_ms == pytest.approx(1.0, abs=0.01)


def test_in_process_target_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["latency", "--target", "fake"]) == USAGE
    assert "virtual time" in capsys.readouterr().err


def test_latency_against_fake_process_prints_both_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["latency", "--scenario", "interrupt_pending_approval", "--samples", "2", "--warmups", "0"])
    out = capsys.readouterr().out
    assert code == OK, out
    assert "SUMMARY interrupt_to_completed n=2 " in out
    assert "SUMMARY cancel_to_result n=2 " in out


def test_latency_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["latency", "--scenario", "running_command", "--samples", "1", "--warmups", "0", "--json"])
    doc = orjson.loads(capsys.readouterr().out)
    assert code == OK
    assert doc[0]["scenario"] == "running_command" and doc[0]["all_aborted"]
    assert doc[0]["samples"][0]["status"] == "aborted"
