"""`run --shard K/N` splits a catalogue across machines; `report merge` joins the shard reports into what one run
of the whole catalogue gives: the same checks, the same verdict, the same exit code."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from test_cli_run import scenario_file

from contracts.exitcodes import FAILED, OK, USAGE, UsageError
from harness import shards
from harness.cli import main
from harness.scenario_lookup import builtin_names


def _checks(report: Path) -> list[tuple[str, ...]]:
    rows = orjson.loads((report / "checks.json").read_bytes())
    return sorted((c["scenario"], c["target"], c["contract"], c["name"], c["status"], c["level"]) for c in rows)


def test_three_shards_merged_are_one_run_check_for_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = scenario_file(tmp_path, "mine_fails", status="failed")  # one failure, so the verdict is not trivial
    extra = ["--scenario", str(failing), *(a for n in builtin_names() for a in ("--scenario", n))]
    whole = main(["run", "--quiet", "--report", str(tmp_path / "whole"), *extra])
    codes = [
        main(["run", "--quiet", "--shard", f"{k}/3", "--report", str(tmp_path / f"s{k}"), *extra]) for k in (1, 2, 3)
    ]
    capsys.readouterr()
    merged = main(["report", "merge", str(tmp_path / "merged"), *(str(tmp_path / f"s{k}") for k in (1, 2, 3))])
    out = capsys.readouterr().out
    assert whole == merged == FAILED and FAILED in codes
    assert _checks(tmp_path / "merged") == _checks(tmp_path / "whole")
    assert out.rstrip().splitlines()[-3].startswith("RESULT: FAIL") or "RESULT: FAIL" in out
    sessions = sorted(p.relative_to(tmp_path / "merged") for p in (tmp_path / "merged").glob("sessions/*/*"))
    assert sessions == sorted(p.relative_to(tmp_path / "whole") for p in (tmp_path / "whole").glob("sessions/*/*"))
    assert (tmp_path / "merged" / "index.html").is_file() and (tmp_path / "merged" / "junit.xml").is_file()
    # the failure accepted in a baseline: the merged verdict passes, as one run's would
    capsys.readouterr()
    assert main(["baseline", str(tmp_path / "merged")]) == OK
    (tmp_path / "known.toml").write_text(capsys.readouterr().out)
    args = ["--baseline", str(tmp_path / "known.toml")]
    again = main(["report", "merge", str(tmp_path / "merged2"), *(str(tmp_path / f"s{k}") for k in (1, 2, 3)), *args])
    assert again == OK


def test_the_split_is_deterministic_and_covers_everything_once() -> None:
    names = [f"s{i:02d}" for i in range(20)]
    parts = [shards.pick(names, names, k, 3) for k in (1, 2, 3)]
    assert sorted(n for p in parts for n in p) == names
    assert shards.pick(list(reversed(names)), list(reversed(names)), 1, 3) == list(reversed(parts[0]))


@pytest.mark.parametrize("spec", ["0/3", "4/3", "1/0", "a/b", "١/٣", "1/3/4", "", "1/100000"])
def test_a_bad_shard_is_a_usage_error(spec: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        shards.parse(spec)


def test_overlapping_shards_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        main(["run", "--quiet", "--report", str(tmp_path / name), "--scenario", "plain"])
    capsys.readouterr()
    assert main(["report", "merge", str(tmp_path / "m"), str(tmp_path / "a"), str(tmp_path / "b")]) == USAGE
    assert "overlap" in capsys.readouterr().err
    assert main(["report", "merge", str(tmp_path / "m2"), str(tmp_path / "nothing")]) == USAGE
