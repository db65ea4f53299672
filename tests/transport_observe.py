"""What a ``--listen ws://`` / ``unix://`` server answers, observed the same way on any binary: the real ``codex``
(offline, confined, through :func:`harness.targets.real.real_target`) or ``fake-codex``.

:func:`observe` starts the server once per case and reduces every answer to what a client can rely on: HTTP
statuses and bodies (``/readyz``, ``/healthz``, refused upgrades, both auth modes), the start-up errors (exit
code and the ``Error:`` line), the banner with the port masked, and what the websocket does with pings, binary
frames, text that is not JSON, two messages in one frame, a message in fragments, a frame over 16 MiB and a close
frame. ``tests/data/real/<version>/transports/observed.json`` is the real binary's; ``test_transport_fidelity``
compares the fake with it on every run, and (``real_codex``) the live binary with the fake.

Record again: ``.venv/bin/python tests/transport_observe.py --codex .tools/node_modules/.bin/codex``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import trio
from wsproto.events import BytesMessage, CloseConnection

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from codex_client.sockets import LISTENING, MAX_SOCKET_PATH  # noqa: E402
from contracts.fidelity import AMBIENT_METHODS  # noqa: E402
from contracts.unix_socket import physical_name  # noqa: E402
from contracts.websocket import WsStream, client_handshake  # noqa: E402
from fake_server.ws_auth import signed_token  # noqa: E402
from harness.learn.observe_io import write_observed  # noqa: E402

STEP_S = 20.0
TOKEN = "s3cret-token"
SECRET = "x" * 40
ISSUER, AUDIENCE = "iss1", "aud1"
INIT = {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "observe", "version": "0"}}}
_WARNING_LINE = re.compile(r"^\S*\s*(ERROR|WARN|INFO)\b")


@dataclass
class Server:
    """A started server: its process handle (stderr tail, exit), and the folder it may read files from."""

    process: Any
    folder: Path
    #: a confined real binary's socket folder on this side (its link names the path inside the confinement)
    sockets: Path | None = None


Start = Callable[[str, list[str]], AbstractAsyncContextManager[Server]]


# --- starting a binary --------------------------------------------------------------------------------


def fake_start(tmp: Path) -> Start:
    from codex_client.process import spawn_process
    from harness.codex_bin import scrubbed_env
    from harness.targets.fake import fake_codex_argv

    @asynccontextmanager
    async def start(listen: str, extra: list[str]) -> AsyncIterator[Server]:
        folder = tmp / f"run{time.monotonic_ns()}"
        for sub in ("codex_home", "home", "tmp"):
            (folder / sub).mkdir(parents=True)
        env = scrubbed_env(os.environ, codex_home=folder / "codex_home", tmpdir=folder / "tmp", trace_root=None)
        env["HOME"] = str(folder / "home")
        write_secrets(folder)
        listen = listen.replace("{run}", str(folder))
        args = [a.replace("{run}", str(folder)) for a in extra]
        argv = [*fake_codex_argv(), "app-server", "--scenario", "plain", "--listen", listen, *args]
        async with spawn_process(argv, cwd=folder, env=env) as process:
            yield Server(process, folder)

    return start


def real_start(codex: Path, tmp: Path) -> Start:
    from codex_client.process import spawn_process
    from fake_server.catalogue import resolve
    from harness.targets.real import real_target

    tmp.mkdir(parents=True, exist_ok=True)

    @asynccontextmanager
    async def start(listen: str, extra: list[str]) -> AsyncIterator[Server]:
        async with real_target(
            resolve("plain"), codex, base_dir=tmp, listen=listen, server_args=tuple(extra)
        ) as target:
            folder = target.codex_home.parent
            write_secrets(folder)
            async with spawn_process(target.argv, cwd=target.cwd, env=target.env) as process:
                yield Server(process, folder, target.socket_dir)

    return start


# --- reading answers ------------------------------------------------------------------------------------


async def wait_port(server: Server) -> int | None:
    with trio.move_on_after(STEP_S):
        while True:
            found = LISTENING.search(server.process.stderr_tail())
            if found:
                return int(found.group(2))
            if server.process.exit_code is not None:
                return None
            await trio.sleep(0.02)
    return None


async def wait_path(server: Server, path: Path) -> bool:
    with trio.move_on_after(STEP_S):
        while not os.path.lexists(path):
            if server.process.exit_code is not None:
                return False
            await trio.sleep(0.02)
        return True
    return False


async def http(connect: Callable[[], Any], request: bytes) -> dict[str, Any]:
    """Status and body of one HTTP exchange ({"status": None} when the connection closed with no answer)."""
    stream = await connect()
    data = b""
    try:
        await stream.send_all(request)
        with trio.move_on_after(5.0):  # an answer is at once; a loaded machine may take seconds
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                found = re.search(rb"content-length: (\d+)", head, re.I)
                if _ and found and len(body) >= int(found.group(1)):
                    break
                if _ and head.startswith(b"HTTP/1.1 101"):
                    break
    except (trio.BrokenResourceError, OSError):
        pass
    finally:
        await trio.aclose_forcefully(stream)
    if not data:
        return {"status": None}
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    names = sorted({line.split(b":", 1)[0].decode().lower() for line in head.split(b"\r\n")[1:] if b":" in line})
    out: dict[str, Any] = {"status": status, "body": body.decode("utf-8", "replace")}
    if status in (101, 405):
        out["headers"] = [n for n in names if n != "date"]
    return out


def request(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


def without(name: str) -> dict[str, str]:
    return {k: v for k, v in UPGRADE.items() if k != name}


HTTP_CASES: dict[str, bytes] = {
    "GET /readyz": request("GET", "/readyz", {"Connection": "close"}),
    "GET /healthz": request("GET", "/healthz", {"Connection": "close"}),
    "HEAD /readyz": request("HEAD", "/readyz", {"Connection": "close"}),
    "POST /readyz": request("POST", "/readyz", {"Connection": "close", "Content-Length": "0"}),
    "GET / without upgrade": request("GET", "/", {"Connection": "close"}),
    "GET /other without upgrade": request("GET", "/other", {"Connection": "close"}),
    "not HTTP": b"HELLO\r\n\r\n",
    "upgrade without version": request("GET", "/", without("Sec-WebSocket-Version")),
    "upgrade without key": request("GET", "/", without("Sec-WebSocket-Key")),
    "upgrade without upgrade header": request("GET", "/", without("Upgrade")),
    "upgrade by POST": request("POST", "/", {**UPGRADE, "Content-Length": "0"}),
    "upgrade on another path": request("GET", "/other", UPGRADE),
    "upgrade with a short key": request("GET", "/", {**UPGRADE, "Sec-WebSocket-Key": "short"}),
}


def auth_cases() -> dict[str, str | None]:
    now = int(time.time())
    good = {"exp": now + 600, "iss": ISSUER, "aud": AUDIENCE}

    def jwt(**claims: Any) -> str:
        return "Bearer " + signed_token(SECRET.encode(), {**good, **claims})

    return {
        "capability: no token": None,
        "capability: the token": f"Bearer {TOKEN}",
        "capability: lowercase scheme": f"bearer {TOKEN}",
        "capability: a wrong token": "Bearer nope",
        "capability: Basic": f"Basic {TOKEN}",
        "capability: no scheme": TOKEN,
        "capability: scheme alone": "Bearer",
        "jwt: no token": None,
        "jwt: good": jwt(),
        "jwt: audience list": jwt(aud=["other", AUDIENCE]),
        "jwt: expired": jwt(exp=now - 600),
        "jwt: expired within the skew": jwt(exp=now - 10),
        "jwt: not valid yet": jwt(nbf=now + 600),
        "jwt: wrongly signed": "Bearer " + signed_token(b"y" * 40, good),
        "jwt: wrong issuer": jwt(iss="other"),
        "jwt: wrong audience": jwt(aud="other"),
        "jwt: no exp": "Bearer " + signed_token(SECRET.encode(), {"iss": ISSUER, "aud": AUDIENCE}),
        "jwt: not a jwt": "Bearer a.b.c",
        "jwt: the capability token": f"Bearer {TOKEN}",
    }


def error_line(stderr: str) -> str:
    """The server's own words on a refused start (its log lines left out)."""
    lines = [line for line in stderr.splitlines() if line.strip() and not _WARNING_LINE.match(line)]
    wanted = [line for line in lines if line.startswith(("Error:", "error:"))]
    return (wanted or lines or [""])[-1]


async def startup(start: Start, listen: str, extra: list[str]) -> dict[str, Any]:
    async with start(listen, extra) as server:
        exit_code = None
        with trio.move_on_after(8.0):
            while True:
                if LISTENING.search(server.process.stderr_tail()):
                    break
                if server.process.exit_code is not None:
                    exit_code = server.process.exit_code
                    break
                await trio.sleep(0.02)
        if exit_code is not None:  # its last words may still be in the pipe when it is reaped (a loaded machine)
            with trio.move_on_after(STEP_S):
                await server.process.stderr_ended.wait()
        said = error_line(server.process.stderr_tail()).replace(str(server.folder), "{run}") if exit_code else ""
        return {"exit": exit_code, "error": said}


def startup_cases(folder: str) -> dict[str, tuple[str, list[str]]]:
    cap = ["--ws-auth", "capability-token"]
    token = [*cap, "--ws-token-file", f"{folder}/token"]
    ws = "ws://127.0.0.1:0"
    return {
        "non-loopback without auth": ("ws://0.0.0.0:0", []),
        "a missing token file": (ws, [*cap, "--ws-token-file", f"{folder}/missing"]),
        "an empty token file": (ws, [*cap, "--ws-token-file", f"{folder}/empty"]),
        "a short shared secret": (ws, ["--ws-auth", "signed-bearer-token", f"--ws-shared-secret-file={folder}/short"]),
        "capability-token without a token": (ws, cap),
        "capability-token with an issuer": (ws, [*token, "--ws-issuer", "x"]),
        "auth flags without --ws-auth": (ws, ["--ws-token-file", f"{folder}/token"]),
        "token file and digest": (ws, [*token, "--ws-token-sha256", "0" * 64]),
        "a bad digest": (ws, [*cap, "--ws-token-sha256", "zz"]),
        "a host name": ("ws://localhost:0", []),
        "no port": ("ws://127.0.0.1", []),
        "a path": ("ws://127.0.0.1:0/x", []),
        "wss": ("wss://127.0.0.1:0", []),
        "another scheme": ("tcp://127.0.0.1:0", []),
        "off": ("off", []),
    }


def write_secrets(folder: Path) -> None:
    (folder / "token").write_text(TOKEN + "\n")
    (folder / "secret").write_text(SECRET + "\n")
    (folder / "short").write_text("short\n")
    (folder / "empty").write_text("  \n")


# --- the websocket --------------------------------------------------------------------------------------


async def until_answer(ws: WsStream, request_id: int) -> list[str]:
    """What came before the answer to ``request_id``: the methods of other messages, errors, or ``EOF``."""
    seen: list[str] = []
    with trio.move_on_after(5.0):
        while True:
            batch = await ws.receive()
            if not batch:
                return [*seen, "EOF"]
            for message in batch:
                if not isinstance(message, bytes):
                    seen.append(f"wire error {message.kind}")
                    continue
                frame = orjson.loads(message)
                if frame.get("id") == request_id and "method" not in frame:
                    return seen
                method = frame.get("method")
                if method not in AMBIENT_METHODS:
                    seen.append(str(method or frame.get("id")))
    return [*seen, "no answer"]


async def frames(connect: Callable[[], Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ws = await client_handshake(await connect())
    await ws.send([orjson.dumps(INIT)])
    out["initialize answered"] = await until_answer(ws, 1) == []
    await ws.ping(b"probe")
    await ws.send([orjson.dumps({"id": 2, "method": "config/read", "params": {}})])
    await until_answer(ws, 2)
    await trio.sleep(0.3)
    await ws.send([orjson.dumps({"id": 3, "method": "config/read", "params": {}})])
    await until_answer(ws, 3)
    out["pongs per ping"] = ws.stats.pongs_received
    raw = ws._conn  # a binary message and frames our stream would not write
    await ws._write(raw.send(BytesMessage(data=orjson.dumps({"id": 4, "method": "config/read", "params": {}}))))
    await ws.send([b"not json"])
    await ws.send([b'{"id":5,"method":"config/read","params":{}}\n{"id":6,"method":"config/read","params":{}}'])
    await ws.send([orjson.dumps({"id": 7, "method": "config/read", "params": {}})])
    out["binary, non-JSON and two-in-one frames, then a request"] = await until_answer(ws, 7)
    ws.frame_size = 16
    await ws.send([orjson.dumps({"id": 8, "method": "config/read", "params": {}})])
    ws.frame_size = None
    out["a request in fragments"] = await until_answer(ws, 8)
    await ws._write(raw.send(CloseConnection(code=1000)))
    got: list[str] = []
    with trio.move_on_after(3.0):
        while batch := await ws.receive():
            got += ["message" for _ in batch]
    out["after our close frame"] = {"close frame back": ws.stats.close_code is not None, "then": "EOF"}
    await ws.aclose()
    # one frame over 16 MiB: the connection is dropped
    big = await client_handshake(await connect())
    await big.send([orjson.dumps(INIT)])
    await until_answer(big, 1)
    try:
        await big.send([b'{"id":9,"method":"config/read","params":{"pad":"' + b"x" * (16 * 1024 * 1024) + b'"}}'])
    except Exception:
        pass
    out["a frame over 16 MiB"] = (await until_answer(big, 9))[-1:]
    out["a frame over 16 MiB: close frame"] = big.stats.close_code is not None
    await big.aclose()
    return out


async def unix_side(start: Start) -> dict[str, Any]:
    out: dict[str, Any] = {}
    auth = ["--ws-auth", "capability-token", "--ws-token-file", "{run}/token"]  # not asked on a unix socket
    async with start("unix://{run}/s.sock", auth) as server:
        path = server.folder / "s.sock"
        if not await wait_path(server, path):
            return {"error": error_line(server.process.stderr_tail())}
        out["banner"] = [line for line in server.process.stderr_tail().splitlines() if "WebSockets" in line]

        # a socket address holds 107 bytes: a long temporary folder is reached through the link's target
        name = str(path) if len(os.fsencode(str(path))) <= MAX_SOCKET_PATH else os.path.realpath(path)
        folder = None
        if server.sockets is not None:  # a confined binary's socket, in its folder on this side
            folder = os.open(server.sockets, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            name = f"/proc/self/fd/{folder}/{physical_name(str(path))}"  # short, whatever the folder's path

        async def connect() -> trio.abc.Stream:
            return await trio.open_unix_socket(name)

        try:
            out["GET /readyz"] = await http(connect, HTTP_CASES["GET /readyz"])
            out["upgrade without version"] = await http(connect, HTTP_CASES["upgrade without version"])
            out["upgrade without a token"] = await http(connect, request("GET", "/", UPGRADE))
            out["frames"] = await frames(connect)
        finally:
            if folder is not None:
                os.close(folder)
    return out


async def observe(start: Start, folder: Path) -> dict[str, Any]:
    """Every observation, in a stable order (a JSON document)."""
    result: dict[str, Any] = {"http": {}, "auth": {}, "startup": {}}
    async with start("ws://127.0.0.1:0", []) as server:
        port = await wait_port(server)
        assert port is not None, server.process.stderr_tail()
        banner = [ln for ln in server.process.stderr_tail().splitlines() if not _WARNING_LINE.match(ln) and ln.strip()]
        result["banner"] = [line.replace(str(port), "PORT") for line in banner]

        async def connect() -> trio.abc.Stream:
            return await trio.open_tcp_stream("127.0.0.1", port)

        for name, raw in HTTP_CASES.items():
            result["http"][name] = await http(connect, raw)
        result["frames"] = await frames(connect)
    modes = {
        "capability": ["--ws-auth", "capability-token", "--ws-token-file", "{run}/token"],
        "digest": ["--ws-auth", "capability-token", "--ws-token-sha256", hashlib.sha256(TOKEN.encode()).hexdigest()],
        "jwt": ["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", "{run}/secret", "--ws-issuer", ISSUER,
                "--ws-audience", AUDIENCE],
    }  # fmt: skip
    for mode, flags in modes.items():
        async with start("ws://127.0.0.1:0", flags) as server:
            port = await wait_port(server)
            assert port is not None, server.process.stderr_tail()
            prefix = "capability" if mode == "digest" else mode
            for name, header in auth_cases().items():
                if not name.startswith(prefix + ":"):
                    continue
                headers = {**UPGRADE, **({"Authorization": header} if header else {})}
                status = await http(lambda p=port: trio.open_tcp_stream("127.0.0.1", p), request("GET", "/", headers))
                result["auth"][f"{mode} {name.split(': ', 1)[1]}"] = status
            readyz = await http(lambda p=port: trio.open_tcp_stream("127.0.0.1", p), HTTP_CASES["GET /readyz"])
            result["auth"][f"{mode} GET /readyz"] = readyz
    for name, (listen, extra) in startup_cases("{run}").items():
        result["startup"][name] = await startup(start, listen, extra)
    result["unix"] = await unix_side(start)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="the real binary (default: observe fake-codex)")
    parser.add_argument("--out", help="write the observations here (default: stdout)")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="observe-") as tmp:
        start = real_start(Path(args.codex), Path(tmp)) if args.codex else fake_start(Path(tmp))
        result = trio.run(observe, start, Path(tmp))
    write_observed(result, args.out)


if __name__ == "__main__":
    main()
