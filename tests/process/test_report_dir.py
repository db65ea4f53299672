"""The report directory is the run's alone.

The client runs in the harness's directory and can predict every path of ``--report``: a link it plants
where a report file or a record goes is replaced, never written through. Two runs into one ``--report``
never interleave: the later one exits 3 at once, and a killed run leaves no stale lock. A full disk is one
line naming it and exit 3, never a traceback (a small tmpfs in a private mount namespace: nothing leaks).
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from contracts.exitcodes import USAGE

#: harness.report_dir.LOCK_NAME, spelled out: the lock file's name is part of the report's layout.
LOCK_NAME = ".codex-harness.lock"

TIMEOUT_S = 120


def cli(*argv: str, cwd: Path, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def client(tmp_path: Path, body: str) -> str:
    path = tmp_path / "client.py"
    path.write_text("import os, sys, time\n" + body)
    return f"{sys.executable} {path}"


def test_a_link_the_client_plants_for_a_report_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Old code: ``REPORT/junit.xml -> victim`` was overwritten with junit XML."""
    report, victim = tmp_path / "report", tmp_path / "victim"
    victim.write_text("precious")
    body = f"""
for name in ("junit.xml", "checks.json", "index.html"):
    os.symlink({str(victim)!r}, os.path.join({str(report)!r}, name))
"""
    argv = ["run", "--client-cmd", client(tmp_path, body), "--scenario", "plain", "--report", str(report)]
    proc = cli(*argv, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert victim.read_text() == "precious"
    for name in ("junit.xml", "checks.json", "index.html"):
        assert (report / name).is_file() and not (report / name).is_symlink(), name
    assert (report / "junit.xml").read_text().startswith("<?xml")


def test_a_directory_link_the_client_plants_for_the_next_record_is_not_followed(tmp_path: Path) -> None:
    """Old code: the next scenario's record went into the planted directory."""
    report, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    elsewhere.mkdir()
    body = f"""
slot = os.path.join({str(report)!r}, "sessions", "fake-process", "plain_two_turns")
if not os.path.lexists(slot):
    os.symlink({str(elsewhere)!r}, slot)
"""
    argv = ["run", "--client-cmd", client(tmp_path, body), "--scenario", "plain", "--scenario", "plain_two_turns"]
    proc = cli(*argv, "--report", str(report), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == []
    saved = report / "sessions" / "fake-process" / "plain_two_turns"
    assert saved.is_dir() and not saved.is_symlink() and (saved / "record.json").is_file()


@pytest.mark.parametrize("where", ["sessions", "sessions/fake", "sessions/fake/plain", "junit.xml", LOCK_NAME])
def test_a_link_in_the_report_before_the_run_is_said_and_nothing_is_played(where: str, tmp_path: Path) -> None:
    report, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (report / where).parent.mkdir(parents=True, exist_ok=True)
    (report / where).symlink_to(elsewhere)
    proc = cli("run", "--scenario", "plain", "--report", str(report), cwd=tmp_path)
    assert proc.returncode == USAGE, proc.stdout + proc.stderr
    assert f"{report / where} is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "[1/1]" not in proc.stderr and list(elsewhere.iterdir()) == []


def test_the_lock_file_is_the_one_the_harness_takes() -> None:
    from harness import report_dir

    assert report_dir.LOCK_NAME == LOCK_NAME


def test_a_second_run_into_the_same_report_exits_3_at_once(tmp_path: Path) -> None:
    """Old code: both ran and wrote into each other's records (3 of 8 concurrent runs crashed)."""
    report = tmp_path / "report"
    report.mkdir()
    fd = os.open(report / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a run in progress holds
        os.write(fd, b"4242\n")
        proc = cli("run", "--scenario", "plain", "--report", str(report), cwd=tmp_path, timeout=30)
    finally:
        os.close(fd)
    assert proc.returncode == USAGE, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"codex-harness run: report directory {report} is in use by another codex-harness run (pid 4242): "
        "wait for it to end or give another --report"
    ]
    assert not (report / "sessions").exists() and not (report / "checks.json").exists()


def test_concurrent_runs_never_mix_their_reports(tmp_path: Path) -> None:
    report = tmp_path / "report"
    scenarios = ["--scenario", "plain", "--scenario", "command_approval", "--scenario", "two_approvals"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", *scenarios, "--report", str(report)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(6)
    ]
    results = [(p.wait(TIMEOUT_S), p.communicate()) for p in procs]
    for code, (out, err) in results:
        assert "Traceback" not in out + err, err
        assert code in (0, 1) or (code == USAGE and "is in use by another codex-harness run" in err), (code, err)
    assert any(code in (0, 1) for code, _ in results)
    checks = orjson.loads((report / "checks.json").read_bytes())
    judged = {(c["target"], c["scenario"]) for c in checks}
    saved = {(p.parent.name, p.name) for p in (report / "sessions").glob("*/*")}
    assert judged == saved == {("fake", "plain"), ("fake", "command_approval"), ("fake", "two_approvals")}


def test_a_killed_run_leaves_no_stale_lock(tmp_path: Path) -> None:
    report, ready = tmp_path / "report", tmp_path / "ready"
    os.mkfifo(ready)
    reader = os.open(ready, os.O_RDWR | os.O_NONBLOCK)  # ours holds a writer too: no EOF before the client's line
    body = f"""
with open({str(ready)!r}, "w") as fh:
    fh.write(f"{{os.getpid()}}\\n")
time.sleep(120)
"""
    argv = ["run", "--client-cmd", client(tmp_path, body), "--scenario", "plain", "--report", str(report)]
    # A SIGKILLed run cannot remove its work directory: keep it in the test's own directory, not $TMPDIR.
    (tmp_path / "tmp").mkdir()
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *argv],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
    )
    client_pid = None
    try:
        readable, _, _ = select.select([reader], [], [], 60)  # the client runs: the run holds its lock
        assert readable, "the client never started"
        client_pid = int(os.read(reader, 64).split()[0])
        run.send_signal(signal.SIGKILL)
        run.wait(30)
    finally:
        os.close(reader)
        if run.poll() is None:
            run.kill()
            run.wait(30)
        if client_pid is not None:
            os.kill(client_pid, signal.SIGKILL)  # the client we started, by its pid
    proc = cli("run", "--scenario", "plain", "--report", str(report), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (report / "sessions" / "fake" / "plain" / "record.json").is_file()


def _can_mount_tmpfs() -> str | None:
    """None when a tmpfs can be mounted in a private mount namespace here, else why not."""
    if os.geteuid() != 0:
        return "needs root (CI runs as root) to mount a small tmpfs in a private mount namespace"
    if shutil.which("unshare") is None:
        return "needs util-linux unshare"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
        capture_output=True,
        timeout=30,
    )
    return None if probe.returncode == 0 else f"cannot mount a tmpfs: {probe.stderr.decode(errors='replace')}"


@pytest.mark.parametrize("size", ["8k", "40k"])  # full at the first trace bundle, and at the wire
def test_a_full_disk_is_one_line_naming_it_and_exit_3(size: str, tmp_path: Path) -> None:
    """Old code: an uncaught shutil.Error (a traceback) and no checks.json."""
    why = _can_mount_tmpfs()
    if why is not None:
        pytest.skip(why)
    disk = tmp_path / "disk"
    disk.mkdir()
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && exec "$3" -m harness.cli run --scenario plain --report "$2/r"'
    proc = subprocess.run(
        # A private mount namespace: the tmpfs exists only for this process and dies with it.
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", size, str(disk), sys.executable],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert str(disk) not in Path("/proc/self/mountinfo").read_text()  # nothing mounted here, ever
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(("[1/1]", "wall time"))]
    assert proc.returncode == USAGE, proc.stdout + proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"codex-harness run: the disk holding {disk}/r is full (mount point {disk}: "), lines
    assert "could not be written" in lines[0] and "Traceback" not in proc.stderr
