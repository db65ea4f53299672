"""`fuzz --client-cmd`: the fuzzer against an outside client, judged as `run --client-cmd` judges it.

Bounded for CI (each campaign by --max-time, a ceiling: the whole file takes under a minute on an idle machine): a
known-bad client (buggy.py --die-on-garbage) is found with two examples at once (--jobs 2) and shrunk to a scenario
of at most 2 turns and 1 fault that `run --client-cmd --scenario FILE` replays to the same failure; a failure is saved
in hypothesis's example database and found again first by the next campaign; the careful client has no finding
within its time.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
from support import paths

from contracts.exitcodes import FAILED, OK, USAGE
from harness.cli import main

REPO = paths.REPO
CLIENTS = REPO / "conformance" / "clients"
BUGGY = f"{sys.executable} {CLIENTS / 'buggy.py'} --die-on-garbage"
CAREFUL = f"{sys.executable} {CLIENTS / 'careful.py'}"
MAX_EXAMPLES = 40  # the known-bad flag is found within this many (6 generated first on seed 5 with --jobs 2)
# Seeded, so the finding comes early whatever the machine's load: on an idle machine seed 5 is found in 3 s, and
# found and shrunk in 14 s. Unseeded, one CI run found it only at the 24th example, 40 s in, and had no time left to
# cut 3 faults to 1 under --max-time 50.
SEED = "5"
MAX_TIME = "60"
#: the database campaign's ceiling: it is unseeded (hypothesis's rule), so its finding comes when it comes (7 to 17
#: examples, 2 to 15 s on an idle machine, over 8 seeds)
DB_MAX_TIME = "90"


def _examples(out: str) -> int:
    line = next(line for line in out.splitlines() if line.startswith("examples run:"))
    return int(line.split()[2])


def test_a_known_bad_client_is_found_shrunk_and_replayed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fuzz", "--client-cmd", BUGGY, "--examples", str(MAX_EXAMPLES), "--max-time", MAX_TIME, "--quiet"]
    assert main([*argv, "--seed", SEED, "--report", str(tmp_path / "out"), "--jobs", "2"]) == FAILED
    out = capsys.readouterr().out
    (found,) = (tmp_path / "out").glob("*.toml")
    shrunk = tomllib.loads(found.read_text())
    faults = len(shrunk.get("faults", [])) + sum(len(t.get("faults", [])) for t in shrunk.get("turns", []))
    assert len(shrunk.get("turns", [])) <= 2 and faults <= 1, out + found.read_text()
    assert f"reproduce: codex-harness run --client-cmd '{BUGGY}'" in out
    assert "flaky" not in out, out
    assert main(["run", "--quiet", "--client-cmd", BUGGY, "--scenario", str(found)]) == FAILED


def test_a_finding_is_saved_and_found_again_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With a database a campaign is not seeded (hypothesis's rule): the first one is random, so it is not shrunk
    (it ends at its finding) and its ceilings are wide; the next one replays the database first."""
    argv = ["fuzz", "--client-cmd", BUGGY, "--quiet", "--no-shrink", "--database", str(tmp_path / "db")]
    assert main([*argv, "--examples", "80", "--max-time", DB_MAX_TIME, "--jobs", "2"]) == FAILED
    assert "RESULT: FAIL" in capsys.readouterr().out
    assert main(argv) == FAILED
    assert _examples(capsys.readouterr().out) <= 2


def test_the_careful_client_has_no_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fuzz", "--client-cmd", CAREFUL, "--examples", "200", "--max-time", "30", "--seed", "3", "--quiet"]
    argv += ["--jobs", "2"]
    assert main(argv) == OK
    out = capsys.readouterr().out
    assert "RESULT: PASS" in out and _examples(out) >= 1


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--target", "fake"], "fake-process"),
        (["--max-time", "0"], "--max-time"),
        (["--shard", "4/3"], "--shard"),
        (["--jobs", "0"], "--jobs"),
        (["--jobs", "33"], "--jobs"),
    ],
)
def test_bad_options_are_usage_errors(extra: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--client-cmd", CAREFUL, "--examples", "1", *extra]) == USAGE
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["--jobs", "2"], ["--release", "0.163.0"]])
def test_jobs_and_a_release_need_an_outside_client(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--examples", "1", *extra]) == USAGE
    assert "--client-cmd" in capsys.readouterr().err


def test_an_unknown_release_is_refused_before_any_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--client-cmd", CAREFUL, "--examples", "1", "--release", "9.9.9"]) == USAGE
    assert "no release profile '9.9.9'" in capsys.readouterr().err


def test_a_baseline_entry_is_known_in_any_turn() -> None:
    from contracts.checks import Check
    from contracts.report import BaselineEntry
    from harness.fuzz.outside import findings

    known = [BaselineEntry("garbage_lines", "fake-process", "terminal_status", "turn 1 status")]

    def failed(name: str, contract: str = "terminal_status") -> Check:
        return Check("fuzz_x", "fake-process", contract, name, "fail", "", level="must")

    assert findings([failed("turn 2 status")], known) == []
    assert findings([failed("turn 2 final text")], known) == [failed("turn 2 final text")]
    assert findings([failed("turn 2 status", "usage")], known) == [failed("turn 2 status", "usage")]
