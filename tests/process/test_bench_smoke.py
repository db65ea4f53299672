"""Each benchmark script runs in its tiny mode, prints its table and hands back rows with ratios.

A benchmark is not a timed unit test: nothing here asserts a speed, only that the script works end
to end (its server starts, its loops read the flood, its baseline is measured, its table prints).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support import paths

REPO = paths.REPO
BENCH = REPO / "bench"


def run_script(script: str, tmp_path: Path, *extra: str, timeout: float = 120) -> tuple[str, list[dict]]:
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--json", str(out), *extra],
        capture_output=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    text = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert "| bench" in text and "| measure" in text, text
    return text, orjson.loads(out.read_bytes())["rows"]


def ratios(rows: list[dict]) -> list[float]:
    return [r["ratio"] for r in rows if r["ratio"] is not None]


def test_ingest_prints_ratios_against_the_bare_loop(tmp_path: Path) -> None:
    text, rows = run_script("ingest.py", tmp_path)
    names = {r["name"] for r in rows}
    assert {"mem bare", "pipe bare", "pipe LineDecoder+validate"} <= names
    assert all(r > 0 for r in ratios(rows)) and len(ratios(rows)) >= 4
    assert "x pipe bare" in text


def test_interrupt_measures_the_wire_round_trip(tmp_path: Path) -> None:
    text, rows = run_script("interrupt.py", tmp_path)
    bare = [r for r in rows if r["name"].startswith("hold bare")]
    assert len(bare) == 2 and all(r["value"] > 0 for r in bare)
    if (BENCH / "_client_adapter.py").exists():
        overhead = next((r for r in rows if r["name"] == "hold overhead p99"), None)
        assert overhead is not None and overhead["ratio"] is not None, text


def test_fake_start_times_the_fake_next_to_the_interpreter(tmp_path: Path) -> None:
    text, rows = run_script("fake_start.py", tmp_path)
    names = [r["name"] for r in rows]
    assert names[:3] == ["python -c pass", "fake-codex --version", "fake-codex app-server: initialize answered"]
    assert all(r["ratio"] > 0 and r["cpu_ratio"] > 0 for r in rows[1:3]), text
    assert "x python -c pass" in text


def test_suite_times_the_run_command(tmp_path: Path) -> None:
    _, rows = run_script("suite.py", tmp_path, timeout=180)
    assert rows[0]["name"] == "codex-harness --help" and rows[0]["value"] > 0
    if importlib.util.find_spec("harness.commands.run") is not None:
        run = next(r for r in rows if r["name"] == "codex-harness run")
        assert run["ratio"] is not None and run["ratio"] > 0, run["note"]


def test_sdk_compare_runs_when_the_sdk_is_installed(tmp_path: Path) -> None:
    # Asked in a child: importing bench/ here would put it on this process's sys.path.
    where = "import sys; sys.path.insert(0, sys.argv[1]); import sdk_compare; print(sdk_compare.default_venv())"
    venv = subprocess.run([sys.executable, "-c", where, str(BENCH)], capture_output=True, check=True, timeout=60)
    python = Path(venv.stdout.decode().strip()) / "bin" / "python"
    if not python.exists():
        # The SDK needs PyPI. CI reaches it, so there the venv is built here (the SDK tests would build the same
        # one, in whatever order xdist runs them); elsewhere a missing SDK is said as a skip.
        from conformance.clients.sdk import SdkUnavailable, ensure_sdk

        try:
            ensure_sdk(python.parent.parent)
        except SdkUnavailable as exc:
            if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
                pytest.fail(f"the openai-codex SDK could not be installed: {exc}")
            pytest.skip(f"openai-codex SDK venv not built ({python}): {exc}")
    text, rows = run_script("sdk_compare.py", tmp_path, "--sdk-python", str(python))
    assert rows[0]["name"] == "pipe SDK" and rows[0]["value"] > 0
    assert ratios(rows) and "x pipe SDK" in text


def test_relay_measures_its_own_in_to_out_against_a_forwarding_only_copy(tmp_path: Path) -> None:
    text, rows = run_script("relay.py", tmp_path)
    names = {r["name"] for r in rows}
    assert {"pingpong relay in->out p99", "pingpong copy in->out p99", "flood relay in->out p99"} <= names
    assert all(r > 0 for r in ratios(rows))
    assert "x pingpong copy in->out p99" in text


def test_run_all_combines_the_tables(tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--quick", "--only", "ingest", "interrupt", "--json", str(out)],
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    text = proc.stdout.decode()
    assert "Machine:" in text and "| ingest" in text and "| interrupt" in text
    assert {r["bench"] for r in orjson.loads(out.read_bytes())["rows"]} == {"ingest", "interrupt"}


def test_report_html_prints_ratios_against_the_text_table(tmp_path: Path) -> None:
    text, rows = run_script("report_html.py", tmp_path, "--no-browser")
    assert "index.html size" in text and all(r > 0 for r in ratios(rows))


def test_scale_prints_the_turns_ratio(tmp_path: Path) -> None:
    text, rows = run_script("scale.py", tmp_path)
    ratio = next(r for r in rows if r["name"].startswith("t(1,000) / t(100)"))
    assert ratio["ratio"] is not None and ratio["ratio"] > 1, text
    assert all("exit 0" in r["note"] for r in rows if r["name"].endswith(" turns")), text
