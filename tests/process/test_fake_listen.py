"""``fake-codex app-server --listen``: the URL rules, the auth flags and the bad inputs a user meets, each with
its clear error and exit code, nothing hanging (what the real binary does is compared in
tests/real/test_transport_fidelity.py; here is what only the fake decides, and the pure parts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fake_server import ws_auth, ws_http
from fake_server.ws_auth import AuthFlags, Policy, policy_from_flags, refusal, signed_token
from harness.targets.fake import fake_codex_argv

SECRET = b"k" * 32


def fake(*args: str, cwd: Path, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    env["CODEX_HOME"] = str(cwd)
    return subprocess.run(
        [*fake_codex_argv(), "app-server", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_fifo_token_file_is_refused_at_once(tmp_path: Path) -> None:
    """The real binary blocks forever reading a FIFO; the fake says what it is and exits 1."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    done = fake(
        "--listen", "ws://127.0.0.1:0", "--ws-auth", "capability-token", "--ws-token-file", str(fifo), cwd=tmp_path
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: failed to read websocket auth secret {fifo}: is a FIFO (named pipe), not a regular file"
    )


def test_a_directory_or_a_huge_file_as_a_secret_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (ws_auth.MAX_SECRET_BYTES + 1))
    for path in (tmp_path, big):
        done = fake("--listen", "ws://127.0.0.1:0", "--ws-auth", "capability-token", "--ws-token-file", str(path),
                    cwd=tmp_path)  # fmt: skip
        assert done.returncode == 1 and done.stderr.startswith("Error: failed to read websocket auth secret")


def test_listen_usage_errors_are_exit_2_and_refusals_exit_1(tmp_path: Path) -> None:
    bad = fake("--listen", "ws://localhost:0", cwd=tmp_path)
    assert bad.returncode == 2 and "expected `ws://IP:PORT`" in bad.stderr
    off = fake("--listen", "off", cwd=tmp_path)
    assert (
        off.returncode == 1
        and off.stderr.strip() == "Error: no transport configured; use --listen or enable remote control"
    )
    exposed = fake("--listen", "ws://0.0.0.0:0", cwd=tmp_path)
    assert exposed.returncode == 1 and "refusing to start non-loopback websocket listener 0.0.0.0:0" in exposed.stderr


@pytest.mark.parametrize(
    ("value", "scheme", "host", "port"),
    [("ws://127.0.0.1:0", "ws", "127.0.0.1", 0), ("ws://[::1]:8765", "ws", "::1", 8765), ("stdio://", "stdio", "", 0)],
)
def test_listen_values(value: str, scheme: str, host: str, port: int) -> None:
    listen = ws_http.parse_listen(value, "/home/x/.codex")
    assert (listen.scheme, listen.host, listen.port) == (scheme, host, port)


@pytest.mark.parametrize("value", ["ws://localhost:0", "ws://127.0.0.1", "ws://1.2.3.4:0/x", "ws://[::1:0", "wss://1.2.3.4:1",
                                   "ws://127.0.0.1:70000", "ws://::1:80", ""])  # fmt: skip
def test_bad_listen_values(value: str) -> None:
    with pytest.raises(ws_http.ListenUsageError, match="For more information"):
        ws_http.parse_listen(value, "/h")


def test_unix_default_path_and_non_loopback_rules() -> None:
    assert ws_http.parse_listen("unix://", "/h/.codex").path == "/h/.codex/app-server-control/app-server-control.sock"
    exposed = ws_http.parse_listen("ws://0.0.0.0:0", "/h")
    with pytest.raises(ws_http.ListenRefused):
        ws_http.check_listener(exposed, Policy())
    ws_http.check_listener(exposed, Policy("capability-token", token_sha256=b"x" * 32))  # allowed with auth
    assert "websocket auth is required" in ws_http.banner(exposed, 1234)
    assert "ws://[::1]:9" in ws_http.banner(ws_http.parse_listen("ws://[::1]:0", "/h"), 9)


def test_jwt_rules_at_their_edges() -> None:
    policy = Policy("signed-bearer-token", secret=SECRET, issuer="i", audience="a", skew=30)
    now = 1_000_000

    def why(**claims: object) -> str | None:
        token = signed_token(SECRET, {"exp": now + 60, "iss": "i", "aud": "a", **claims})
        return refusal(policy, f"Bearer {token}".encode(), now)

    assert why() is None
    assert why(exp=now - 30) is None and why(exp=now - 31) == "expired websocket jwt"
    assert why(nbf=now + 30) is None and why(nbf=now + 31) == "websocket jwt is not valid yet"
    assert why(aud=["x", "a"]) is None and why(aud=["x"]) == "websocket jwt audience mismatch"
    assert why(iss=None) == "websocket jwt issuer mismatch"
    assert why(exp="soon") == "invalid websocket jwt" and why(exp=True) == "invalid websocket jwt"
    forged = signed_token(b"z" * 32, {"exp": now + 60, "iss": "i", "aud": "a"})
    assert refusal(policy, f"Bearer {forged}".encode(), now) == "invalid websocket jwt"
    assert refusal(policy, b"Bearer " + b"a" * 100_000, now) == "invalid websocket jwt"
    assert refusal(policy, "Bearer \u00e9".encode(), now) == "invalid authorization header"


def test_flag_combinations_in_the_real_binarys_words(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text(" tok \n")
    policy = policy_from_flags(AuthFlags("capability-token", token_file=str(token)))
    assert refusal(policy, b"Bearer tok", 0) is None and refusal(policy, b"Bearer tok2", 0) is not None
    with pytest.raises(ws_auth.AuthConfigError, match="mutually exclusive"):
        policy_from_flags(AuthFlags("capability-token", token_file=str(token), token_sha256="0" * 64))
    with pytest.raises(ws_auth.AuthConfigError, match="at least 32 bytes"):
        policy_from_flags(AuthFlags("signed-bearer-token", shared_secret_file=str(token)))


def test_a_fake_listener_stops_on_sigterm_with_0(tmp_path: Path) -> None:
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    env["CODEX_HOME"] = str(tmp_path)
    proc = subprocess.Popen([*fake_codex_argv(), "app-server", "--listen", "ws://127.0.0.1:0"], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first == "codex app-server (WebSockets)\n"
        assert proc.stderr.readline().startswith("  listening on: ws://127.0.0.1:")
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_server_on_the_same_unix_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    first = subprocess.Popen([*fake_codex_argv(), "app-server", "--listen", f"unix://{path}"], cwd=tmp_path, env=env,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(200):
            if os.path.lexists(path):
                break
            import time

            time.sleep(0.05)
        second = fake("--listen", f"unix://{path}", cwd=tmp_path)
        assert second.returncode == 1 and second.stderr.strip() == (
            f"Error: app-server control socket is already in use at {path}"
        )
    finally:
        first.terminate()
        first.wait(timeout=20)
    assert not os.path.lexists(path)  # the link and the socket are gone with the server



# --- a socket path nobody can squat: the real binary's rules, case by case ------------------------------
#
# Each case runs in a mount namespace of its own with a fresh /tmp (so /tmp/codex-daemon-0 is the test's, and
# another user's folder can be planted there), as root (only root can plant another user's files). The
# expected outcomes are what codex-cli 0.171.0 did (docs/transports.md, "Unix sockets");
# test_the_real_binary_plays_the_socket_table checks the table against a real binary when one is given.

SOCKET = "/tmp/s/a.sock"
DAEMON = "/tmp/codex-daemon-0"
REFUSED_DIR = "Error: app-server socket directory must be a user-owned directory with mode 0700"
REFUSED_PARENT = (
    "Error: socket parent must be owned by the user or root and prevent other users from replacing socket entries"
)
NOT_A_SOCKET = f"Error: app-server control socket path exists and is not a socket: {SOCKET}"
#: name: (setup, --listen value, exit code or "serves", first line of stderr, what is at the path afterwards)
SOCKET_CASES: dict[str, tuple[str, str, int | str, str, str]] = {
    "another user's world-writable folder": (
        f"mkdir {DAEMON}; chown 65534:65534 {DAEMON}; chmod 0777 {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "own world-writable folder": (f"mkdir {DAEMON}; chmod 0777 {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "own folder, mode 0755": (f"mkdir {DAEMON}; chmod 0755 {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "another user's 0700 folder": (
        f"mkdir -m 0700 {DAEMON}; chown 65534:65534 {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "a link to an own 0700 folder": (
        f"mkdir -m 0700 /tmp/other/d; ln -s /tmp/other/d {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "a file as the folder": (f"touch {DAEMON}", SOCKET, 1, REFUSED_DIR, "nothing"),
    "a link to a file at the path": (
        f"touch /tmp/other/f; ln -s /tmp/other/f {SOCKET}", SOCKET, 1, NOT_A_SOCKET, "link to /tmp/other/f"),
    "a dangling link at the path": (
        f"ln -s /tmp/other/none {SOCKET}", SOCKET, 1, "Error: File exists (os error 17)", "link to /tmp/other/none"),
    "a link to a folder at the path": (
        f"ln -s /tmp/other {SOCKET}", SOCKET, 1, NOT_A_SOCKET, "link to /tmp/other"),
    "a file at the path": (f"touch {SOCKET}", SOCKET, 1, NOT_A_SOCKET, "file"),
    "a link to a stale socket elsewhere": (
        f"{{py}} -c \"import socket; socket.socket(socket.AF_UNIX).bind('/tmp/other/sock')\"; "
        f"ln -s /tmp/other/sock {SOCKET}", SOCKET, 1, NOT_A_SOCKET, "link to /tmp/other/sock"),
    "a stale socket at the path": (
        f"{{py}} -c \"import socket; socket.socket(socket.AF_UNIX).bind('{SOCKET}')\"", SOCKET, "serves", "",
        "nothing"),
    "a dangling link to its own socket": (
        f"mkdir -m 0700 {DAEMON}; ln -s {DAEMON}/{{hash}} {SOCKET}", SOCKET, "serves", "", "nothing"),
    "a folder anyone can write in": ("chmod 0777 /tmp/s", SOCKET, 1, REFUSED_PARENT, "nothing"),
    "a group-writable folder": ("chmod 0775 /tmp/s", SOCKET, 1, REFUSED_PARENT, "nothing"),
    "another user's folder": ("chown 65534:65534 /tmp/s", SOCKET, 1, REFUSED_PARENT, "nothing"),
    "another user's sticky folder": ("chown 65534:65534 /tmp/s; chmod 1777 /tmp/s", SOCKET, 1, REFUSED_PARENT,
                                     "nothing"),
    "root's sticky folder, like /tmp": ("chmod 1777 /tmp/s", SOCKET, "serves", "", "nothing"),
    "a missing folder (made 0700)": ("", "/tmp/s/no/a.sock", "serves", "", "nothing"),
    "two missing folders": ("", "/tmp/s/no/no/a.sock", 1, "Error: No such file or directory (os error 2)", "nothing"),
    "the default path under a linked folder": (
        "ln -s /tmp/other /tmp/w/ch/app-server-control", "", 1,
        "Error: socket directory path exists and is not a directory: /tmp/w/ch/app-server-control", "nothing"),
    "the default path, its folder world-writable": (
        "mkdir -m 0777 /tmp/w/ch/app-server-control; chmod 0777 /tmp/w/ch/app-server-control", "", "serves", "",
        "nothing"),
}  # fmt: skip


def _socket_case(argv: list[str], setup: str, listen: str, py: str) -> dict[str, object]:
    """Run one case (in the private /tmp of :func:`_socket_table`); what happened, as data."""
    import contextlib
    import hashlib
    import shutil
    import signal
    import socket
    import stat
    import time

    for path in ("/tmp/s", "/tmp/other", "/tmp/w", DAEMON):
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        shutil.rmtree(path, ignore_errors=True)
    for path in ("/tmp/s", "/tmp/other", "/tmp/w/ch", "/tmp/w/home", "/tmp/w/tmp"):
        os.makedirs(path)
    Path("/tmp/w/ch/config.toml").write_text(
        'check_for_update_on_startup = false\n[analytics]\nenabled = false\n[features]\nplugins = false\n'
    )
    path = listen or "/tmp/w/ch/app-server-control/app-server-control.sock"
    canonical = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    physical = f"{DAEMON}/{hashlib.sha256(canonical.encode()).hexdigest()}"
    subprocess.run(["sh", "-c", setup.format(py=py, hash=os.path.basename(physical))], check=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CODEX_HOME": "/tmp/w/ch", "HOME": "/tmp/w/home",
           "TMPDIR": "/tmp/w/tmp", "RUST_LOG": "error"}  # fmt: skip
    proc = subprocess.Popen(
        [*argv, "app-server", "--listen", f"unix://{listen}"], env=env, cwd="/tmp/w", text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    served: dict[str, object] = {}
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        if os.path.islink(path) and os.readlink(path) == physical:
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(path)
            except OSError:
                time.sleep(0.05)
                continue
            finally:
                probe.close()
            served = {
                "socket_mode": oct(stat.S_IMODE(os.lstat(physical).st_mode)),
                "folder_mode": oct(stat.S_IMODE(os.lstat(DAEMON).st_mode)),
                "parent_mode": oct(stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode)),
            }
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    try:
        code = proc.wait(timeout=20)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    try:
        mode = os.lstat(path).st_mode
        after = f"link to {os.readlink(path)}" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "other"
    except FileNotFoundError:
        after = "nothing"
    first = next((line for line in err.splitlines() if line.startswith("Error")), err.strip()[:200])
    # serving, the exit on SIGTERM and what it leaves are another matter (a real binary stopped at once may not
    # have its handler yet): only a refusal's exit and what it kept are compared
    if served:
        return {"exit": "serves", "stderr": "", "after": "nothing", "served": served}
    return {"exit": code, "stderr": first, "after": after, "served": served}


def _socket_table(argv: list[str]) -> dict[str, dict[str, object]]:
    """Every case of SOCKET_CASES against the server ``argv``, in a fresh private /tmp (root only)."""
    import json
    import shutil
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root (another user's folder is planted) and unshare (a private /tmp)")
    if any(str(p).startswith("/tmp/") for p in (Path(__file__), Path(sys.executable))):
        pytest.skip("the checkout or its interpreter lies under /tmp, which this test replaces with a private tmpfs")
    script = (
        "import json, subprocess, sys\n"
        "subprocess.run(['mount', '-t', 'tmpfs', '-o', 'mode=1777', 'tmpfs', '/tmp'], check=True)\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import test_fake_listen as t\n"
        "argv = json.loads(sys.argv[1])\n"
        "print(json.dumps({name: t._socket_case(argv, setup, listen, sys.executable)\n"
        "                  for name, (setup, listen, *_) in t.SOCKET_CASES.items()}))\n"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--", sys.executable,
         "-c", script, json.dumps(argv)],
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _mismatches(seen: dict[str, dict[str, object]]) -> list[str]:
    wrong = []
    for name, (_, _, code, stderr, after) in SOCKET_CASES.items():
        got = seen[name]
        if (got["exit"], got["stderr"], got["after"]) != (code, stderr, after):
            wrong.append(f"{name}: expected {(code, stderr, after)}, got {(got['exit'], got['stderr'], got['after'])}")
        elif got["served"] and got["served"]["socket_mode"] != "0o600":  # type: ignore[index]
            wrong.append(f"{name}: served with {got['served']}")
        elif got["served"] and got["served"]["folder_mode"] != "0o700":  # type: ignore[index]
            wrong.append(f"{name}: served with {got['served']}")
    return wrong


def test_a_socket_path_nobody_else_controls(tmp_path: Path) -> None:
    """Old: the fake served in another user's world-writable /tmp/codex-daemon-0 (that user could replace the
    socket and receive the client's upgrade), followed a link planted there, and deleted a user's link to a
    file or a dangling one at the socket path to put its own. Now every case is what 0.171.0 does."""
    seen = _socket_table(list(fake_codex_argv()))
    assert _mismatches(seen) == []
    for made in ("the default path, its folder world-writable", "a missing folder (made 0700)"):
        assert seen[made]["served"]["parent_mode"] == "0o700", seen[made]  # type: ignore[index]


@pytest.mark.real_codex
def test_the_real_binary_plays_the_socket_table(codex_bin: Path) -> None:
    """The table above is the real binary's (observed on 0.171.0): checked again on the one given."""
    assert _mismatches(_socket_table([str(codex_bin)])) == []


def test_a_run_over_a_squatted_socket_folder_is_no_pass(tmp_path: Path) -> None:
    """Old: ``codex-harness run --transport unix`` with another user's world-writable /tmp/codex-daemon-0
    reported ``RESULT: PASS`` (the fake served there). Now the fake refuses, as the real binary does, and the
    run fails saying why."""
    import shutil
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root (another user's folder is planted) and unshare (a private /tmp)")
    if any(str(p).startswith("/tmp/") for p in (Path(__file__), Path(sys.executable))):
        pytest.skip("the checkout or its interpreter lies under /tmp, which this test replaces with a private tmpfs")
    script = (
        "set -e; mount -t tmpfs -o mode=1777 tmpfs /tmp; "
        f"mkdir {DAEMON}; chown 65534:65534 {DAEMON}; chmod 0777 {DAEMON}; cd /tmp; "
        f"{sys.executable} -m harness.cli run --target fake-process --transport unix --scenario plain; "
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--", "sh", "-c",
         script], capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "RESULT: PASS" not in said, said
    assert "app-server socket directory must be a user-owned directory with mode 0700" in said, said
