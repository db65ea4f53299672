"""``fake-codex app-server --listen``: the URL rules, the auth flags and the bad inputs a user meets, each with
its clear error and exit code, nothing hanging (what the real binary does is compared in
tests/test_transport_fidelity.py; here is what only the fake decides, and the pure parts)."""

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

