"""The process-tree tracker (codex_sandbox.proctree): what a tree starts cannot outlive it, on every confinement.

Real processes with real, bounded timeouts. The escaping helper (tests/escaper.py) leaves its session and
changes pid every millisecond with an empty environment: only a PID namespace or a cgroup holds it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import escaper
import pytest
import trio

from codex_sandbox import proctree
from codex_sandbox.proctree import cgroup, detect, pidns, procfs
from codex_sandbox.proctree.base import Confinement

ROOT = os.geteuid() == 0


def _machine(kind: str) -> Confinement:
    """The confinement ``kind`` as this machine allows it (probed for real), else the reason it does not."""
    mode = {"pid-namespace": "pid-namespace", "cgroup-v2": "cgroup", "cgroup-v1": "cgroup"}[kind]
    if kind == "cgroup-v1":
        parent = detect._own_cgroup(1)
        why = "no freezer mounted" if parent is None else cgroup.probe(parent, 1)
        if why is not None:
            pytest.skip(f"the cgroup v1 freezer cannot be used here: {why}")
        return Confinement("cgroup-v1", f"the cgroup v1 freezer ({parent})", cgroup_parent=parent)
    how = detect._detect(mode)
    if how.kind != kind:
        pytest.skip(f"{kind} cannot be used here: {how.detail}")
    return how


CONFINED = ["pid-namespace", "cgroup-v2", "cgroup-v1"]


async def _run_escaper(how: Confinement, heartbeat: Path, helper_grace_s: float = 0.3) -> tuple[bool, list[str]]:
    """A main process that starts the escaper and exits; (tree empty after the main exit?, members named)."""
    body = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen({escaper.argv(heartbeat)!r}, start_new_session=True)\n"
        f"time.sleep({helper_grace_s})\n"  # the escaper is in full flight when the main process exits
    )
    with trio.fail_after(30):
        async with proctree.open_tree([sys.executable, "-c", body], env=dict(os.environ), how=how) as tree:
            assert await tree.wait() == 0
            await trio.sleep(0.1)
            return tree.empty(), [m.described for m in tree.members()]


@pytest.mark.parametrize("kind", CONFINED)
def test_an_escaping_helper_is_seen_and_ended_with_its_tree(kind: str, tmp_path: Path) -> None:
    how = _machine(kind)
    heartbeat = tmp_path / "heartbeat"
    try:
        empty, _named = trio.run(_run_escaper, how, heartbeat)
        ended = time.time()
        assert not empty, "the kernel's view: the helper is still in the tree after the main process exited"
        assert heartbeat.exists(), "the helper never ran"
        late = escaper.last_beat_after(heartbeat, ended)
        assert late <= escaper.STOPS_WITHIN_S, f"the helper beat {late:.2f} s after its tree was closed"
    finally:
        escaper.stop(heartbeat)


@pytest.mark.parametrize("kind", [*CONFINED, "none"])
def test_a_helper_left_running_is_named_and_killed(kind: str) -> None:
    """An ordinary leftover (``sleep``) is named, with the pid the tree's processes know it by."""
    how = Confinement("none", "not confined: a test") if kind == "none" else _machine(kind)

    async def main() -> tuple[list[proctree.Member], bool]:
        body = "import subprocess; subprocess.Popen(['sleep', '30'], start_new_session=True)"
        with trio.fail_after(30):
            async with proctree.open_tree([sys.executable, "-c", body], env=dict(os.environ), how=how) as tree:
                await tree.wait()
                await trio.sleep(0.1)
                members = tree.members()
                empty = tree.empty()
                tree.kill()
                with trio.fail_after(5):
                    while not tree.empty():
                        await trio.sleep(0.01)
                return members, empty

    members, empty = trio.run(main)
    assert not empty
    assert [m for m in members if "sleep 30" in m.described], members
    assert not [m for m in members if procfs.alive(m.pid)], "a member outlived the tree"
    if kind == "pid-namespace":
        assert all(m.inner != m.pid for m in members)  # the namespace numbers its own processes


def test_the_main_process_exit_code_and_signal_are_reported() -> None:
    how = _machine("pid-namespace")

    async def main() -> tuple[int, int]:
        env = dict(os.environ)
        async with proctree.open_tree([sys.executable, "-c", "raise SystemExit(7)"], env=env, how=how) as tree:
            seven = await tree.wait()
        body = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
        async with proctree.open_tree([sys.executable, "-c", body], env=env, how=how) as tree:
            killed = await tree.wait()
        return seven, killed

    assert trio.run(main) == (7, -15)


@pytest.mark.parametrize("kind", [*CONFINED, "none"])
def test_any_number_of_tasks_wait_for_the_main_process_while_another_asks_if_it_is_empty(kind: str) -> None:
    """A session's exit watcher and a probe both wait for the server's exit while the teardown asks
    ``empty()``: one waiter per descriptor is all trio allows, so the tree must not hand the wait down."""
    how = Confinement("none", "not confined: a test") if kind == "none" else _machine(kind)

    async def main() -> list[int]:
        codes: list[int] = []

        async def waiter(tree: proctree.ProcessTree) -> None:
            codes.append(await tree.wait())

        argv = [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(5)"]
        with trio.fail_after(20):
            async with proctree.open_tree(argv, env=dict(os.environ), how=how) as tree, trio.open_nursery() as n:
                for _ in range(3):
                    n.start_soon(waiter, tree)
                while len(codes) < 3:
                    tree.empty()  # may read the exit message itself: the waiters must still wake
                    await trio.sleep(0.01)
        return codes

    assert trio.run(main) == [5, 5, 5]


@pytest.mark.parametrize("kind", [*CONFINED, "none"])
def test_kill_ends_the_main_process_before_it_can_see_its_stdin_close(kind: str, tmp_path: Path) -> None:
    """As a group kill did: a server killed and then given stdin EOF must not run its graceful end (the fake
    closed its trace bundle, which a kill leaves open, while the namespace was still being torn down)."""
    how = Confinement("none", "not confined: a test") if kind == "none" else _machine(kind)
    graceful = tmp_path / "graceful"
    body = f"import sys; print('up', flush=True); sys.stdin.read(); open({str(graceful)!r}, 'w').write('x')"

    async def main() -> None:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
        async with proctree.open_tree([sys.executable, "-c", body], env=dict(os.environ), how=how, **pipes) as tree:
            assert tree.stdin is not None and tree.stdout is not None
            with trio.fail_after(20):
                await tree.stdout.receive_some(16)
                for _ in range(20):  # many chances for the race
                    await trio.sleep(0)
                tree.kill()
                await tree.stdin.aclose()
                assert await tree.wait() == -9

    for _ in range(5):
        trio.run(main)
        assert not graceful.exists(), "the main process ran on after kill()"


def test_a_command_that_cannot_be_executed_is_an_oserror(tmp_path: Path) -> None:
    how = _machine("pid-namespace")

    async def main() -> None:
        async with proctree.open_tree([str(tmp_path / "missing")], env=dict(os.environ), how=how):
            pass

    with pytest.raises(FileNotFoundError):
        trio.run(main)


@pytest.mark.parametrize("kind", [*CONFINED, "none"])
def test_only_the_trees_processes_hold_its_pipes(kind: str) -> None:
    """stdin / stdout are the main process's alone: EOF comes when it and its children are done, while the
    tree (its init, its launcher) lives on: a server's reader sees its exit as a direct child's."""
    how = Confinement("none", "not confined: a test") if kind == "none" else _machine(kind)

    async def main() -> tuple[bytes, bool]:
        argv = [sys.executable, "-c", "import sys; print(sys.stdin.read().upper(), end='')"]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
        async with proctree.open_tree(argv, env=dict(os.environ), how=how, **pipes) as tree:
            assert tree.stdin is not None and tree.stdout is not None
            await tree.stdin.send_all(b"hello from the harness")
            await tree.stdin.aclose()
            out = b""
            with trio.fail_after(10):
                while chunk := await tree.stdout.receive_some(4096):
                    out += chunk
                await tree.wait()
            return out, tree.empty()

    assert trio.run(main) == (b"HELLO FROM THE HARNESS", True)


def test_a_tree_dies_with_a_harness_killed_by_sigkill(tmp_path: Path) -> None:
    """No cleanup code runs in a SIGKILLed harness: the init's control socket closing ends the namespace."""
    _machine("pid-namespace")
    heartbeat = tmp_path / "heartbeat"
    harness = (
        "import os, sys, trio\n"
        "from codex_sandbox import proctree\n"
        "async def main():\n"
        f"    async with proctree.open_tree({escaper.argv(heartbeat)!r}, env=dict(os.environ)) as tree:\n"
        "        print('started', flush=True)\n"
        "        await trio.sleep(60)\n"
        "trio.run(main)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 10
        while not heartbeat.exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # the escaper's interpreter starting; bounded
        proc.kill()
        proc.wait(timeout=10)
        ended = time.time()
        late = escaper.last_beat_after(heartbeat, ended)
        assert late <= escaper.STOPS_WITHIN_S, f"the helper beat {late:.2f} s after the harness was SIGKILLed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        escaper.stop(heartbeat)


def test_end_all_kills_every_open_tree_from_outside_the_loop() -> None:
    """The SIGTERM path: :func:`proctree.end_all` is synchronous and reaches every registered tree."""
    how = _machine("pid-namespace")

    async def main() -> tuple[int, int]:
        env = dict(os.environ)
        async with (
            proctree.open_tree(["sleep", "30"], env=env, how=how) as one,
            proctree.open_tree(["sleep", "31"], env=env, how=how) as two,
        ):
            assert proctree.end_all() >= 2
            with trio.fail_after(5):  # without the kill: 30 s
                return await one.wait(), await two.wait()

    assert trio.run(main) == (-9, -9)
    assert proctree.base._live == {}, "a closed tree stayed registered"


# --- choosing the confinement ---------------------------------------------------------------------------


def test_the_choice_falls_back_in_order_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """No working PID namespace, no cgroup: "not confined", with every reason (a machine where it is not allowed)."""
    monkeypatch.setattr(pidns, "launchers", lambda which: [("/bin/false",)])
    monkeypatch.setattr(detect, "_own_cgroup", lambda version: None)
    detect.forget()
    try:
        how = detect.confinement()
    finally:
        detect.forget()
    assert how.kind == "none" and how.detail.startswith("not confined: ")
    assert "no PID namespace: false" in how.detail
    assert "no cgroup v2 mounted" in how.detail and "no cgroup v1 freezer mounted" in how.detail


def test_a_forced_confinement_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(proctree.CONFINE_ENV, "none")
    assert detect.confinement().kind == "none"
    monkeypatch.setenv(proctree.CONFINE_ENV, "sandbox-please")
    from contracts.exitcodes import UsageError

    with pytest.raises(UsageError, match="CODEX_HARNESS_PROCTREE"):
        detect.confinement()


@pytest.mark.skipif(not ROOT, reason="the machine's own answer is checked as root (CI)")
def test_as_root_here_the_tree_is_a_pid_namespace() -> None:
    """CI runs as root with bubblewrap installed: the strongest confinement must be the one chosen."""
    assert detect._detect("auto").kind == "pid-namespace"


HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_the_cgroup_is_found_in_mountinfo() -> None:
    cgroups = "6:freezer:/ci/job\n1:name=systemd:/\n0::/user.slice/user-0.slice/session 1.scope\n"
    assert cgroup.own_cgroup(HYBRID, cgroups, 2) == Path(
        "/sys/fs/cgroup/unified/user.slice/user-0.slice/session 1.scope"
    )
    assert cgroup.own_cgroup(HYBRID, cgroups, 1) == Path("/sys/fs/cgroup/freezer/ci/job")
    # A container's view: the mount's root is our own cgroup; a cgroup outside it is not ours to use.
    container = "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert cgroup.own_cgroup(container, "0::/docker/abc\n", 2) == Path("/sys/fs/cgroup")
    assert cgroup.own_cgroup(container, "0::/elsewhere\n", 2) is None
    assert cgroup.own_cgroup("", "0::/\n", 2) is None
    spaced = "41 31 0:38 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n"
    assert cgroup.own_cgroup(spaced, "0::/\n", 2) == Path("/mnt/cg two")
