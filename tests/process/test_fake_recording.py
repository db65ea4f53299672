"""``fake-codex --record DIR``: one folder per server process, the wire both ways, how and when it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from codex_client.process import child_environment
from fake_server import recording
from fake_server.catalogue import load_builtin
from harness.outside.record import read_recordings
from harness.targets.fake import fake_codex_argv

INIT = b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
THREAD = b'{"method":"initialized"}\n{"id":1,"method":"thread/start","params":{}}\n'


def start(root: Path, scenario: str = "plain", *, env_record: bool = False) -> subprocess.Popen[bytes]:
    env = child_environment(None)
    argv = [*fake_codex_argv(), "app-server", "--scenario", scenario]
    if env_record:
        env[recording.RECORD_ENV] = str(root)
    else:
        argv += ["--record", str(root)]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def read_until(proc: subprocess.Popen[bytes], needle: bytes, limit_s: float = 20.0) -> bytes:
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + limit_s
    while needle not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    return seen


def test_stdin_closed_is_recorded_with_both_directions(tmp_path: Path) -> None:
    spawned = time.monotonic()
    proc = start(tmp_path)
    assert proc.stdin is not None
    proc.stdin.write(INIT + b"garbage\n" + THREAD)
    proc.stdin.flush()
    read_until(proc, b'"id":1')
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    (server,) = read_recordings(tmp_path)
    assert server.n == 1 and server.pid == proc.pid and server.folder.name == f"1-{proc.pid}"
    assert server.start["scenario_hash"] == recording.scenario_hash(load_builtin("plain"))
    assert server.end is not None and server.end["reason"] == "stdin_closed"
    dirs = [e.dir for e in server.wire]
    assert "c2s" in dirs and "s2c" in dirs and "note" in dirs
    assert any(e.error == "invalid_json" for e in server.wire if e.dir == "c2s")
    times = [e.t for e in server.wire]
    assert times == sorted(times) and abs(times[0] - time.monotonic()) < 60  # CLOCK_MONOTONIC seconds
    assert server.trace_bundle is not None  # the server trace goes with the recording
    # When the process started (the client's clock on initialize may run from there), before the recording did.
    process_t, started_t = server.start["process_started_t"], server.start["started_t"]
    assert spawned - 0.1 <= process_t <= started_t <= times[0], (spawned, process_t, started_t)


def test_signal_and_sigkill_and_one_folder_per_process(tmp_path: Path) -> None:
    first, second = start(tmp_path), start(tmp_path, env_record=True)
    for proc in (first, second):
        assert proc.stdin is not None
        proc.stdin.write(INIT)
        proc.stdin.flush()
        read_until(proc, b'"id":0')
    first.send_signal(signal.SIGTERM)
    second.kill()
    first.wait(timeout=20)
    second.wait(timeout=20)
    servers = {s.pid: s for s in read_recordings(tmp_path)}
    assert sorted(s.n for s in servers.values()) == [1, 2]
    assert servers[first.pid].end is not None and servers[first.pid].end["reason"] == "signal"
    assert servers[first.pid].end["signal"] == "SIGTERM"
    assert servers[second.pid].end is None  # no end line: killed


def test_crash_fault_is_recorded(tmp_path: Path) -> None:
    proc = start(tmp_path, "crash_mid_turn")
    assert proc.stdin is not None
    proc.stdin.write(INIT + THREAD)
    proc.stdin.flush()
    lines = read_until(proc, b'"id":1').splitlines()
    thread_id = next(orjson.loads(x)["result"]["thread"]["id"] for x in lines if x.startswith(b'{"id":1,'))
    turn = {
        "id": 2,
        "method": "turn/start",
        "params": {"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]},
    }
    proc.stdin.write(orjson.dumps(turn) + b"\n")
    proc.stdin.flush()
    try:
        read_until(proc, b"never")
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
    (server,) = read_recordings(tmp_path)
    assert server.end is not None and server.end["reason"] == "crash" and server.end["exit_code"] == code != 0


def test_a_partial_line_is_recorded_though_the_server_is_then_killed(tmp_path: Path) -> None:
    """``partial_line``: half a frame, then silence until SIGKILL. The record holds the torn frame whoever ended
    the server (it used to appear only at a clean end of the stream, so a client that killed lost it)."""
    proc = start(tmp_path, "partial_line")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT + THREAD)
    proc.stdin.flush()
    lines = read_until(proc, b'"id":1').splitlines()
    thread_id = next(orjson.loads(x)["result"]["thread"]["id"] for x in lines if x.startswith(b'{"id":1,'))
    params = {"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}
    proc.stdin.write(orjson.dumps({"id": 2, "method": "turn/start", "params": params}) + b"\n")
    proc.stdin.flush()
    try:
        read_until(proc, b"agentMessage/delta")
        time.sleep(0.5)  # the half frame follows the first delta
    finally:
        proc.kill()
        proc.wait(timeout=20)
    (server,) = read_recordings(tmp_path)
    assert server.end is None  # killed: no end line
    assert [e.error for e in server.wire if e.dir == "s2c" and e.error] == ["truncated_at_eof"]


def test_the_wire_file_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "MAX_WIRE_BYTES", 2000)
    folder = tmp_path / "1-1"
    folder.mkdir()
    rec = recording.Recorder(folder, load_builtin("plain"), "plain", "0.171.0")
    for _ in range(100):
        rec.outbound([b'{"method":"x","params":{"pad":"' + b"a" * 100 + b'"}}'])
    rec.finish(0, False)
    lines = (folder / "wire.jsonl").read_bytes().splitlines()
    assert len(b"\n".join(lines)) <= 2200
    assert orjson.loads(lines[-1])["msg"] == {"note": "recording truncated"}
    assert orjson.loads((folder / "end.json").read_bytes())["truncated"] is True


def test_an_unusable_record_dir_still_serves(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = start(blocker)
    assert proc.stdin is not None
    proc.stdin.write(INIT)
    proc.stdin.close()
    assert b'"id":0' in read_until(proc, b'"id":0')
    assert proc.wait(timeout=20) == 0
    assert os.path.isfile(blocker)


def test_a_failed_write_stops_the_recording_never_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """ENOSPC at any write: nothing raises, stderr says it once, the folder names it, the harness reads it."""
    import errno

    from harness.outside.record import cut_recordings

    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if fd > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    folder = tmp_path / "1-77"
    folder.mkdir()
    (tmp_path / ".n-1").touch()
    rec = recording.Recorder(folder, load_builtin("plain"), "plain", "0.171.0")
    monkeypatch.setattr(os, "write", full)
    rec.inbound([INIT.rstrip(b"\n")])  # the recorder takes messages (the wire's framing is the Io's)
    rec.outbound([b'{"id":0,"result":{}}'])
    monkeypatch.setattr(recording.Path, "write_bytes", lambda self, data: full(9, data))
    rec.finish(0, False)  # end.json cannot be written either: no traceback
    assert rec.failure == "No space left on device (ENOSPC) writing wire.jsonl"
    assert capfd.readouterr().err.count("No space left on device") == 1
    assert (folder / "write-failed-ENOSPC").is_file() and not (folder / "end.json.tmp").exists()
    assert cut_recordings(tmp_path) == (
        ["server 1 (pid 77): its recording could not be written: No space left on device (ENOSPC)"],
        {"1-77"},
    )
    (tmp_path / ".n-2").touch()  # a number claimed, its folder never made
    assert cut_recordings(tmp_path)[0][1] == "server 2: its recording folder could not be made"


def test_show_names_a_recording_the_disk_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    folder = tmp_path / f"1-{os.getpid()}"  # as a recorder names it: start.json says so
    folder.mkdir()
    (tmp_path / ".n-1").touch()
    rec = recording.Recorder(folder, load_builtin("plain"), "plain", "0.171.0")
    rec.finish(0, False)
    (folder / "write-failed-ENOSPC").touch()  # as a recorder leaves it at its first failed write
    for path in (tmp_path, folder):
        assert main(["show", str(path)]) == 1
        out = capsys.readouterr().out
        assert "runner / recording" in out or "recording could not be written" in out, out
        assert "No space left on device (ENOSPC)" in out, out


def test_a_forged_failure_name_is_never_repeated(tmp_path: Path) -> None:
    from harness.outside.record import cut_recordings

    folder = tmp_path / "1-77"
    folder.mkdir()
    (folder / "write-failed-\x1b]52;c;QUJD\x07").touch()
    (problem,), _ = cut_recordings(tmp_path)
    assert problem == "server 1 (pid 77): its recording could not be written: an error it did not name"


@pytest.mark.parametrize("play", [["0.171.0"], {"release": {"x": 1}}, {str(k): "v" for k in range(17)}])
def test_a_forged_play_identity_is_refused(tmp_path: Path, play: object) -> None:
    from harness.outside.record import RecordingError, read_recording

    folder = tmp_path / f"1-{os.getpid()}"
    folder.mkdir()
    recording.Recorder(folder, load_builtin("plain"), "plain", "0.171.0").finish(0, False)
    start = orjson.loads((folder / "start.json").read_bytes())
    (folder / "start.json").write_bytes(orjson.dumps({**start, "play": play}))
    with pytest.raises(RecordingError, match="play"):
        read_recording(folder)


def test_a_signal_after_end_json_leaves_the_recording_whole(tmp_path: Path) -> None:
    """A client that closes stdin and then sends SIGTERM may signal a server that already wrote end.json and
    closed wire.jsonl: the late note must not write to the closed descriptor (EBADF, "recording could not be
    written", a false runner / recording failure)."""
    folder = tmp_path / "1-1"
    folder.mkdir()
    rec = recording.Recorder(folder, load_builtin("plain"), "plain", "0.171.0")
    rec.on_stdin_eof()
    rec.finish(0, False)
    rec.on_signal("SIGTERM")
    assert rec.failure is None
    assert not [p.name for p in folder.iterdir() if p.name.startswith(recording.WRITE_FAILED_PREFIX)]
