"""The confined launcher (``codex_sandbox.confine``) and the one way a binary's one-shot commands run
(``harness.codex_bin.run_binary``: bounded, confined, scrubbed). No real codex needed: stand-in scripts.

Each mechanism (bubblewrap, unshare) is proved on this machine; on one where a mechanism cannot confine,
its tests skip with the reason (fail when ``CODEX_HARNESS_REQUIRE_REAL=1``, as in CI, which installs
bubblewrap and runs as root).
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import paths as tests_paths

from codex_client.process import run_marker, set_run_marker
from codex_sandbox import confine
from codex_sandbox.bounded_run import OutputOverflow, run_capped
from conformance.noleak import marked_processes
from harness.codex_bin import CodexNotFound, codex_version, run_binary
from harness.targets.fake import fake_codex_argv

MECHANISMS = list(confine.MECHANISMS)


def _unavailable(reason: str) -> None:
    if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
        pytest.fail(f"CODEX_HARNESS_REQUIRE_REAL=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher is chosen again in this test, and the process's choice restored after it."""
    monkeypatch.setattr(confine, "_chosen", None)
    monkeypatch.setattr(confine, "_unconfined_asked", False)
    monkeypatch.setattr(confine, "_tested", {})


def _choose(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Start binaries with ``name`` (a mechanism, or ``none``: ``--unconfined``) in this test."""
    if name == confine.UNCONFINED:
        monkeypatch.setattr(confine, "_unconfined_asked", True)
        return name
    tool = shutil.which(name)
    problem = f"no {name} on PATH" if tool is None else confine.self_test(confine.Launcher(name, tool))
    if problem is not None:
        _unavailable(f"{name} cannot confine here: {problem}")
    monkeypatch.setenv(confine.MECHANISM_ENV, name)
    return name


@pytest.fixture(params=[*MECHANISMS, confine.UNCONFINED])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> str:
    """Every launcher: the bounds hold whether or not the binary is confined."""
    return _choose(str(request.param), monkeypatch)


@pytest.fixture(params=MECHANISMS)
def confined(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> str:
    return _choose(str(request.param), monkeypatch)


@pytest.fixture
def marker() -> Iterator[str]:
    """A run marker of this test's own: what it starts is found (and killed) by it."""
    previous = set_run_marker(uuid.uuid4().hex)
    try:
        yield run_marker()
    finally:
        for pid in marked_processes(run_marker()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        set_run_marker(previous)


@pytest.fixture
def user_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The harness's HOME for the test, outside /tmp (so its mask, not the private /tmp, hides it), with a
    planted ``.codex/auth.json``."""
    base = Path(tempfile.mkdtemp(prefix="codex-harness-home-", dir="/var/tmp")).resolve()
    home = base / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text(f'{{"OPENAI_API_KEY": "sk-{secrets.token_hex(8)}"}}')
    monkeypatch.setenv("HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside /tmp and outside every mask: the host's ``/`` as the binary sees it, read-only."""
    path = Path(tempfile.mkdtemp(prefix="codex-harness-outside-", dir="/var/tmp")).resolve()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _script(directory: Path, body: str, name: str = "codex") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _left_running(marker: str, wait_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while (left := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel ends a namespace asynchronously
    return left


# --- what a confined binary can reach ------------------------------------------------------------------


def test_a_confined_binary_writes_only_its_run_directory_and_cannot_read_the_home(
    confined: str, user_home: Path, outside: Path, tmp_path: Path
) -> None:
    secret = user_home / ".codex" / "auth.json"
    binary = _script(
        tmp_path / "bin",
        f"(echo x > {outside}/written) 2>/dev/null; echo outside=$?\n"
        f"(echo x > {user_home}/written) 2>/dev/null; echo home=$?\n"
        f"(echo x > {tmp_path}/written) 2>/dev/null; echo tmp=$?\n"
        'echo x > "$HOME/mine" && echo x > "$CODEX_HOME/mine" && echo x > "$TMPDIR/mine" && echo run=$?\n'
        f"cat {secret} 2>/dev/null; echo secret=$?\n"
        "head -c 0 /etc/hostname && echo etc=$?\n",
    )
    done = run_binary([str(binary)], 20)
    said = done.stdout.decode()
    assert done.returncode == 0, (said, done.stderr)
    assert "run=0" in said and "etc=0" in said, said  # positive controls: the run's own places, the host's /etc
    for place in ("outside", "home", "tmp", "secret"):
        assert f"{place}=0" not in said, said
    assert secret.read_text() not in said
    assert not (outside / "written").exists() and not (user_home / "written").exists()
    assert not (tmp_path / "written").exists()


ESCAPE = (
    "umount -l /tmp; umount -l /home; umount -l /run; umount -l {home}; mount -o remount,rw,bind /; "
    "mount -o remount,rw /"
)
PRIVILEGES = "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status"


def _status(said: str) -> dict[str, int]:
    found = {}
    for line in said.splitlines():
        name, _, value = line.partition(":")
        if name.startswith("Cap") or name == "NoNewPrivs":
            found[name] = int(value.strip(), 16)
    return found


def test_root_inside_cannot_unmount_the_masks_or_remount_the_root(
    confined: str, user_home: Path, outside: Path, tmp_path: Path
) -> None:
    """Old: as root, both mechanisms left the binary every capability (``CapEff 000001fffeffffff``), and
    ``umount -l /tmp; mount -o remount,rw,bind /`` let it write on the host. Now it runs with none, cannot gain
    one (no_new_privs, empty bounding set), and from a nested user namespace of its own (every capability
    there) the masks and read-only mounts are locked. Runs as whoever runs the tests (root in CI);
    :func:`test_the_escape_fails_for_an_unprivileged_user_too` runs it as nobody."""
    outside.chmod(0o777)  # for an unprivileged user too, only the confinement may stop the write
    secret = user_home / ".codex" / "auth.json"
    escape = ESCAPE.format(home=user_home)
    host_mnt = os.readlink("/proc/self/ns/mnt")
    binary = _script(
        tmp_path / "bin",
        # never on the host's mounts: a launcher that did not confine would run this unconfined
        f'[ "$(readlink /proc/self/ns/mnt)" = "{host_mnt}" ] && {{ echo not-confined; exit 1; }}\n'
        f"({escape}) >/dev/null 2>&1\n"
        f"(echo x > {outside}/escaped) 2>/dev/null; echo outside=$?\n"
        f"(echo x > {tmp_path}/escaped) 2>/dev/null; echo tmp=$?\n"
        f"cat {secret} 2>/dev/null; echo secret=$?\n"
        f"unshare --user --map-root-user --mount /bin/sh -c "
        f"'({escape}) >/dev/null 2>&1; echo x > {outside}/nested; cat {secret}' 2>/dev/null; echo nested=$?\n"
        'echo x > "$HOME/mine" && echo run=$?\n'
        f"{PRIVILEGES}\n",
    )
    done = run_binary([str(binary)], 20)
    said = done.stdout.decode()
    assert done.returncode == 0, (said, done.stderr)
    assert "run=0" in said, said  # positive control: the run's own directory is written
    for place in ("outside", "tmp", "secret"):
        assert f"{place}=0" not in said, said
    assert secret.read_text() not in said, said
    assert sorted(p.name for p in outside.iterdir()) == [] and not (tmp_path / "escaped").exists()
    status = _status(said)
    assert status == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0, "NoNewPrivs": 1}, said


@pytest.fixture
def nobody_home() -> Iterator[Path]:
    """A directory of nobody's own (its HOME and pytest's base), where nobody can reach it."""
    home = Path(tempfile.mkdtemp(prefix="codex-harness-nobody-")).resolve()
    os.chown(home, 65534, 65534)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _as_nobody(setpriv: str, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", *argv],
        capture_output=True, text=True, timeout=300, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _nobodys_python(setpriv: str, env: dict[str, str], cwd: Path) -> str | None:
    """An interpreter nobody can run the harness with: this one, else the system's of the same version (this
    one may live under a home nobody cannot enter, e.g. pyenv's under /root: its path then does not resolve for
    nobody, though this kernel still lets it be executed by a path through a link)."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    for python in _unique_paths([sys.executable, system]):
        probe = [python, "-c", "import os, sys, harness, trio; os.stat(os.path.realpath(sys.executable)); "
                 f"sys.exit(sys.version_info[:2] != {sys.version_info[:2]})"]  # fmt: skip
        if _as_nobody(setpriv, probe, env, cwd).returncode == 0:
            return python
    return None


def _unique_paths(paths: list[str | None]) -> list[str]:
    return list(dict.fromkeys(p for p in paths if p))


def test_the_escape_fails_for_an_unprivileged_user_too(confined: str, request: pytest.FixtureRequest) -> None:
    """The test above, as ``nobody`` (``setpriv --reuid=65534``), where this machine allows it: run as root,
    this starts it in a pytest of its own."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to become an unprivileged user")
    home = request.getfixturevalue("nobody_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_HARNESS_CONFINE"))}
    repo = str(tests_paths.REPO)
    env.update(HOME=str(home), PYTHONDONTWRITEBYTECODE="1", CODEX_HARNESS_REQUIRE_REAL="0",
               PYTHONPATH=os.pathsep.join([sysconfig.get_paths()["purelib"], repo]))  # fmt: skip
    python = _nobodys_python(setpriv, env, home)
    if python is None:  # where the machine allows it: a skip, even in CI (root's run above is required)
        pytest.skip("no Python interpreter that nobody can run the harness with")
    test = f"{Path(__file__).resolve()}::test_root_inside_cannot_unmount_the_masks_or_remount_the_root[{confined}]"
    args = [str(python), "-m", "pytest", test, "-q", "-rs", "-p", "no:cacheprovider", "--basetemp", str(home / "pt")]
    done = _as_nobody(setpriv, args, env, home)
    said = done.stdout + done.stderr
    if done.returncode == 0 and " skipped" in said and " passed" not in said:
        pytest.skip(f"as nobody: {said.strip()}")  # e.g. no unprivileged user namespaces on this machine
    assert done.returncode == 0 and "1 passed" in said, said


def test_a_launcher_that_leaves_root_its_capabilities_is_refused(tmp_path: Path) -> None:
    """The old bwrap invocation (no user namespace, no ``--cap-drop``) as root: the self-test's planted
    ``umount`` of the mask succeeds inside, and the mechanism is refused, saying so."""
    real = shutil.which("bwrap")
    if os.geteuid() != 0 or real is None:
        pytest.skip("needs root and bwrap (only root keeps capabilities in bwrap)")
    old = tmp_path / "bin" / "bwrap"
    old.parent.mkdir()
    old.write_text(
        f"#!{sys.executable} -I\n"
        "import os, sys\n"
        "args, out = sys.argv[1:], []\n"
        "while args:\n"
        "    a = args.pop(0)\n"
        "    if a in ('--uid', '--gid', '--cap-drop'): args.pop(0); continue\n"
        "    if a == '--unshare-user': continue\n"
        "    if a == '--': out += [a, *args]; break\n"
        "    out.append(a)\n"
        f"os.execv({real!r}, [{real!r}, *out])\n"
    )
    old.chmod(0o755)
    problem = confine.self_test(confine.Launcher("bwrap", str(old)))
    assert problem is not None and problem.startswith("a root inside could escape: umount -l of a mask"), problem


def test_the_self_test_reads_the_privileges_it_sees() -> None:
    clean = "CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\nNoNewPrivs:\t1\n"
    assert confine._privileges_problem(clean) is None
    rooted = clean.replace("CapEff:\t0", "CapEff:\t000001fffeffffff")
    assert confine._privileges_problem(rooted) == "the confined process keeps capabilities (CapEff 000001fffeffffff)"
    assert "no_new_privs is off" in str(confine._privileges_problem(clean.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0")))
    assert "could not be read" in str(confine._privileges_problem("CapEff:\t0\n"))


def test_nothing_a_confined_binary_starts_outlives_it(confined: str, marker: str, tmp_path: Path) -> None:
    """A grandchild that left the process group (``setsid``) dies with the binary's PID namespace."""
    binary = _script(tmp_path / "bin", "setsid sleep 60 </dev/null >/dev/null 2>&1 &\necho codex-cli 1.2.3\n")
    assert codex_version(binary, timeout=10) == "1.2.3"
    assert _left_running(marker) == []


def test_the_version_probe_is_bounded_when_a_grandchild_holds_stdout(
    mechanism: str, marker: str, tmp_path: Path
) -> None:
    """Old: ``communicate`` waited for EOF on stdout, held by a setsid'd grandchild: 60.5 s for a 7 s bound.
    Now the answer is read once the binary exits (a grace of 0.5 s for its pipes), on every launcher."""
    binary = _script(tmp_path / "bin", "setsid sleep 30 &\necho codex-cli 1.2.3\n")
    started = time.monotonic()
    assert codex_version(binary, timeout=5) == "1.2.3"
    assert time.monotonic() - started < 3
    left = _left_running(marker, 2 if mechanism == confine.UNCONFINED else 5)
    if mechanism != confine.UNCONFINED:
        assert left == [], "the grandchild outlived the confined --version"
    # unconfined, a grandchild that left the group is beyond killpg (the marker fixture ends it)


def test_a_hanging_version_is_bounded_whatever_its_grandchild_does(mechanism: str, marker: str, tmp_path: Path) -> None:
    binary = _script(tmp_path / "bin", "setsid sleep 30 &\nsleep 30\n")
    started = time.monotonic()
    with pytest.raises(CodexNotFound, match=r"did not answer within 1 s"):
        codex_version(binary, timeout=1)
    assert time.monotonic() - started < 3


def test_version_output_is_read_bounded(mechanism: str, tmp_path: Path) -> None:
    """Old: everything was read into memory (1.5 GB of output: 2.9 GB RSS). Now at most 64 KiB, then refused."""
    binary = _script(tmp_path / "bin", "head -c 200000000 /dev/zero\necho codex-cli 1.2.3\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    started = time.monotonic()
    with pytest.raises(CodexNotFound, match=r"--version wrote more than 65536 bytes to stdout"):
        codex_version(binary, timeout=30)
    assert time.monotonic() - started < 5
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 50, f"peak RSS grew {grown_mib:.0f} MiB"


def test_every_start_gets_the_scrubbed_environment_and_a_temporary_home(
    mechanism: str, user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old: ``--version`` ran with the user's HOME and OPENAI_API_KEY, and wrote ``~/.codex/tmp`` there."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leaked")
    monkeypatch.setenv("CODEX_SANDBOX", "seatbelt")
    monkeypatch.setenv("CODEX_HOME", str(user_home / ".codex"))
    binary = _script(
        tmp_path / "bin",
        f'case "$OPENAI_API_KEY$CODEX_SANDBOX" in ?*) echo leaked; exit 1;; esac\n'
        f'case "$HOME $CODEX_HOME $TMPDIR" in *{user_home}*) echo user-home; exit 1;; esac\n'
        'mkdir -p "$HOME/.codex/tmp" "$CODEX_HOME/tmp" || exit 1\n'
        "echo codex-cli 1.2.3\n",
    )
    before = sorted(p.name for p in (user_home / ".codex").iterdir())
    assert codex_version(binary, timeout=10) == "1.2.3"
    assert sorted(p.name for p in (user_home / ".codex").iterdir()) == before  # nothing written in ~/.codex
    done = run_binary(["/usr/bin/env"], 10)
    names = {line.split("=", 1)[0] for line in done.stdout.decode().splitlines() if "=" in line}
    assert {n for n in names if n.startswith(("OPENAI_", "CODEX_"))} == {"CODEX_HOME", "CODEX_HARNESS_RUN_MARKER"}
    env = dict(line.split("=", 1) for line in done.stdout.decode().splitlines() if "=" in line)
    assert env["HOME"] != str(user_home) and env["HOME"].endswith("/home")
    assert Path(env["CODEX_HOME"]).parent == Path(env["HOME"]).parent == Path(env["TMPDIR"]).parent
    assert not Path(env["HOME"]).parent.exists()  # the run directory is gone with the run


def test_a_binary_installed_under_a_masked_home_still_runs(
    confined: str, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """npm installs under ``~`` (``.tools/node_modules``): the install tree is bound back read-only, the rest of
    the home stays masked."""
    install = user_home / "project" / ".tools" / "node_modules" / "@openai" / "codex" / "bin"
    binary = _script(install, f"cat {user_home}/.codex/auth.json 2>/dev/null && exit 1\necho codex-cli 3.2.1\n")
    assert codex_version(binary, timeout=10) == "3.2.1"
    where = confine.layout(binary, writable=["/tmp"], cwd="/tmp", scratch="/tmp")
    assert str(user_home / "project" / ".tools" / "node_modules") in where.readable
    assert not any(p in (str(user_home), str(user_home / ".codex")) for p in where.readable)


# --- the layout and the choice ------------------------------------------------------------------------


def test_the_layout_masks_the_homes_and_never_the_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", "/")
    where = confine.layout("/usr/bin/true", writable=[tmp_path], cwd=tmp_path, scratch=tmp_path)
    assert "/" not in where.masks
    assert {"/home", "/root", "/run"} & set(where.masks) == {p for p in ("/home", "/root", "/run") if Path(p).is_dir()}
    monkeypatch.setenv("HOME", str(tmp_path))  # under /tmp: the private /tmp hides it already
    assert str(tmp_path.resolve()) not in confine.layout("/bin/sh", writable=[], cwd="/", scratch=tmp_path).masks
    kept = confine.layout("/bin/sh", writable=[], cwd="/", scratch=tmp_path, private_tmp=False).masks
    assert str(tmp_path.resolve()) in kept


def test_a_binary_directly_in_the_home_is_bound_back_alone(user_home: Path) -> None:
    binary = _script(user_home, "echo codex-cli 1.0.0\n")
    where = confine.layout(binary, writable=[], cwd="/", scratch="/tmp")
    assert str(binary) in where.readable and str(user_home) not in where.readable


def test_a_mechanism_that_does_not_confine_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_choice: None
) -> None:
    """A ``bwrap`` that ignores its options (runs the command as is) fails the self-test: never trusted."""
    fake = _script(tmp_path / "fakebin", 'while [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n', name="bwrap")
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    monkeypatch.setenv(confine.MECHANISM_ENV, "bwrap")
    with pytest.raises(confine.ConfinementUnavailable, match="bwrap does not confine here: a masked home stayed"):
        confine.current()


def test_no_mechanism_means_a_clear_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_choice: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(confine.MECHANISM_ENV, raising=False)
    with pytest.raises(confine.ConfinementUnavailable) as caught:
        confine.current()
    message = str(caught.value)
    assert "no bwrap on PATH; no unshare on PATH" in message and "--unconfined" in message
    with pytest.raises(CodexNotFound, match="cannot confine the real binary"):
        codex_version("/bin/true")
    confine.set_unconfined(True)
    assert confine.current() == confine.Launcher(confine.UNCONFINED)


def test_an_unknown_mechanism_name_is_refused(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    monkeypatch.setenv(confine.MECHANISM_ENV, "chroot")
    with pytest.raises(confine.ConfinementUnavailable, match="expected one of bwrap, unshare"):
        confine.current()


# --- every command refuses without a confinement, exit 3, unless --unconfined ------------------------


def _harness(args: list[str], path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_BIN", confine.MECHANISM_ENV)}
    env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )


def _fake_release(tmp_path: Path, release: str) -> Path:
    """A ``codex`` that is fake-codex playing ``release`` (an app-server: a session can run on it)."""
    path = tmp_path / f"codex-{release}"
    path.write_text(f'#!/bin/sh\nexec {" ".join(fake_codex_argv())} --release {release} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _commands(codex: Path, other: Path, tmp_path: Path) -> dict[str, list[str]]:
    c = str(codex)
    return {
        "run": ["run", "--target", "real", "--codex", c, "--scenario", "plain"],
        "record": ["record", "--codex", c, "--scenario", "plain", "--out", str(tmp_path / "rec.jsonl")],
        "diff": ["diff", "--codex", c, "--scenario", "plain"],
        "latency": ["latency", "--target", "real", "--codex", c, "--scenario", "long_stream", "--samples", "1"],
        "validate-release": ["validate-release", "--codex", c, "--out", str(tmp_path / "vr"), "--scenario", "plain"],
        "matrix": ["matrix", "--codex", c, "--codex", str(other), "--out", str(tmp_path / "mx"), "--scenario", "plain"],
        "schema pin": ["schema", "pin", "--codex", c, "--out", str(tmp_path / "pins")],
    }


@pytest.mark.parametrize("command", ["run", "record", "diff", "latency", "validate-release", "matrix", "schema pin"])
def test_every_command_that_starts_a_binary_refuses_without_a_confinement(command: str, tmp_path: Path) -> None:
    codex, other = _fake_release(tmp_path, "0.171.0"), _fake_release(tmp_path, "0.169.0")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    done = _harness(_commands(codex, other, tmp_path)[command], str(empty), tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "cannot confine the real binary to its run directory: no bwrap on PATH; no unshare on PATH" in done.stderr
    assert "--unconfined" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "rec.jsonl").exists() and not (tmp_path / "pins").exists()


def test_unconfined_runs_and_says_so(tmp_path: Path) -> None:
    codex = _fake_release(tmp_path, "0.171.0")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    args = ["run", "--target", "real", "--codex", str(codex), "--scenario", "plain", "--unconfined"]
    done = _harness(args, str(empty), tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "--unconfined: the real binary runs without filesystem confinement" in done.stderr
    assert "RESULT: PASS" in done.stdout


# --- the bounded runner itself ------------------------------------------------------------------------


def test_stderr_is_capped_too(tmp_path: Path) -> None:
    with pytest.raises(OutputOverflow, match="more than 1000 bytes to stderr"):
        run_capped(["sh", "-c", "head -c 5000 /dev/zero >&2"], timeout=10, max_stdout=1000, max_stderr=1000)


def test_a_program_that_closes_its_streams_and_keeps_running_is_timed_out() -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_capped(["sh", "-c", "exec >&- 2>&-; sleep 30"], timeout=1, max_stdout=10, max_stderr=10)
    assert time.monotonic() - started < 3


def test_the_init_reads_escaped_mount_points() -> None:
    sys.path.insert(0, str(Path(confine.INIT).parent))
    try:
        import confine_init
    finally:
        sys.path.pop(0)
    assert confine_init.unescape(r"/mnt/with\040space\134x") == "/mnt/with space\\x"
    assert confine_init.under("/a/b", ["/a"]) and not confine_init.under("/ab", ["/a"])


def test_a_binary_named_by_a_relative_path_runs_from_its_run_directory(
    mechanism: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(tmp_path / "bin", "echo codex-cli 4.5.6\n")
    monkeypatch.chdir(tmp_path)
    assert codex_version("bin/codex", timeout=10) == "4.5.6"


def test_host_configuration_linked_under_a_mask_is_shown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``/etc/resolv.conf`` → ``/run/systemd/resolve/stub-resolv.conf`` (systemd-resolved): /run is masked, the
    file it links to is bound back read-only, so names resolve as they would unconfined."""
    run = tmp_path / "run" / "systemd" / "resolve"
    run.mkdir(parents=True)
    (run / "stub-resolv.conf").write_text("nameserver 127.0.0.53\n")
    link = tmp_path / "etc-resolv.conf"
    link.symlink_to(run / "stub-resolv.conf")
    monkeypatch.setattr(confine, "HOST_CONFIG", (str(link),))
    where = confine.layout("/bin/sh", writable=[], cwd="/", scratch="/tmp", masks=[tmp_path / "run"], private_tmp=False)
    assert where.readable == (str(run / "stub-resolv.conf"),)
