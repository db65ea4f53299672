"""Hostile input: each case gets a clear error, the documented exit code and no traceback.

Exit codes (README): 0 success, 1 the thing checked does not hold, 2 invalid input, 3 usage errors and
unreadable paths. Every case runs the real entry point (``main(argv)``) and captures what a user sees.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest
from support import paths

from contracts.exitcodes import INVALID_INPUT, OK, USAGE
from contracts.pipes import BROKEN_PIPE
from contracts.record import SessionRecord, WireEntry
from fake_server.catalogue import CATALOGUE_DIR


def run_cli(
    capsys: pytest.CaptureFixture[str], main: Callable[[Sequence[str]], int], argv: Sequence[str]
) -> tuple[int, str]:
    """Exit code and everything printed (stdout + stderr); SystemExit is an exit code too."""
    try:
        code = int(main(list(argv)))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def assert_clean(text: str) -> None:
    assert "Traceback (most recent call last)" not in text, text


# Scenario-file cases and CLI/path cases follow, each in its own section.


# --- scenario files: refused at load (exit 2), or a failing `scenario` check when only the run can tell ---

_PLAIN_TURN = '[[turns]]\ninput = "Say hello"\n'


def _hostile_cases() -> list[tuple[str, str, str]]:
    """(id, scenario TOML, what the message must say). Every case is refused at load with exit 2."""
    deep_array = "x = " + "[" * 500 + "]" * 500 + "\n"
    deep_table = "[expect.notes." + ".".join(["a"] * 500) + "]\nv = 1\n"
    between = "expected an integer between"

    def fault(body: str, turn: str = _PLAIN_TURN) -> str:
        return f"{turn}[[turns.faults]]\n{body}\n"

    def expect(body: str) -> str:
        return f"{_PLAIN_TURN}[expect]\n{body}\n"

    def items(body: str, extra: str = "") -> str:
        return f"[[turns]]\n[[turns.responses]]\nitems = [{body}]\n{extra}"

    two_calls = '{ type = "command", command = "a", call_id = "c" }, { type = "command", command = "b", call_id = "c" }'
    cancel_at_99 = '[client]\nactions = [{ turn = 1, do = "cancel", at = "delta", n = 99 }]\n'
    waits = "[client]\n" + '[[client.probe]]\nraw = "{}"\nwait_ms = 60000\n' * 3
    completed = '[[expect.turns]]\nstatus = "completed"\n'
    return [
        # hostile scenario files
        ("name-traversal", f'name = "../../x"\n{_PLAIN_TURN}', "name: expected a safe name"),
        ("name-absolute", f'name = "/tmp/x"\n{_PLAIN_TURN}', "name: expected a safe name"),
        ("nested-arrays-500", deep_array + _PLAIN_TURN, "nested at most 32 deep"),
        ("crash-exit-256", fault('kind = "crash"\nexit_code = 256'), f"exit_code: {between} 0 and 255"),
        ("garbage-count-1e9", fault('kind = "garbage_lines"\ncount = 1000000000'), f"count: {between} 1 and 10000"),
        ("garbage-count-float", fault('kind = "garbage_lines"\ncount = 1e9'), f"count: {between} 1 and 10000"),
        ("oversized-1e12", fault('kind = "oversized_line"\nsize = 1000000000000'), f"size: {between} 64"),
        ("negative-delay", fault('kind = "delayed_completion"\ndelay_ms = -5'), f"delay_ms: {between} 0"),
        ("point-never-comes", fault('kind = "crash"\nat = "delta"\nn = 99'), "n: expected at most 2"),
        ("server-status-banana", expect(completed + 'server_status = "banana"'), "server_status: expected one of"),
        ("completed-with-exit-3", expect("server_exit = 3\n" + completed), "server_exit: expected an exit status"),
        ("reasoning-over-output", expect(completed + "usage = { output = 2, reasoning = 5 }"), "reasoning <= output"),
        # found beyond the list
        ("name-from-file-stem", _PLAIN_TURN, "name: expected a safe name"),
        ("nested-tables-500", deep_table + _PLAIN_TURN, "nested at most 32 deep"),
        ("fault-where-it-does-nothing", fault('kind = "interrupt_ignored"\nat = "start"'), "has an effect: interrupt"),
        ("session-point-in-turn-2", _PLAIN_TURN + fault('kind = "overload"\nat = "initialize"'), "first turn's faults"),
        ("once-per-turn-point-n-2", fault('kind = "hang"\nat = "end"\nn = 2'), "comes once per turn"),
        ("resolved-order-unknown", fault('kind = "resolved_order"\norder = "up"'), "one of before, after, never"),
        ("oversized-below-64", fault('kind = "oversized_line"\nsize = 10'), f"size: {between} 64"),
        ("unknown-fault-parameter", fault('kind = "crash"\nexitcode = 3'), "a parameter of fault crash"),
        ("fake-only-on-real-only", 'targets = ["real"]\n' + fault('kind = "hang"'), "targets: expected fake or"),
        ("duplicate-call-id", items(two_calls), "unique within a turn"),
        ("action-never-fires", _PLAIN_TURN + cancel_at_99, "this action would never fire"),
        ("action-started-n-2", _PLAIN_TURN + cancel_at_99.replace('delta", n = 99', 'started", n = 2'), "once a turn"),
        ("item-delay-huge", items('{ type = "message", text = "hi", delay_ms = 10000000000 }'), f"delay_ms: {between}"),
        ("http-status-99", items("", 'end = "http_error"\nhttp_status = 99\n'), f"http_status: {between} 100 and 599"),
        ("retries-1000", f"[config]\nstream_max_retries = 1000\n{_PLAIN_TURN}", f"stream_max_retries: {between}"),
        ("usage-tokens-1e13", items("", "usage = { input = 10000000000000 }\n"), f"input: {between} 0 and"),
        ("allow-count-negative", expect('[[expect.allow]]\ncontract = "a"\nwhat = "b"\ncount = -1'), "integer >= 0"),
        ("completed-but-interrupted", expect(completed + 'server_status = "interrupted"'), "a completed Result is"),
        ("deltas-200000", items('{ type = "message", text = "", deltas = [' + '"",' * 200_000 + "] }"), "at most 100"),
        ("client-timeout-huge", f"{_PLAIN_TURN}[client]\nturn_timeout_ms = 99999999999\n", "turn_timeout_ms: expected"),
        # 200 steps of wait_ms = 60000 were a legal 3.3-hour run
        ("probe-waits-over-2-min", _PLAIN_TURN + waits, "wait_ms that add up to at most 120000 over all steps"),
    ]


@pytest.mark.parametrize(("text", "needle", "stem"), [
    pytest.param(text, needle, "my scenario" if case == "name-from-file-stem" else "case", id=case)
    for case, text, needle in _hostile_cases()
])
def test_hostile_scenario_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str, stem: str
) -> None:
    from fake_server.cli import main as fake_main
    from harness.cli import main as harness_main

    path = tmp_path / f"{stem}.toml"
    path.write_text('description = "hostile"\n' + text, encoding="utf-8")
    report = tmp_path / "report"
    for main, argv in (
        (harness_main, ["run", "--quiet", "--scenario", str(path), "--report", str(report)]),
        (fake_main, ["app-server", "--scenario", str(path)]),
    ):
        code, out = run_cli(capsys, main, argv)
        assert code == 2, out
        assert needle in out, out
        assert str(path) in out, out  # the message names the file
        assert_clean(out)
    assert not report.exists()  # refused before anything is written
    assert not (tmp_path.parent / "x").exists()


def test_two_scenarios_with_one_name_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main as harness_main

    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    for path in (first, second):
        path.write_text(f'name = "same"\ndescription = "twins"\n{_PLAIN_TURN}', encoding="utf-8")
    code, out = run_cli(capsys, harness_main, ["run", "--quiet", "--scenario", str(first), "--scenario", str(second)])
    assert code == 2, out
    assert "a name no other scenario of the run has" in out and str(first) in out and str(second) in out
    assert_clean(out)
    code, out = run_cli(capsys, harness_main, ["run", "--quiet", "--scenario", "plain", "--scenario", "plain"])
    assert code == 2 and "a name no other scenario of the run has" in out
    assert_clean(out)


def test_an_unknown_release_is_an_invalid_scenario_for_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``release = "9.9.9"`` is refused at load like every other bad key: exit 2, the file and the key named (it
    was a usage error, exit 3, naming neither), before any binary or client is looked at."""
    from fake_server.cli import main as fake_main
    from harness.cli import main as harness_main

    monkeypatch.delenv("FAKE_CODEX_RELEASE", raising=False)
    path = tmp_path / "rel.toml"
    path.write_text(f'description = "unknown release"\nrelease = "9.9.9"\n{_PLAIN_TURN}', encoding="utf-8")
    client = f"{sys.executable} -c pass"
    for main, argv in (
        (harness_main, ["run", "--quiet", "--scenario", str(path)]),
        (harness_main, ["run", "--quiet", "--target", "fake-process", "--scenario", str(path)]),
        (harness_main, ["run", "--quiet", "--client-cmd", client, "--scenario", str(path)]),
        (harness_main, ["record", "--codex", "/nonexistent", "--scenario", str(path), "--out", str(tmp_path / "o")]),
        (harness_main, ["diff", "--codex", "/nonexistent", "--scenario", str(path)]),
        (fake_main, ["app-server", "--scenario", str(path)]),
    ):
        code, out = run_cli(capsys, main, argv)
        assert code == INVALID_INPUT, (argv, out)
        assert f"{path}: release: expected a release the fake has a profile for" in out, out
        assert "'9.9.9'" in out
        assert_clean(out)
    monkeypatch.setenv("FAKE_CODEX_SCENARIO", str(path))
    code, out = run_cli(capsys, fake_main, ["app-server"])
    assert code == INVALID_INPUT and str(path) in out, out


_NOT_STRUCK = """name = "not_struck"
description = "crash after the first delta; the garbage lines at delta 2 never come"

[[turns]]
[[turns.faults]]
kind = "crash"
at = "delta"
exit_code = 3

[[turns.faults]]
kind = "garbage_lines"
at = "delta"
n = 2

[expect]
server_exit = 3
server_trace = "unclosed"

[[expect.turns]]
status = "failed"
server_status = "none"
"""


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_fault_never_reached_fails_the_scenario_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """Only the run can tell that an earlier crash cut the point off: a failing `scenario` check, the
    client's contracts all hold."""
    import json

    from harness.cli import main as harness_main

    path = tmp_path / "not_struck.toml"
    path.write_text(_NOT_STRUCK, encoding="utf-8")
    report = tmp_path / "report"
    argv = ["run", "--quiet", "--ascii", "--target", target, "--scenario", str(path), "--report", str(report)]
    code, out = run_cli(capsys, harness_main, argv)
    assert code == 1, out
    assert "scenario / fault_not_struck" in out and "garbage_lines at delta n=2" in out, out
    assert_clean(out)
    checks = json.loads((report / "checks.json").read_text())
    rows = checks if isinstance(checks, list) else checks["checks"]
    failed = [(c["contract"], c["name"]) for c in rows if c["status"] == "fail"]
    assert failed == [("scenario", "fault_not_struck")]  # never blamed on the client


def test_python_built_scenario_with_unsafe_name_writes_nothing_outside_report(tmp_path: Path) -> None:
    from contracts.scenario import Scenario, TurnScript
    from harness.runner import run_many

    root = tmp_path
    report = root / "deep" / "report"
    runs = run_many([Scenario("../../escaped", "built past the loader", (TurnScript(),))], ["fake"], report_dir=report)
    assert [(c.contract, c.name, c.status) for c in runs[0].checks] == [("scenario", "name", "fail")]
    assert not (root / "escaped").exists() and not (root / "deep" / "escaped").exists()


# --- CLI, paths and scale: commands meet hostile paths, files and sizes with a clear error ---------------

REPO = paths.REPO
BIN = Path(sys.executable).parent


def _cli_main() -> Callable[[Sequence[str]], int]:
    from harness.cli import main

    return main


def _fake_main() -> Callable[[Sequence[str]], int]:
    from fake_server.cli import main

    return main


def _my_plain(directory: Path, name: str = "my_plain") -> Path:
    """A copy of the built-in `plain` under another name, as a user's own scenario file."""
    text = (CATALOGUE_DIR / "plain.toml").read_text(encoding="utf-8").replace('name = "plain"', f'name = "{name}"')
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _saved_plain(tmp_path: Path) -> Path:
    """A saved session record of `plain` on the in-process fake."""
    from harness.runner import play

    record = play(_load_builtin("plain"), "fake", work_dir=tmp_path / "work")
    record.save(tmp_path / "rec")
    return tmp_path / "rec"


def _load_builtin(name: str):  # type: ignore[no-untyped-def]
    from fake_server.catalogue import load_builtin

    return load_builtin(name)


def test_relative_scenario_path_runs_on_fake_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _my_plain(tmp_path)
    monkeypatch.chdir(tmp_path)  # the fake process runs in a temp dir: the path must be resolved first
    code, text = run_cli(capsys, _cli_main(), ["run", "--target", "fake-process", "--scenario", "my_plain.toml"])
    assert_clean(text)
    assert code == OK, text
    assert "startup failed" not in text and "RESULT: PASS" in text


def test_server_that_does_not_start_shows_its_stderr_on_the_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.targets.fake as fake_target

    script = "import sys; sys.stderr.write('\\x1b[31mfake-codex: cannot start: no such config\\x1b[0m\\n'); sys.exit(2)"
    monkeypatch.setattr(fake_target, "fake_codex_argv", lambda: [sys.executable, "-c", script])
    code, text = run_cli(capsys, _cli_main(), ["run", "--target", "fake-process", "--scenario", "plain", "--quiet"])
    assert_clean(text)
    assert code == 1, text
    assert "plain [fake-process]: the server did not start" in text
    assert "stderr: fake-codex: cannot start: no such config" in text  # on the terminal, colour stripped


MALFORMED_LINES = {
    "list": (b"[1]", "got a list"),
    "msg_number": (b'{"t": 0, "dir": "s2c", "msg": 5}', '"msg" must be an object'),
    "bogus_dir": (b'{"t": 0, "dir": "bogus", "msg": {}}', "\"dir\" must be c2s, s2c or note, got 'bogus'"),
    "not_json": (b'{"t": 0, "dir"', "not JSON"),
    "t_string": (b'{"t": "soon", "dir": "c2s", "msg": {}}', '"t" must be a finite number'),
    "t_nan": (b'{"t": NaN, "dir": "c2s", "msg": {}}', "not JSON"),
    "note_list": (b'{"t": 0, "dir": "note", "msg": [1]}', '"msg" of a note must be'),
    "invalid_utf8": (b'{"t": 0, "dir": "c2s", "msg": {"method": "\xff"}}', "not JSON"),
}
_GOOD = b'{"t": 0.0, "dir": "c2s", "msg": {"id": 1, "method": "initialize", "params": {}}}\n\n'


@pytest.mark.parametrize("case", sorted(MALFORMED_LINES))
def test_show_malformed_wire_line_exits_2_with_its_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line, message = MALFORMED_LINES[case]
    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(_GOOD + line + b"\n")  # line 3: a blank line 2 still counts
    code, text = run_cli(capsys, _cli_main(), ["show", str(wire), "--no-schema"])
    assert_clean(text)
    assert code == INVALID_INPUT, text
    assert f"{wire}:3: " in text and message in text, text


def test_show_record_dir_with_a_malformed_wire_line_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = _saved_plain(tmp_path)
    lines = (rec / "wire.jsonl").read_bytes().splitlines()
    lines[4] = b'{"t": 0, "dir": "c2s", "msg": 5}'
    (rec / "wire.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    code, text = run_cli(capsys, _cli_main(), ["show", str(rec)])
    assert_clean(text)
    assert code == INVALID_INPUT and "wire.jsonl:5: " in text, text


_MAXRSS = """
import resource, sys
from harness.cli import main
code = main(["show", sys.argv[1], "--no-schema"])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def _show_maxrss_kb(path: Path) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", _MAXRSS, str(path)], capture_output=True, timeout=120, cwd=path.parent
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    code, kb = err.split()[-2:]
    assert int(code) == OK
    return int(kb)


def test_show_streams_a_large_wire_file_in_bounded_memory(tmp_path: Path) -> None:
    """50 MB of transcript: peak memory grows by far less than the file (it was ~9x the file before)."""
    delta = "x" * 4000
    line = orjson.dumps(
        {"t": 0.5, "dir": "s2c", "msg": {"method": "item/agentMessage/delta", "params": {"delta": delta}}}
    )
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(line + b"\n")
    with open(big, "wb") as f:
        chunk = (line + b"\n") * 1000
        while f.tell() < 50 * 1024 * 1024:
            f.write(chunk)
    base = _show_maxrss_kb(small)
    grown = _show_maxrss_kb(big) - base
    assert grown < 20 * 1024, f"show on 50 MB grew peak memory by {grown} KB (baseline {base} KB)"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("sessions_file", "sessions is a regular file, not a directory"),
        ("checks_dir", "checks.json is a directory, not a regular file"),
        ("junit_dir", "junit.xml is a directory, not a regular file"),
        ("session_record_file", "sessions/fake/plain is a regular file, not a directory for the session record"),
        ("report_is_file", "is a regular file, not a directory"),
    ],
)
def test_run_report_dir_in_the_way_exits_3_before_playing(
    setup: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    report.mkdir()
    if setup == "sessions_file":
        (report / "sessions").write_text("")
    elif setup == "checks_dir":
        (report / "checks.json").mkdir()
    elif setup == "junit_dir":
        (report / "junit.xml").mkdir()
    elif setup == "session_record_file":
        (report / "sessions" / "fake").mkdir(parents=True)
        (report / "sessions" / "fake" / "plain").write_text("")
    else:
        report.rmdir()
        report.write_text("")
    code, text = run_cli(capsys, _cli_main(), ["run", "--scenario", "plain", "--report", str(report)])
    assert_clean(text)
    assert code == USAGE and message in text, text
    assert "[1/1]" not in text  # nothing was played


def _special(kind: str, tmp_path: Path) -> tuple[str, str]:
    """(path, what the error must call it)."""
    if kind == "fifo":
        path = tmp_path / "pipe.toml"
        os.mkfifo(path)
        return str(path), "is a FIFO (named pipe)"
    if kind == "directory":
        path = tmp_path / "adir.toml"
        path.mkdir()
        return str(path), "is a directory"
    return "/dev/zero", "is a character device"


_NEVER_BLOCK = """
import sys
from {module} import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
@pytest.mark.parametrize(
    ("module", "argv", "code"),
    [
        ("harness.cli", ["run", "--scenario"], USAGE),
        ("harness.cli", ["show"], USAGE),
        ("harness.cli", ["run", "--scenario", "plain", "--baseline"], USAGE),
        ("fake_server.cli", ["app-server", "--scenario"], USAGE),
    ],
)
def test_special_paths_are_named_and_never_block(
    kind: str, module: str, argv: list[str], code: int, tmp_path: Path
) -> None:
    """A FIFO, a directory or /dev/zero is said to be what it is; in a subprocess with a timeout: a FIFO
    opened for reading would block forever (no writer), /dev/zero would be read forever."""
    path, what = _special(kind, tmp_path)
    if argv == ["show"] and kind == "directory":
        what = "no record.json (not a saved session record)"  # show takes a record directory
    proc = subprocess.run(
        [sys.executable, "-c", _NEVER_BLOCK.format(module=module), *argv, path],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    text = (proc.stdout + proc.stderr).decode()
    assert_clean(text)
    assert proc.returncode == code, text
    assert what in text and "does not exist" not in text, text


def test_fake_codex_unreadable_path_exits_3_invalid_scenario_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run_cli(capsys, _fake_main(), ["app-server", "--scenario", str(tmp_path / "missing.toml")])
    assert_clean(text)
    assert code == USAGE and "does not exist" in text, text
    bad = tmp_path / "bad.toml"
    bad.write_text(_my_plain(tmp_path).read_text(encoding="utf-8").replace("description = ", "description = 5 #"))
    code, text = run_cli(capsys, _fake_main(), ["app-server", "--scenario", str(bad)])
    assert_clean(text)
    assert code == INVALID_INPUT and "description" in text, text


@pytest.mark.parametrize(
    "argv",
    [
        ["codex-harness", "scenarios"],
        ["codex-harness", "run", "--scenario", "plain"],
        ["codex-harness", "show", "{rec}"],
        ["fake-codex", "--version"],
    ],
    ids=["scenarios", "run", "show", "fake-codex"],
)
def test_writing_to_a_closed_pipe_prints_no_traceback(argv: list[str], tmp_path: Path) -> None:
    """Like `codex-harness scenarios | head -1`, deterministically: no reader at all, every write fails."""
    rec = _saved_plain(tmp_path) if "{rec}" in argv else None
    exe = BIN / argv[0]
    if not exe.exists():
        pytest.fail(f"{exe} is not installed (pip install -e .)")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [str(exe), *[a.replace("{rec}", str(rec)) for a in argv[1:]]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert proc.returncode == BROKEN_PIPE, err


def test_scenario_dir_without_scenarios_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a scenario")
    code, text = run_cli(capsys, _cli_main(), ["run", "--scenario-dir", str(empty)])
    assert_clean(text)
    assert code == USAGE and "holds no scenario files" in text, text
    assert "accept_for_session" not in text  # the built-ins were not run instead


@pytest.mark.parametrize("where", ["under_a_file", "a_file"])
def test_fuzz_out_unusable_is_said_first(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "sub" if where == "under_a_file" else blocker
    started = time.monotonic()
    code, text = run_cli(capsys, _cli_main(), ["fuzz", "--examples", "100000", "--out", str(out), "--quiet"])
    assert_clean(text)
    assert code == USAGE and "--report" in text, text
    assert time.monotonic() - started < 10  # refused before the first example


def test_trace_check_counts_blank_lines_toward_the_caps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """300 MB of blank lines took 83 s; here 200,000 under a cap of 10,000 lines: refused at line 10,001."""
    import contracts.trace.closure as closure
    from contracts.trace.reader import ReadLimits

    source = REPO / "tests" / "data" / "real" / "0.171.0" / "trace-bundles" / "real-as-interrupt-pending-approval"
    bundle = tmp_path / "bundle"
    shutil.copytree(source, bundle)
    with open(bundle / "trace.jsonl", "ab") as f:
        f.write(b"\n" * 200_000)
    monkeypatch.setattr(closure, "ReadLimits", lambda: ReadLimits(max_events=10_000))
    code, text = run_cli(capsys, _cli_main(), ["trace", "check", str(bundle)])
    assert_clean(text)
    assert code == INVALID_INPUT, text
    assert "more than 10000 trace events (blank lines count as events)" in text and "10001" in text, text


def test_latency_report_in_the_way_is_said_before_sampling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "latency.json").mkdir()
    argv = ["latency", "--target", "fake-process", "--samples", "1000", "--report", str(tmp_path / "rep")]
    code, text = run_cli(capsys, _cli_main(), argv)
    assert_clean(text)
    assert code == USAGE and "latency.json is a directory" in text, text
    assert "SUMMARY" not in text


def test_show_a_file_that_fails_to_read_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc on this platform")
    code, text = run_cli(capsys, _cli_main(), ["show", "/proc/self/mem"])
    assert_clean(text)
    assert code == USAGE and "cannot read /proc/self/mem" in text, text


def test_schema_diff_on_bad_schema_dirs_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pin = REPO / "contracts" / "releases" / "codex-cli-0.171.0"
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    shutil.copy(pin / "meta.json", corrupt / "meta.json")
    (corrupt / "stable.json.zst").write_bytes(b"not zstd")
    for old, new in ((str(corrupt), "0.171.0"), ("0.171.0", "/dev/zero"), (str(tmp_path), "0.171.0")):
        code, text = run_cli(capsys, _cli_main(), ["schema", "diff", old, new])
        assert_clean(text)
        assert code == USAGE, text


# Scale: every contract is linear in the session's size. Synthetic records of N turns are built from one
# played turn; the ratio of judging 10x the turns is bounded (linear ~10, a quadratic step ~100).


def _synthetic_record(template: SessionRecord, turns: int) -> SessionRecord:
    wire = template.wire
    start = next(i for i, e in enumerate(wire) if isinstance(e.frame, dict) and e.frame.get("method") == "turn/start")
    end = next(i for i, e in enumerate(wire) if isinstance(e.frame, dict) and e.frame.get("method") == "turn/completed")
    result = template.results[0]
    assert result.turn_id
    head, body, tail = wire[:start], wire[start : end + 1], wire[end + 1 :]
    request_id = body[0].frame["id"]  # type: ignore[index]
    out: list[WireEntry] = list(head)
    results = []
    for k in range(turns):
        turn_id = f"turn-{k:06d}"
        t = float(k)
        for entry in body:
            frame = orjson.loads(orjson.dumps(entry.frame).replace(result.turn_id.encode(), turn_id.encode()))
            if frame.get("id") == request_id:
                frame["id"] = 1000 + k
            if k % 10 == 0 and frame.get("method") == "turn/completed":  # every tenth turn is interrupted
                interrupt = {"id": 10**6 + k, "method": "turn/interrupt", "params": {"turnId": turn_id}}
                out += [WireEntry(t, "c2s", interrupt), WireEntry(t, "s2c", {"id": 10**6 + k, "result": {}})]
            out.append(WireEntry(t, entry.dir, frame))
        cancel = t if k % 10 == 0 else None
        results.append(dataclasses.replace(result, index=k, turn_id=turn_id, cancel_at=cancel, ended_at=t + 0.001))
    out += tail
    expect = dataclasses.replace(template.expect, turns=tuple(template.expect.turns[:1]) * turns)
    record = dataclasses.replace(template, wire=out, results=results, expect=expect)
    record.client_trace = record.server_trace = None  # the bundles are one turn; the bench covers them
    record.meta = {**template.meta, "scenario_turns": turns}
    return record


def _judge_seconds(record: SessionRecord) -> float:
    from contracts.checks import run_all

    best = float("inf")
    for _ in range(3):  # the least disturbed of three (a shared machine)
        start = time.process_time()
        checks = run_all(record)
        best = min(best, time.process_time() - start)
    assert not [c for c in checks if c.contract == "contract"], "a contract raised"
    return best


def test_contracts_are_linear_in_the_number_of_turns(tmp_path: Path) -> None:
    from harness.runner import play

    template = play(_load_builtin("plain"), "fake", work_dir=tmp_path / "work")
    small, large = _synthetic_record(template, 200), _synthetic_record(template, 2000)
    assert len(large.wire) > 9 * len(small.wire)
    ratio = _judge_seconds(large) / _judge_seconds(small)
    assert ratio <= 20, f"judging 10x the turns took {ratio:.1f}x the time (linear: ~10, quadratic: ~100)"


@pytest.mark.parametrize("member", ["wire.jsonl", "stderr.txt"])
def test_show_record_dir_with_a_fifo_inside_never_blocks(member: str, tmp_path: Path) -> None:
    rec = _saved_plain(tmp_path)
    (rec / member).unlink()
    os.mkfifo(rec / member)
    proc = subprocess.run(
        [sys.executable, "-c", _NEVER_BLOCK.format(module="harness.cli"), "show", str(rec), "--no-checks"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    text = (proc.stdout + proc.stderr).decode()
    assert_clean(text)
    if member == "wire.jsonl":
        assert proc.returncode == USAGE and "is a FIFO (named pipe)" in text, text
    else:  # a stderr tail that is not a file is left out; the timeline shows
        assert proc.returncode == OK and "turn/completed" in text, text


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing_parent"])
def test_show_html_output_in_the_way_exits_3_and_never_blocks(kind: str, tmp_path: Path) -> None:
    rec = _saved_plain(tmp_path)
    out = tmp_path / "page.html"
    if kind == "fifo":
        os.mkfifo(out)  # opening it to write would wait for a reader forever
    elif kind == "directory":
        out.mkdir()
    else:
        out = tmp_path / "nowhere" / "page.html"
    proc = subprocess.run(
        [sys.executable, "-c", _NEVER_BLOCK.format(module="harness.cli"), "show", str(rec), "--html", str(out)],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    text = (proc.stdout + proc.stderr).decode()
    assert_clean(text)
    assert proc.returncode == USAGE and "--html" in text, text
    assert "turn/completed" not in text  # refused before the timeline


@pytest.mark.parametrize(
    ("member", "make"),
    [("stderr.txt", "fifo"), ("wire.jsonl", "dir"), ("client-trace", "file"), ("record.json", "link")],
)
def test_run_report_record_member_in_the_way_is_replaced_whole(
    member: str, make: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report directory used before: a member of a saved record replaced by something else (a FIFO
    would block a write forever, a directory or file would fail it, a link would be written through). The
    record is built aside and swapped in whole: whatever was in its place goes, nothing is written into it."""
    saved = tmp_path / "report" / "sessions" / "fake" / "plain"
    saved.mkdir(parents=True)
    reader = None
    if make == "fifo":
        os.mkfifo(saved / member)
        reader = os.open(saved / member, os.O_RDONLY | os.O_NONBLOCK)  # were it written, it would not block
    elif make == "dir":
        (saved / member).mkdir()
    elif make == "link":
        (tmp_path / "victim").write_text("precious")
        (saved / member).symlink_to(tmp_path / "victim")
    else:
        (saved / member).write_text("")
    try:
        argv = ["run", "--scenario", "plain", "--report", str(tmp_path / "report")]
        code, text = run_cli(capsys, _cli_main(), argv)
    finally:
        if reader is not None:
            os.close(reader)
    assert_clean(text)
    assert code == OK, text
    assert (saved / "client-trace").is_dir() and not (saved / "client-trace").is_symlink()
    for name in ("stderr.txt", "wire.jsonl", "record.json"):
        assert (saved / name).is_file() and not (saved / name).is_symlink(), name
    assert SessionRecord.load(saved).scenario == "plain"
    if make == "link":
        assert (tmp_path / "victim").read_text() == "precious"
    assert sorted(p.name for p in saved.parent.iterdir()) == ["plain"]  # no temporary left beside it


def test_show_frames_of_hostile_shapes_are_marked_not_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid transcript lines whose frames no server sends: an id nested 1,000 deep, a method that is an
    object, a huge time. Each gets a marked line; the timeline goes on (exit 0)."""
    deep = "{\"a\":" * 1000 + "1" + "}" * 1000
    lines = [
        '{"t": 0, "dir": "s2c", "msg": {"id": ' + deep + ', "result": {}}}',
        '{"t": 0, "dir": "s2c", "msg": {"method": "item/started", "params": {"item": ' + deep + "}}}",
        '{"t": 0, "dir": "c2s", "msg": {"id": [1], "method": {"x": 1}}}',
        '{"t": 1e308, "dir": "c2s", "msg": {"id": 1, "method": "turn/start"}}',
        '{"t": 2, "dir": "note", "msg": "still here"}',
    ]
    wire = tmp_path / "wire.jsonl"
    wire.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, text = run_cli(capsys, _cli_main(), ["show", str(wire)])
    assert_clean(text)
    assert code == OK, text
    assert "!! frame too deeply nested to show" in text and "!! method is not a string" in text
    assert "still here" in text


def test_a_wire_file_growing_while_show_reads_it_is_cut_off(tmp_path: Path) -> None:
    """show checks the size when it opens the file; a log appended to forever must still end the read."""
    from harness.wire_file import WireFileError, iter_wire

    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(b'{"t": 0, "dir": "note", "msg": "x"}\n' * 100)
    with open(wire, "rb") as fh, pytest.raises(WireFileError, match="grew past 1000 bytes"):
        for _ in iter_wire(fh, str(wire), max_bytes=1000):
            pass


def test_fake_codex_scenario_from_the_environment_gets_the_same_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_CODEX_SCENARIO", str(tmp_path))
    code, text = run_cli(capsys, _fake_main(), ["app-server"])
    assert_clean(text)
    assert code == USAGE and "is a directory" in text, text
    monkeypatch.setenv("FAKE_CODEX_SCENARIO", "no_such_builtin")
    code, text = run_cli(capsys, _fake_main(), ["app-server"])
    assert_clean(text)
    assert code == INVALID_INPUT and "built-in scenario" in text, text


# --- output that cannot be turned against its reader: one escaper (contracts.text) on every channel -----

#: ESC, a colour (CSI), OSC 52 (clipboard write), OSC 0 (window title), BEL, NUL, a one-byte CSI and NEL (C1),
#: bidi overrides and isolates: everything a terminal (or a reader's eye) can be made to obey.
HOSTILE = (
    "\x1b[31mRED\x1b[0m \x1b]52;c;aGVsbG8=\x07 \x1b]0;pwned\x07 bel\x07 nul\x00 c1\x9b2J\x85 "
    "bidi\u202eLIAF\u202c \u2066iso\u2069 end"
)
#: None of these may reach the reader raw.
RAW = ("\x1b", "\x07", "\x00", "\x9b", "\x85", "\u202e", "\u202c", "\u2066", "\u2069")


def assert_escaped(text: str, *, shown: bool = True) -> None:
    """No raw control or bidi character in ``text``; ``shown``: the hostile string is there, escaped."""
    raw = sorted({f"U+{ord(c):04X}" for c in text if c in RAW})
    assert not raw, f"raw {raw} in the output: {text[:2000]!r}"
    if shown:
        assert "\\x1b]52;c;aGVsbG8=\\x07" in text and "\\u202e" in text, text[:4000]


def test_the_escaper_writes_out_every_control_and_keeps_json_json() -> None:
    import json

    from contracts.text import escape, one_line

    assert escape(HOSTILE) == (
        "\\x1b[31mRED\\x1b[0m \\x1b]52;c;aGVsbG8=\\x07 \\x1b]0;pwned\\x07 bel\\x07 nul\\x00 c1\\u009b2J\\u0085 "
        "bidi\\u202eLIAF\\u202c \\u2066iso\\u2069 end"
    )
    assert escape(escape(HOSTILE)) == escape(HOSTILE)  # idempotent: shown twice, escaped once
    assert escape("a\nb\tc\rd", keep_newlines=True) == "a\nb\tc\\rd" and escape("a\nb") == "a\\nb"
    assert escape("\u2028\u200f\ud800\ufffe") == "\\u2028\\u200f\\ud800\\ufffe"
    assert escape("plain, ünïcode ✓ and a \\ backslash") == "plain, ünïcode ✓ and a \\ backslash"
    document = orjson.dumps({"m": HOSTILE}).decode()  # orjson writes C1 and bidi characters raw
    assert json.loads(escape(document, keep_newlines=True)) == {"m": HOSTILE}  # still JSON, same meaning
    started = time.perf_counter()
    line = one_line("x" * 10_000_000 + "\n" + HOSTILE, 80)
    assert time.perf_counter() - started < 0.5
    assert line == "x" * 79 + f"… ({10_000_001 + len(HOSTILE):,} chars)"
    assert one_line("a\n\nRESULT: PASS\u2028b", 80) == "a RESULT: PASS b"  # cannot forge a line of ours


def _hostile_scenario(directory: Path) -> Path:
    """A turn/start answered with an error whose message is :data:`HOSTILE`, and [expect] says completed:
    the failure line quotes the server's message."""
    import tomli_w

    doc = {
        "name": "hostile_text",
        "description": "every channel " + HOSTILE,
        "turns": [{"input": "Say " + HOSTILE}],
        "methods": [{"name": "turn/start", "error": {"code": -32600, "message": HOSTILE}}],
        "expect": {"turns": [{"status": "completed"}]},
    }
    path = directory / "hostile_text.toml"
    path.write_bytes(tomli_w.dumps(doc).encode())
    return path


def test_run_failure_lines_and_junit_show_hostile_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The failure line, the table and the progress lines on the terminal; junit.xml stays well-formed
    (XML 1.0 forbids ESC even as ``&#27;``) with the text escaped where a CI page shows it."""
    import xml.etree.ElementTree as ET

    report = tmp_path / "report"
    argv = ["run", "--scenario", str(_hostile_scenario(tmp_path)), "--report", str(report)]
    code, text = run_cli(capsys, _cli_main(), argv)
    assert_clean(text)
    assert code == 1, text
    assert_escaped(text)
    assert "terminal_status / turn 1 status (must): Result failed (turn/start failed: \\x1b[31mRED" in text
    junit = ET.parse(report / "junit.xml")  # raised ParseError: not well-formed (invalid token)
    failure = junit.find(".//failure")
    assert failure is not None and failure.text is not None
    assert_escaped(failure.text)
    assert_escaped(failure.get("message", ""))
    assert "\\x1b]0;pwned\\x07" in failure.text  # readable: the escape, not the effect
    assert_escaped((report / "index.html").read_text(encoding="utf-8"))
    checks = orjson.loads((report / "checks.json").read_bytes())  # the data keeps what was said, as JSON
    assert any(HOSTILE in c["detail"] for c in checks)


def _hostile_wire(path: Path, method: str = "x/" + HOSTILE) -> Path:
    """A transcript with the hostile string in every field a timeline shows."""
    frames = [
        ("c2s", {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": HOSTILE, "version": HOSTILE}}}),
        ("s2c", {"id": 1, "result": {}}),
        ("c2s", {"id": HOSTILE, "method": method, "params": {}}),
        ("s2c", {"id": HOSTILE, "error": {"code": -32600, "message": HOSTILE}}),
        ("s2c", {"method": method, "params": {}}),
        ("s2c", {"method": "item/started", "params": {"item": {"type": HOSTILE, "id": HOSTILE}}}),
        ("s2c", {"method": "turn/completed", "params": {"turn": {"id": HOSTILE, "status": HOSTILE}}}),
        ("c2s", {"id": 9, "method": "turn/start", "params": {"input": [{"type": "text", "text": HOSTILE}]}}),
        ("s2c", {"method": "item/agentMessage/delta", "params": {"delta": HOSTILE}}),
        ("note", {"note": HOSTILE}),
        ("c2s", {"_raw": HOSTILE, "_error": "not_json", "_size": 99}),
    ]
    lines = [orjson.dumps({"t": i * 0.001, "dir": d, "msg": m}) for i, (d, m) in enumerate(frames)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_show_timeline_and_page_show_hostile_text_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Method names, ids, clientInfo, error messages, deltas, notes, bad lines, a record's stderr tail: on
    the terminal each is escaped; the HTML page has none of them raw either."""
    wire = _hostile_wire(tmp_path / "wire.jsonl")
    page = tmp_path / "page.html"
    code, text = run_cli(capsys, _cli_main(), ["show", str(wire), "--html", str(page)])
    assert_clean(text)
    assert code == OK, text
    assert_escaped(text)
    for line in text.splitlines():  # every value stays inside its line: no line of the timeline is forged
        assert not line.startswith(("bidi", " \\u2066", "RESULT")), line
    html = page.read_text(encoding="utf-8")
    assert_escaped(html)
    assert '<meta http-equiv="Content-Security-Policy"' in html and "unsafe-inline" not in html
    rec = _saved_plain(tmp_path)  # a record whose stderr.txt another program wrote
    (rec / "stderr.txt").write_text(f"server log {HOSTILE}\nlast line {HOSTILE}\n", encoding="utf-8")
    code, text = run_cli(capsys, _cli_main(), ["show", str(rec)])
    assert code == OK, text
    assert "stderr tail:" in text
    assert_escaped(text)


def test_show_clips_a_10_mb_method_name_in_the_terminal_and_the_page_titles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four frames naming a 10 MB method printed it whole and wrote a 40 MB page (four <title>s)."""
    wire = _hostile_wire(tmp_path / "wire.jsonl", method="m" * 10_000_000)
    page = tmp_path / "page.html"
    code, text = run_cli(capsys, _cli_main(), ["show", str(wire), "--html", str(page), "--no-schema"])
    assert code == OK, text[:2000]
    assert len(text) < 20_000, len(text)
    assert "(10,000,000 chars)" in text  # the length is said, not the name
    size = page.stat().st_size
    assert size < 200_000, size
    assert_escaped(page.read_text(encoding="utf-8"))


def test_trace_show_escapes_the_bundle_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_trace_support import INTERRUPT, copy_bundle

    bundle = copy_bundle(INTERRUPT, tmp_path / "bundle")
    log = bundle / "trace.jsonl"
    hostile = orjson.dumps(HOSTILE).decode()
    log.write_text(log.read_text(encoding="utf-8").replace('"/root"', hostile), encoding="utf-8")
    code, text = run_cli(capsys, _cli_main(), ["trace", "show", str(bundle)])
    assert_clean(text)
    assert code == OK, text
    assert_escaped(text)


def test_scenario_strings_are_escaped_in_lists_and_stay_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hostile_scenario(tmp_path)
    code, text = run_cli(capsys, _cli_main(), ["scenarios", "--dir", str(tmp_path)])
    assert code == OK, text
    assert_escaped(text)
    code, text = run_cli(capsys, _cli_main(), ["scenarios", "--dir", str(tmp_path), "--json"])
    assert code == OK, text
    assert_escaped(text, shown=False)  # no raw character, and still the JSON of the description
    rows = orjson.loads(text)
    assert [r["description"] for r in rows if r["name"] == "hostile_text"] == ["every channel " + HOSTILE]


def test_error_messages_quoting_input_are_escaped_and_clipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown key of 1 MB with control characters in it: named in one short, escaped line (exit 2)."""
    path = tmp_path / "bad.toml"
    key = orjson.dumps("k" * 1_000_000 + HOSTILE).decode()  # a TOML basic string is a JSON string here
    path.write_text(f'description = "x"\n{_PLAIN_TURN}{key} = 1\n', encoding="utf-8")
    for main in (_cli_main(), _fake_main()):
        argv = ["run", "--quiet", "--scenario", str(path)] if main is not _fake_main() else []
        argv = argv or ["app-server", "--scenario", str(path)]
        code, text = run_cli(capsys, main, argv)
        assert_clean(text)
        assert code == INVALID_INPUT, text[:2000]
        assert len(text) < 5_000 and str(path) in text, text[:2000]
        assert_escaped(text, shown=False)


def test_fake_codex_stderr_escapes_what_a_client_sent() -> None:
    """fake-codex logs an answer to no request with its id (as codex does): a client's id, escaped."""
    frames = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"id": HOSTILE, "result": {}},
    ]
    stdin = b"".join(orjson.dumps(f) + b"\n" for f in frames)
    proc = subprocess.run(
        [str(BIN / "fake-codex"), "app-server"], input=stdin, capture_output=True, timeout=60, cwd=REPO
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert "could not find callback for" in err, err
    assert_escaped(err)


def test_a_client_s_output_is_kept_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "client.py"
    script.write_text(
        f"import sys\nprint({HOSTILE!r})\nprint({HOSTILE!r}, file=sys.stderr)\nsys.exit(3)\n", encoding="utf-8"
    )
    report = tmp_path / "report"
    argv = ["run", "--scenario", "plain", "--client-cmd", f"{sys.executable} {script}", "--report", str(report)]
    code, text = run_cli(capsys, _cli_main(), argv)
    assert_clean(text)
    assert code == 1, text
    assert_escaped(text, shown=False)
    for name in ("client-stdout.txt", "client-stderr.txt"):
        (kept,) = report.glob(f"sessions/*/*/{name}")
        assert_escaped(kept.read_text(encoding="utf-8"))


def test_fidelity_differences_are_one_escaped_line_each() -> None:
    """What ``diff`` and ``validate-release`` print of two server sides (the binary's strings)."""
    from contracts.fidelity import diff_server_sides, render

    ours = [{"method": "thread/started", "params": {}}]
    theirs = [{"method": "x\n" + HOSTILE + "m" * 100_000, "params": {}}]
    text = render(diff_server_sides(ours, theirs))
    assert len(text.splitlines()) == len(diff_server_sides(ours, theirs)) and len(text) < 2_000, text
    assert_escaped(text, shown=False)


# --- probe steps bounded after expansion ----------------------------------------------------------------


def _expanding_scenario(directory: Path, *, raw: bool = False) -> Path:
    """70 KB of scenario: a 40 KB file read once, then 20 steps naming its answer 64 times each (3.4 MB of
    params a step: 66 MB of report, 290 MB of RSS and RESULT: PASS before the cap held after expansion)."""
    import tomli_w

    ref = "${answer.seed.dataBase64}" * 64
    step: dict[str, object] = (
        {"raw": '{"id": "r", "method": "model/list", "params": {"x": "' + ref + '"}}'}
        if raw
        else {"send": "model/list", "params": {"x": ref}}
    )
    doc = {
        "name": "expanding",
        "description": "placeholders that grow a step past its cap",
        "client": {
            "files": [{"path": "seed.txt", "text": "abcdefghij" * 4000}],
            "probe": [{"id": "seed", "send": "fs/readFile", "params": {"path": "${cwd}/seed.txt"}}] + [step] * 20,
        },
    }
    path = directory / "expanding.toml"
    path.write_bytes(tomli_w.dumps(doc).encode())
    return path


@pytest.mark.parametrize("raw", [False, True], ids=["params", "raw"])
def test_a_step_past_its_cap_after_expansion_fails_the_session_naming_it(
    raw: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _expanding_scenario(tmp_path, raw=raw)
    assert path.stat().st_size < 75_000
    report = tmp_path / "report"
    started = time.perf_counter()
    code, text = run_cli(capsys, _cli_main(), ["run", "--quiet", "--scenario", str(path), "--report", str(report)])
    assert_clean(text)
    assert code == 1 and "RESULT: FAIL" in text, text
    what = "its line would" if raw else "its params"
    kind = "raw" if raw else "send model/list"
    assert f"probe step 1 ({kind}): {what} grow past 65536 bytes when ${{answer.seed.dataBase64}} is put in" in text
    size = sum(p.stat().st_size for p in report.rglob("*") if p.is_file())
    assert size < 2_000_000, size  # the step was not sent, nor any after it
    assert time.perf_counter() - started < 30


def test_substitution_stops_before_it_builds_what_is_past_the_cap() -> None:
    """64 placeholders naming a 16 MB answer: refused after measuring the first value, nothing joined."""
    import tracemalloc

    from contracts import probe_refs

    big = "x" * 16_000_000
    template = {"x": "${answer.a.v}" * 64}
    tracemalloc.start()
    try:
        with pytest.raises(probe_refs.TooLarge, match="grow past 65536 bytes"):
            probe_refs.substitute(template, lambda ref: big, limit=probe_refs.MAX_PARAMS_BYTES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40_000_000, peak  # one value measured (its UTF-8), not 64 of them joined (1 GB)
    small = probe_refs.substitute({"x": "${answer.a.v}!", "y": "${answer.a.v}"}, lambda ref: "ok", limit=100)
    assert small == {"x": "ok!", "y": "ok"}
    with pytest.raises(probe_refs.TooLarge, match="its params are 1"):  # JSON escapes are counted at the end
        probe_refs.substitute({"x": "${answer.a.v}!"}, lambda ref: "\x01" * 30, limit=100)  # 30 bytes, 180 in JSON


def test_waits_of_a_scenario_built_in_python_are_cut_at_the_total(tmp_path: Path) -> None:
    """A Python-built scenario skips the loader: the run still sleeps at most 120 s over all steps."""
    from contracts.scenario import ClientPlan, ClientProbe, Scenario, TurnScript
    from harness.runner import play

    plan = ClientPlan(probes=tuple(ClientProbe(raw="{}", wait_ms=60_000) for _ in range(3)))
    record = play(Scenario("waits", "three minutes of waits", (TurnScript(),), client=plan), "fake", work_dir=tmp_path)
    notes = [e.note for e in record.wire if e.dir == "note"]
    assert "probe: wait_ms cut to 0: the steps' waits add up to at most 120000 ms" in notes, notes
    assert record.wire[-1].t - record.wire[0].t < 130, record.wire[-1].t  # virtual seconds


def test_fake_codex_answers_200_copies_of_one_root_with_one_walk(tmp_path: Path) -> None:
    """200 copies of a root made fake-codex answer nothing for 33 s (a walk per copy); 0.171.0 takes each
    root once. Through the process, on a work directory of 3,000 files."""
    for d in range(30):
        (tmp_path / f"d{d}").mkdir()
        for i in range(100):
            (tmp_path / f"d{d}" / f"hello{i}.txt").write_text("")
    frames = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"id": 2, "method": "fuzzyFileSearch", "params": {"query": "hel", "roots": [str(tmp_path)] * 200}},
        {"id": 3, "method": "fuzzyFileSearch", "params": {"query": "hel", "roots": [str(tmp_path)]}},
    ]
    stdin = b"".join(orjson.dumps(f) + b"\n" for f in frames)
    started = time.perf_counter()
    argv = [str(BIN / "fake-codex"), "app-server"]
    proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=120, cwd=tmp_path)
    took = time.perf_counter() - started
    answers = {m["id"]: m for m in map(orjson.loads, proc.stdout.splitlines()) if "id" in m and "method" not in m}
    assert answers[2]["result"] == answers[3]["result"] and len(answers[2]["result"]["files"]) == 50
    assert took < 15, took  # ~1 s; 200 walks of 3,000 files took 10+ s


def test_validate_release_report_md_is_escaped_like_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """report.md is printed and kept: a release's strings (a failing check quoting the binary) are escaped
    in both, and report.html carries them escaped too."""
    import harness.release_validation as vr
    import harness.targets.real_adapter as real_adapter
    from contracts.checks import Check

    binary = tmp_path / "codex"
    monkeypatch.setattr(real_adapter, "preflight", lambda codex, require_pinned_schema=True: (binary, "9.9.9"))

    from contracts.report import Report, release_report

    def validate(binary: Path, version: str, root: Path, **kwargs: object) -> Report:
        report = release_report(version, str(binary))
        report.schema.pin = "new"  # type: ignore[union-attr]
        report.checks = [Check("plain", "real", "protocol", "frames", "fail", f"the binary said {HOSTILE}")]
        return report

    monkeypatch.setattr(vr, "validate", validate)
    out = tmp_path / "out"
    argv = ["validate-release", "--codex", str(binary), "--out", str(out), "--store", str(tmp_path / "store")]
    code, text = run_cli(capsys, _cli_main(), argv)
    assert_clean(text)
    assert code == 1, text
    assert_escaped(text)
    assert_escaped((out / "report.md").read_text(encoding="utf-8"))
    assert_escaped((out / "report.html").read_text(encoding="utf-8"))
    assert_escaped((out / "junit.xml").read_text(encoding="utf-8"))
    import xml.etree.ElementTree as ET

    ET.fromstring((out / "junit.xml").read_bytes())  # well-formed, whatever the binary said


def test_validate_release_report_md_carries_html_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """report.md held a binary's stderr raw (``<script>``): a Markdown renderer ran it. Escaped as report.html."""
    import harness.release_validation as vr
    import harness.targets.real_adapter as real_adapter
    from contracts.checks import Check
    from contracts.report import Report, release_report

    binary = tmp_path / "codex"
    monkeypatch.setattr(real_adapter, "preflight", lambda codex, require_pinned_schema=True: (binary, "9.9.9"))
    said = "<script>alert(1)</script> & <img src=x onerror=alert(2)>"

    def validate(binary: Path, version: str, root: Path, **kwargs: object) -> Report:
        report = release_report(version, str(binary))
        report.schema.pin = "new"  # type: ignore[union-attr]
        report.checks = [Check("plain", "real", "protocol", "frames", "fail", f"the binary said {said}")]
        return report

    monkeypatch.setattr(vr, "validate", validate)
    out = tmp_path / "out"
    argv = ["validate-release", "--codex", str(binary), "--out", str(out), "--store", str(tmp_path / "store")]
    code, text = run_cli(capsys, _cli_main(), argv)
    assert code == 1, text
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "<script" not in md and "<img" not in md, md
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img" in md
    assert "<script>alert" not in (out / "report.html").read_text(encoding="utf-8")


# --- a full disk: the fake keeps serving, the verdict names the disk and never blames the client -------------

_SESSION = """
import json, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def send(frame):
    proc.stdin.write((json.dumps(frame) + "\\n").encode()); proc.stdin.flush()
def until(pred):
    for line in proc.stdout:
        frame = json.loads(line)
        if pred(frame):
            return frame
send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
send({"method": "initialized"})
send({"id": 2, "method": "thread/start", "params": {}})
thread = until(lambda f: f.get("id") == 2)["result"]["thread"]["id"]
text = [{"type": "text", "text": "Say hello"}]
send({"id": 3, "method": "turn/start", "params": {"threadId": thread, "input": text}})
done = until(lambda f: f.get("method") == "turn/completed")
proc.stdin.close()
code = proc.wait(timeout=20)
print(json.dumps({"completed": (done or {}).get("params", {}).get("turn", {}).get("status"), "code": code,
                  "stderr": proc.stderr.read().decode("utf-8", "replace")}))
"""


def _in_tiny_tmpfs(mnt: Path, kib: int, free_pages: int, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` (sh) in a private mount namespace where ``mnt`` is a new ``kib`` KiB tmpfs with ``free_pages``
    4 KiB pages left: the mount exists only there and dies with it (root: ``unshare -m``; else a user namespace)."""
    mnt.mkdir()
    fill = f"dd if=/dev/zero of={mnt}/fill bs=4k count={kib // 4 - free_pages} 2>/dev/null"
    script = f"mount -t tmpfs -o size={kib}k tmpfs {mnt} || exit 97\n{fill}\n{command}"
    for prefix in (["unshare", "-m"], ["unshare", "-r", "-m"]) if shutil.which("unshare") else ():
        out = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=300)
        assert not os.path.ismount(mnt), "the tmpfs leaked out of its namespace"
        if out.returncode != 97 and not out.stderr.startswith("unshare:"):
            return out  # else: no namespace or no mount with this prefix; try the next
    pytest.skip("no mount namespace here (unshare -m needs root or user namespaces)")


@pytest.mark.parametrize("free_pages", [0, 1, 4, 8])
def test_fake_codex_record_on_a_full_disk_keeps_serving(tmp_path: Path, free_pages: int) -> None:
    """The server plays the whole session and leaves cleanly (it died at start with 0 pages and left with a
    traceback with a few); it says once that the recording stopped, and the folder names the failed write."""
    from harness.targets.fake import fake_codex_argv

    session = tmp_path / "session.py"
    session.write_text(_SESSION)
    mnt = tmp_path / "mnt"
    fake = " ".join(shlex.quote(a) for a in fake_codex_argv())
    serve = f"{sys.executable} {session} {fake} app-server --record {mnt}/rec"
    out = _in_tiny_tmpfs(mnt, 64, free_pages, f"{serve}\nls -a {mnt}/rec/*/")
    assert out.returncode == 0, out
    first, _, names = out.stdout.partition("\n")
    seen = orjson.loads(first)
    assert seen["completed"] == "completed" and seen["code"] == 0, seen
    assert_clean(seen["stderr"])
    if "write-failed-ENOSPC" in names.split():
        assert seen["stderr"].count("No space left on device") == 1, seen["stderr"]
        assert "the server goes on" in seen["stderr"]
    else:  # enough room after all (the page size or the bundle's compression differ): a whole recording
        assert "end.json" in names.split(), names


def test_a_full_disk_is_named_and_the_client_never_blamed(tmp_path: Path) -> None:
    """The careful client on a disk that fills up under it: before, "never started a server" and "result file
    empty" failed it; now one runner / recording failure names the disk, and no client check fails."""
    careful = paths.REPO / "conformance" / "clients" / "careful.py"
    filler = tmp_path / "filler.sh"
    filler.write_text('#!/bin/sh\nhead -c 100000000 /dev/zero > "$TMPDIR/fill" 2>/dev/null\nexec "$@"\n')
    filler.chmod(0o755)
    mnt, report = tmp_path / "mnt", tmp_path / "report"
    cmd = shlex.quote(f"{filler} {sys.executable} {careful}")
    harness = f"{sys.executable} -m harness.cli run --client-cmd {cmd} --scenario plain --quiet --report {report}"
    out = _in_tiny_tmpfs(mnt, 4096, 256, f"TMPDIR={mnt} {harness}")
    assert out.returncode == 1, out
    checks = orjson.loads((report / "checks.json").read_bytes())
    failed = [(c["contract"], c["name"], c["detail"]) for c in checks if c["status"] == "fail"]
    assert [(c, n) for c, n, _ in failed] == [("runner", "recording")], failed
    assert "No space left on device (ENOSPC)" in failed[0][2] and f"holding {mnt}" in failed[0][2], failed
    result = next(c for c in checks if c["name"] == "result file")
    assert result["status"] == "skip" and "disk holding it is full" in result["detail"], result
    assert "never started a server" not in out.stdout and "not JSON" not in out.stdout, out.stdout
    assert_clean(out.stdout + out.stderr)


# --- nesting depth: one bounded parser of JSON and TOML (contracts.bounded_parse) -------------------------


@pytest.mark.parametrize("depth", [600, 5000])
def test_a_deep_budgets_file_is_one_line_and_exit_3(
    depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tomllib recursed into a RecursionError (exit 1, a traceback): the depth is measured before parsing."""
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("turn = " + "[" * depth + "]" * depth + "\n")
    code, text = run_cli(capsys, _cli_main(), ["run", "--scenario", "plain", "--budgets", str(budgets)])
    assert_clean(text)
    assert code == USAGE and "nested more than 127 deep" in text, text


@pytest.mark.parametrize(
    "config",
    [
        "x = " + "[" * 5000 + "]" * 5000,
        "x = " + "{a = " * 600 + "1" + "}" * 600,
        "a" + ".a" * 3000 + " = 1",  # dotted keys nest without a bracket
    ],
    ids=["arrays", "inline-tables", "dotted-keys"],
)
def test_a_deep_config_toml_is_a_config_error(config: str, tmp_path: Path) -> None:
    from fake_server.home_config import ConfigError, read_setup

    (tmp_path / "config.toml").write_text(config + "\n")
    with pytest.raises(ConfigError, match="nested more than 127 deep"):
        read_setup(str(tmp_path), [])


@pytest.mark.parametrize(
    "overrides",
    [
        ["x=" + "[" * 5000 + "]" * 5000],
        ["a" + ".a" * 3000 + "=1", "a" + ".a" * 3000 + "=2"],  # merged layer by layer, recursively
    ],
    ids=["deep-value", "deep-key"],
)
def test_a_deep_override_is_a_config_error(overrides: list[str], tmp_path: Path) -> None:
    from fake_server.home_config import ConfigError, read_setup

    with pytest.raises(ConfigError, match="Invalid override"):
        read_setup(str(tmp_path), overrides)


def test_fake_codex_with_a_deep_config_answers_as_from_an_empty_home(tmp_path: Path) -> None:
    """The process died of the RecursionError; it now says why on one line and serves."""
    (tmp_path / "config.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    lines = b'{"id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
    proc = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "-c", "y=" + "{a=" * 3000 + "}" * 3000],
        input=lines,
        capture_output=True,
        timeout=60,
        env={**os.environ, "CODEX_HOME": str(tmp_path), "FAKE_CODEX_SCENARIO": "plain"},
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert b'"id":1,"result"' in proc.stdout, proc.stderr.decode()
    assert b"nested more than 127 deep" in proc.stderr


def test_the_depth_is_measured_on_the_text_not_what_strings_hold() -> None:
    from contracts import bounded_parse

    ok = '{"a": "[[[[{{{{\\"[[[[", "b": ' + "[" * 126 + "]" * 126 + "}"
    assert bounded_parse.loads_json(ok)["a"].startswith("[[[[")
    assert bounded_parse.loads_json(ok.encode())["a"].startswith("[[[[")  # bytes: a reader's line, its own path
    for deep in ("[" * 128 + "]" * 128, '{"a":' * 128 + "1" + "}" * 128, "[{" * 64 + "}]" * 64, "[" * 5000):
        for text in (deep, deep.encode(), bytearray(deep.encode())):
            with pytest.raises(bounded_parse.JsonTooDeep):
                bounded_parse.loads_json(text)
    with pytest.raises(orjson.JSONDecodeError):  # every "not JSON" handler catches it
        bounded_parse.loads_json("[" * 600 + "]" * 600)
    with pytest.raises(orjson.JSONDecodeError):
        bounded_parse.loads_json(b"[" * 600 + b"]" * 600)
    toml = 'x = "[[[[" # [[[[\ny = \'\'\'[[[[\'\'\'\n[t]\nz = [[1]]\n'
    assert bounded_parse.loads_toml(toml) == {"x": "[[[[", "y": "[[[[", "t": {"z": [[1]]}}


def test_the_depth_scan_is_bounded_in_time() -> None:
    """30 MiB of openers, or of shallow arrays: well under a second each (C-speed passes, no recursion)."""
    from contracts import bounded_parse

    for text in (b"[" * (30 * 1024 * 1024), b"[" + b"[1,[2]]," * (4 * 1024 * 1024) + b"[]]"):
        started = time.monotonic()
        try:
            bounded_parse.check_json_depth(text)
        except bounded_parse.TooDeep:
            pass
        assert time.monotonic() - started < 5.0


@pytest.mark.parametrize(
    ("flags", "code"),
    [
        (["--ws-auth", "capability-token", "--ws-token-file", "{missing}"], 0),
        (["--ws-auth", "capability-token", "--ws-token-file", "{empty}"], 0),
        (["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", "{empty}"], 0),
        (["--ws-auth", "capability-token"], 1),  # flags that do not fit together: refused on stdio too
        (["--ws-auth", "capability-token", "--ws-token-sha256", "zz"], 1),
    ],
)
def test_auth_flags_with_stdio_read_no_secret_as_the_real_binary(flags: list[str], code: int, tmp_path: Path) -> None:
    """Observed on 0.171.0 (--listen stdio://, stdin at EOF): a missing or empty secret file is exit 0 (it is not
    read), flags that do not fit together exit 1. The fake read the file and exited 1."""
    (tmp_path / "empty").write_bytes(b"")
    argv = [f.format(missing=tmp_path / "missing", empty=tmp_path / "empty") for f in flags]
    proc = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--listen", "stdio://", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        env={**os.environ, "FAKE_CODEX_SCENARIO": "plain"},
    )
    assert proc.returncode == code, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
