"""SIGTERM and SIGINT to a running ``codex-harness``: exit 143 / 130, no traceback, nothing left behind.

Each test starts the CLI as a real process with a ``TMPDIR`` of its own, waits (bounded) until the run is in
the middle of a scenario, signals it and checks: the exit code, stderr without a traceback, no process of
the run left (every process it starts inherits that ``TMPDIR``, the real binary a directory under it), no
``codex-harness-*`` work directory left in it, and no report written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codex_sandbox import proctree
from codex_sandbox.proctree import procfs

START_S = 60.0  # an interpreter and a server starting on a loaded machine
EXIT_S = 30.0
GONE_S = 2.0
CODES = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGHUP: 129}
HANG_CLIENT = """\
import os, subprocess, sys, time
# A client with helpers that never ends by itself: a server through the shim, a helper in its group and one
# in a session of its own.
server = subprocess.Popen([os.environ["CODEX_BIN"], "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
subprocess.Popen(["sleep", "301"], stdin=subprocess.DEVNULL, start_new_session=True)
open(sys.argv[1], "w").write("ready")
time.sleep(300)
"""


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "codex-harness"
    return (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())"]
    )


def _ours(tmpdir: Path) -> list[str]:
    """Live processes whose ``TMPDIR`` is ``tmpdir`` or under it: everything the run started."""
    needle = f"TMPDIR={tmpdir}".encode()
    found = []
    for pid in procfs.pids():
        try:
            environ = (procfs.PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if any(v == needle or v.startswith(needle + b"/") for v in environ.split(b"\0")) and procfs.alive(pid):
            found.append(procfs.describe(pid))
    return found


def _wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}: {err.decode()[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g} s")
        time.sleep(0.05)  # a real process starting; bounded by the deadline


class Run:
    """One ``codex-harness`` process with a TMPDIR of its own."""

    def __init__(self, tmp_path: Path, args: list[str], *, sigint_ignored: bool = False) -> None:
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX_HARNESS_")}
        env["TMPDIR"] = str(self.tmpdir)
        self.proc = subprocess.Popen(
            [*_cli(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # the signal goes to the harness alone, as `timeout` or a CI runner sends it
            # as a non-interactive shell starts a background job (`codex-harness run ... &`): SIGINT ignored
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        )

    def started(self, what: str) -> list[str]:
        """What the run has started (not the harness itself) whose command line holds ``what``."""
        return [p for p in _ours(self.tmpdir) if what in p and not p.startswith(f"{self.proc.pid} ")]

    def signal_and_check(self, signum: int) -> str:
        """Signal the run; assert what it left; its stderr."""
        self.proc.send_signal(signum)
        try:
            _, err = self.proc.communicate(timeout=EXIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{signal.Signals(signum).name}: the run did not exit within {EXIT_S:g} s")
        stderr = err.decode("utf-8", "replace")
        assert self.proc.returncode == CODES[signum], (self.proc.returncode, stderr[-3000:])
        assert "Traceback" not in stderr, stderr[-3000:]
        assert f"interrupted by {signal.Signals(signum).name}" in stderr
        deadline = time.monotonic() + GONE_S
        while (left := _ours(self.tmpdir)) and time.monotonic() < deadline:
            time.sleep(0.02)  # SIGKILLed processes die asynchronously; bounded
        assert left == [], f"processes of the run outlived it: {left}"
        work = sorted(p.name for p in self.tmpdir.iterdir() if p.name.startswith("codex-harness-"))
        assert work == [], f"work directories left in TMPDIR: {work}"
        return stderr

    def kill(self) -> None:
        """The test's own cleanup, whatever the harness did: the harness, then what carries its TMPDIR."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=EXIT_S)
        for described in _ours(self.tmpdir):
            pid = int(described.split()[0])
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_mid_scenario_on_the_fake_process_ends_the_hung_fake(signum: int, tmp_path: Path) -> None:
    report = tmp_path / "report"
    run = Run(tmp_path, ["run", "--target", "fake-process", "--scenario", "hang_alive", "--report", str(report)])
    try:
        _wait_for("fake-codex running", lambda: bool(run.started("fake-codex")), run.proc)
        time.sleep(0.5)  # into the scenario: the fake has hung after its first delta
        run.signal_and_check(signum)
        assert not (report / "checks.json").exists() and not (report / "junit.xml").exists()
    finally:
        run.kill()


def test_sigterm_to_a_background_job_with_sigint_ignored_exits_143_cleanly(tmp_path: Path) -> None:
    # A shell's background job has SIGINT ignored; trio then installs no handler, and an interrupt raised from
    # the SIGTERM handler landed inside trio's run loop: exit 143 still, but ~100 lines of "Exception ignored".
    report = tmp_path / "report"
    args = ["run", "--target", "fake-process", "--scenario", "hang_alive", "--report", str(report)]
    run = Run(tmp_path, args, sigint_ignored=True)
    try:
        _wait_for("fake-codex running", lambda: bool(run.started("fake-codex")), run.proc)
        time.sleep(0.5)  # into the scenario: the fake has hung after its first delta
        stderr = run.signal_and_check(signal.SIGTERM)
        assert "Exception ignored" not in stderr and "abandoned" not in stderr, stderr[-3000:]
    finally:
        run.kill()


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_mid_scenario_ends_an_outside_client_its_server_and_helpers(signum: int, tmp_path: Path) -> None:
    client = tmp_path / "client.py"
    client.write_text(HANG_CLIENT)
    ready = tmp_path / "ready"
    cmd = f"{sys.executable} {client} {ready}"
    run = Run(tmp_path, ["run", "--client-cmd", cmd, "--scenario", "hang_alive", "--report", str(tmp_path / "r")])
    try:
        _wait_for("the client ready", ready.exists, run.proc)
        _wait_for("its server running", lambda: bool(run.started("fake-codex")), run.proc)
        run.signal_and_check(signum)
        assert not (tmp_path / "r" / "checks.json").exists()
    finally:
        run.kill()


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_with_jobs_ends_every_client_at_once(signum: int, tmp_path: Path) -> None:
    """--jobs: scenarios play in worker threads, which no cancellation reaches; the interrupt ends every
    client's tree, so the run exits at once, not at the clients' deadlines."""
    if not proctree.confinement().confined:
        pytest.skip("--jobs plays one at a time where nothing confines")
    client = tmp_path / "client.py"
    client.write_text(HANG_CLIENT)
    ready = tmp_path / "ready"
    cmd = f"{sys.executable} {client} {ready}"
    scenarios = ["--scenario", "hang_alive", "--scenario", "plain", "--scenario", "plain_two_turns"]
    run = Run(tmp_path, ["run", "--client-cmd", cmd, *scenarios, "--jobs", "2", "--report", str(tmp_path / "r")])
    try:
        _wait_for("two servers running", lambda: len(run.started("fake-codex")) >= 2, run.proc)
        run.signal_and_check(signum)
        assert not (tmp_path / "r" / "checks.json").exists()
    finally:
        run.kill()


def test_a_harness_killed_by_sigkill_leaves_no_fake_behind(tmp_path: Path) -> None:
    """No handler runs on SIGKILL (a CI runner's last resort): the fake's process tree ends by itself when
    its init loses the harness. Before, the hang_alive fake (it ignores stdin EOF) ran on."""
    if not proctree.confinement().confined:
        pytest.skip(f"no process tree can be confined here: {proctree.confinement().detail}")
    run = Run(tmp_path, ["run", "--target", "fake-process", "--scenario", "hang_alive"])
    try:
        _wait_for("fake-codex running", lambda: bool(run.started("fake-codex")), run.proc)
        time.sleep(0.5)  # into the scenario: the fake has hung after its first delta
        run.proc.kill()
        run.proc.wait(timeout=EXIT_S)
        deadline = time.monotonic() + 1.0
        while (left := run.started("fake-codex")) and time.monotonic() < deadline:
            time.sleep(0.02)  # bounded: the init sees its control socket close at once
        assert left == [], f"the fake outlived a SIGKILLed harness by more than 1 s: {left}"
    finally:
        run.kill()


def test_sigterm_during_the_in_process_suite_exits_143(tmp_path: Path) -> None:
    run = Run(tmp_path, ["run", "--report", str(tmp_path / "r")])  # every built-in scenario, in process
    try:
        _wait_for("a scenario finished", lambda: (tmp_path / "r" / "sessions").is_dir(), run.proc)
        run.signal_and_check(signal.SIGTERM)
        assert not (tmp_path / "r" / "checks.json").exists()
    finally:
        run.kill()


@pytest.mark.parametrize(
    "args",
    [
        ["latency", "--target", "fake-process", "--samples", "200"],
        ["fuzz", "--target", "fake-process", "--examples", "500", "--quiet"],
    ],
    ids=["latency", "fuzz"],
)
def test_sigterm_ends_the_other_long_commands_the_same_way(args: list[str], tmp_path: Path) -> None:
    if args[0] == "fuzz":
        args = [*args, "--out", str(tmp_path / "fuzz-out")]
    run = Run(tmp_path, args)
    try:
        _wait_for("a fake-codex running", lambda: bool(run.started("fake-codex")), run.proc)
        run.signal_and_check(signal.SIGTERM)
    finally:
        run.kill()


STREAM = """\
name = "slow_stream"
description = "A long stream nobody cancels: a signal lands mid-turn."

[[turns]]
input = "Stream a lot"

[[turns.responses]]

[[turns.responses.items]]
type = "message"
text = "{text}"
deltas = [{deltas}]
delay_ms = 100
"""


@pytest.mark.real_codex
@pytest.mark.parametrize("command", ["run", "record"])
def test_sigterm_mid_scenario_on_the_real_binary(command: str, codex_bin: Path, tmp_path: Path) -> None:
    ticks = [f"tick{i} " for i in range(300)]  # 30 s of stream
    scenario = tmp_path / "slow_stream.toml"
    scenario.write_text(STREAM.format(text="".join(ticks), deltas=", ".join(f'"{t}"' for t in ticks)))
    args = [command, "--codex", str(codex_bin), "--scenario", str(scenario)]
    args += (
        ["--target", "real", "--report", str(tmp_path / "r")]
        if command == "run"
        else ["--out", str(tmp_path / "t.jsonl")]
    )
    run = Run(tmp_path, args)
    try:
        # The real target gives the binary a TMPDIR of its own under ours.
        _wait_for("the real codex running", lambda: bool(run.started("app-server")), run.proc)
        time.sleep(2.0)  # into the turn
        run.signal_and_check(signal.SIGTERM)
        assert not (tmp_path / "r" / "checks.json").exists() and not (tmp_path / "t.jsonl").exists()
    finally:
        run.kill()


# --- the entry point: an interrupt or a usage error wherever it is in an exception group ----------------


def _raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    import harness.commands.scenarios as command

    def run(args: object) -> int:
        raise exc

    monkeypatch.setattr(command, "run", run)


@pytest.mark.parametrize(
    "exc",
    [
        KeyboardInterrupt(),
        BaseExceptionGroup("nursery", [KeyboardInterrupt()]),
        BaseExceptionGroup("nursery", [ValueError("the server's pipe broke"), KeyboardInterrupt()]),
        BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [KeyboardInterrupt()]), OSError("gone")]),
    ],
    ids=["bare", "grouped", "beside-an-error", "nested"],
)
def test_an_interrupt_anywhere_in_a_group_exits_130_without_a_traceback(
    exc: BaseException, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KeyboardInterrupt inside a trio exception group missed ``except KeyboardInterrupt``."""
    from harness.cli import main

    _raising(monkeypatch, exc)
    assert main(["scenarios"]) == 130
    err = capsys.readouterr().err
    assert "interrupted by SIGINT" in err and "Traceback" not in err


def test_a_usage_error_in_a_group_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from contracts.exitcodes import USAGE, UsageError
    from harness.cli import main

    _raising(monkeypatch, ExceptionGroup("nursery", [UsageError("--thing: no such thing")]))
    assert main(["scenarios"]) == USAGE
    assert "codex-harness scenarios: --thing: no such thing" in capsys.readouterr().err


def test_an_error_that_is_not_an_interrupt_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli import main

    _raising(monkeypatch, ExceptionGroup("nursery", [ValueError("a bug")]))
    with pytest.raises(ExceptionGroup):
        main(["scenarios"])


def test_release_learn_plays_no_queued_session_after_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt reached the main thread, then the pool's ``with`` played every queued session before the
    command could exit (231 s on the real binary, 2 sessions started after the signal)."""
    from harness.learn import sessions as learn

    started: list[float] = []
    raised: list[float] = []

    def record_one(session: learn.Session, codex: Path, work: Path, stop: Any = None) -> learn.Session:
        if stop is not None and stop.is_set():  # as the real one: no session starts once interrupted
            return session
        started.append(time.monotonic())
        time.sleep(0.4)
        return session

    def progress(line: str) -> None:
        raised.append(time.monotonic())
        raise KeyboardInterrupt  # what codex_sandbox.interrupts raises on SIGTERM

    monkeypatch.setattr(learn, "_record_one", record_one)
    monkeypatch.setattr(learn, "_scenario", lambda spec, root: None)
    entries = [("probes", f"s{n}", "plain") for n in range(12)]
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        learn.record_sessions(entries, Path("codex"), Path("work"), Path("."), progress, workers=2)
    assert time.monotonic() - begun < 1.5
    time.sleep(1.0)
    # A worker may take the next session in the moment between a session's end and the interrupt (two workers:
    # up to two); none starts after it.
    assert len(started) <= 4 and all(t <= raised[0] for t in started), (started, raised)
