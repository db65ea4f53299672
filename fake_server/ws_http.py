"""The fake's ``--listen``: the URL rules, the start-up banner, and the HTTP side of a websocket listener.

Everything here copies what the real binary does (``docs/transports.md``; the recorded observations are
``tests/data/real/<release>/transports/``):

- ``--listen`` takes ``stdio://``, ``unix://`` (``$CODEX_HOME/app-server-control/app-server-control.sock``),
  ``unix://PATH``, ``ws://IP:PORT`` (an IP literal, ``[::1]`` for IPv6, a port, no path) or ``off``. A URL of
  another scheme, or a ``ws://`` URL that is not ``IP:PORT``, is a usage error (exit 2, clap's words); ``off``
  and a non-loopback ``ws://`` listener without ``--ws-auth`` are refused at start (``Error: …``, exit 1).
- A ``ws://`` listener prints :func:`banner` on stderr once it listens (port 0 picks one); ``unix://`` prints
  nothing.
- On the TCP port: ``GET``/``HEAD`` ``/readyz`` and ``/healthz`` answer 200 with an empty body (other methods
  405 with ``allow: GET,HEAD``); any other request is a websocket upgrade, refused 400 with axum's words when a
  header is missing, 401 with the auth's words (:mod:`fake_server.ws_auth`), else 101. A request that is not
  HTTP gets a bare 400.
- On the unix socket: only an upgrade is answered (101, with ``x-codex-websocket-max-unfragmented-message-bytes``);
  anything else is dropped without an answer, and no auth applies.

The fake closes the connection after any answer but 101 (the real keeps an HTTP/1.1 connection open for the
next request; a client that reuses it after a refusal reconnects on the fake).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Final

import h11
import trio

from contracts.exitcodes import InternalError, InvalidInput
from fake_server.ws_auth import UNAUTHORIZED, Policy, refusal

WS_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_REQUEST_HEAD: Final = 16 * 1024
READ_CHUNK: Final = 65536
UNIX_MAX_UNFRAGMENTED: Final = 16 * 1024 * 1024
HEALTH_PATHS: Final = ("/readyz", "/healthz")
DEFAULT_UNIX_DIR: Final = "app-server-control"
DEFAULT_UNIX_NAME: Final = "app-server-control.sock"
VERSION_MISSING: Final = "`Sec-WebSocket-Version` header did not include '13'"
#: What every scheme error says is expected (clap's value error of the real binary).
EXPECTED: Final = "expected `stdio://`, `unix://`, `unix://PATH`, `ws://IP:PORT`, or `off`"


class ListenUsageError(InvalidInput):
    """A ``--listen`` value the real binary's argument parser refuses (exit 2): ``str()`` is its whole message."""


class ListenRefused(InternalError):
    """A listener the real binary refuses at start (``Error: …``, exit 1)."""


@dataclass(frozen=True, slots=True)
class Listen:
    """Where to serve. ``scheme``: ``stdio``, ``ws`` or ``unix``."""

    scheme: str
    host: str = ""
    port: int = 0
    path: str = ""
    default_path: bool = False  # ``unix://`` alone: the folder of its path is the server's to make

    @property
    def loopback(self) -> bool:
        return self.scheme != "ws" or ipaddress.ip_address(self.host).is_loopback

    def url(self, port: int | None = None) -> str:
        if self.scheme == "ws":
            host = f"[{self.host}]" if ":" in self.host else self.host
            return f"ws://{host}:{self.port if port is None else port}"
        if self.scheme == "unix":
            return f"unix://{self.path}"
        return "stdio://"


def _usage(value: str, why: str) -> ListenUsageError:
    return ListenUsageError(
        f"error: invalid value '{value}' for '--listen <URL>': {why}\n\nFor more information, try '--help'."
    )


def parse_listen(value: str, codex_home: str) -> Listen:
    """The listener ``value`` names; ListenUsageError (exit 2) or ListenRefused (exit 1, ``off``) else."""
    if value == "stdio://":
        return Listen("stdio")
    if value == "off":
        raise ListenRefused("no transport configured; use --listen or enable remote control")
    if value.startswith("unix://"):
        rest = value[len("unix://") :]
        path = rest or os.path.join(codex_home, DEFAULT_UNIX_DIR, DEFAULT_UNIX_NAME)
        return Listen("unix", path=os.path.abspath(path), default_path=not rest)
    if value.startswith("ws://"):
        rest = value[len("ws://") :]
        bad = _usage(value, f"invalid websocket --listen URL `{value}`; expected `ws://IP:PORT`")
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit() or "/" in rest:
            raise bad
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
            if ":" not in host:
                raise bad
        elif ":" in host:
            raise bad
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise bad from None
        number = int(port)
        if number > 65535:
            raise bad
        return Listen("ws", host=str(address), port=number)
    raise _usage(value, f"unsupported --listen URL `{value}`; {EXPECTED}")


def check_listener(listen: Listen, policy: Policy) -> None:
    """the real binary refuses a non-loopback websocket listener without auth (it allows one with it)."""
    if listen.scheme == "ws" and not listen.loopback and policy.mode is None:
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        raise ListenRefused(
            f"refusing to start non-loopback websocket listener {host}:{listen.port} without auth; "
            "configure `--ws-auth capability-token` or `--ws-auth signed-bearer-token`"
        )


def banner(listen: Listen, port: int) -> str:
    """What a ``ws://`` listener prints on stderr once it listens (a unix listener prints nothing)."""
    if listen.scheme != "ws":
        return ""
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    note = (
        "binds localhost only (use SSH port-forwarding for remote access)"
        if listen.loopback
        else "websocket auth is required for non-localhost listeners"
    )
    return (
        "codex app-server (WebSockets)\n"
        f"  listening on: ws://{host}:{port}\n"
        f"  readyz: http://{host}:{port}/readyz\n"
        f"  healthz: http://{host}:{port}/healthz\n"
        f"  note: {note}\n"
    )


# --- one connection's HTTP ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What to do with one HTTP request: write ``data``; ``upgraded``: the websocket starts after it (with the
    bytes that followed the request, ``leftover``); else close the connection."""

    data: bytes
    upgraded: bool = False
    leftover: bytes = b""
    status: int = 0
    target: str = ""


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + WS_GUID).digest())


def _response(status: int, reason: str, headers: list[tuple[str, str]], body: bytes, close: bool, date: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    for name, value in headers:
        lines.append(f"{name}: {value}")
    if close:
        lines.append("connection: close")
    if date:
        lines.append(f"date: {date}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _text(status: int, reason: str, body: str, close: bool, date: str) -> Answer:
    data = body.encode()
    headers = [("content-type", "text/plain; charset=utf-8"), ("content-length", str(len(data)))]
    return Answer(_response(status, reason, headers, data, close, date), status=status)


def _header_has(headers: dict[bytes, list[bytes]], name: bytes, token: bytes) -> bool:
    return any(token in (part.strip().lower() for part in value.split(b",")) for value in headers.get(name, []))


def answer(request: h11.Request, leftover: bytes, *, unix: bool, policy: Policy, now_s: int, date: str) -> Answer:
    """the real binary's answer to one request on a ``ws://`` port (``unix``: on a unix socket)."""
    headers: dict[bytes, list[bytes]] = {}
    for name, value in request.headers:
        headers.setdefault(name.lower(), []).append(value)
    close = _header_has(headers, b"connection", b"close")
    target = request.target.decode("ascii", "replace")
    path = target.split("?", 1)[0]
    if unix:
        date = ""
    elif path in HEALTH_PATHS:
        if request.method in (b"GET", b"HEAD"):
            return Answer(_response(200, "OK", [("content-length", "0")], b"", close, date), status=200, target=path)
        headers_405 = [("allow", "GET,HEAD"), ("content-length", "0")]
        return Answer(_response(405, "Method Not Allowed", headers_405, b"", close, date), status=405, target=path)
    bad = "Bad Request"
    checks = (
        (request.method == b"GET", 405, "Method Not Allowed", "Request method must be `GET`"),
        (_header_has(headers, b"connection", b"upgrade"), 400, bad, "Connection header did not include 'upgrade'"),
        (_header_has(headers, b"upgrade", b"websocket"), 400, bad, "`Upgrade` header did not include 'websocket'"),
        (b"13" in headers.get(b"sec-websocket-version", []), 400, bad, VERSION_MISSING),
        (bool(headers.get(b"sec-websocket-key")), 400, bad, "`Sec-WebSocket-Key` header missing"),
    )
    for ok, status, reason, body in checks:
        if not ok:
            return Answer(b"") if unix else _text(status, reason, body, close, date)
    if not unix:
        auth = headers.get(b"authorization")
        why = refusal(policy, auth[0] if auth else None, now_s)
        if why is not None:
            return _text(UNAUTHORIZED, "Unauthorized", why, close, date)
    key = accept_key(headers[b"sec-websocket-key"][0].strip()).decode()
    upgrade_headers = [
        ("connection", "Upgrade" if unix else "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-accept", key),
    ]
    if unix:
        upgrade_headers.append(("x-codex-websocket-max-unfragmented-message-bytes", str(UNIX_MAX_UNFRAGMENTED)))
    data = _response(101, "Switching Protocols", upgrade_headers, b"", False, date)
    return Answer(data, upgraded=True, leftover=leftover, status=101, target=path)


BAD_REQUEST_HEAD: Final = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n"


@dataclass(frozen=True, slots=True)
class Head:
    """A request head read off a connection: ``request`` None when the bytes were not HTTP (``garbage``) or the
    peer left first."""

    request: h11.Request | None
    leftover: bytes = b""
    garbage: bool = False


async def read_request(stream: trio.abc.Stream) -> Head:
    """The request head (h11, bounded by :data:`MAX_REQUEST_HEAD`) and the bytes after it."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
    seen = False
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return Head(None, garbage=True)
        if isinstance(event, h11.Request):
            return Head(event, bytes(conn.trailing_data[0]))
        if event is not h11.NEED_DATA:
            return Head(None, garbage=seen)
        try:
            data = await stream.receive_some(READ_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            data = b""
        seen = seen or bool(data)
        try:
            conn.receive_data(bytes(data))  # a socket's read is bytes already: no copy
        except h11.RemoteProtocolError:
            return Head(None, garbage=True)


def bad_request(date: str) -> bytes:
    """the real binary's answer to bytes that are not an HTTP request."""
    return BAD_REQUEST_HEAD + f"date: {date}\r\n\r\n".encode()


def http_date(now_ms: int) -> str:
    return formatdate(now_ms / 1000, usegmt=True)


def default_unix_path(codex_home: str | Path) -> str:
    return os.path.join(os.fspath(codex_home), DEFAULT_UNIX_DIR, DEFAULT_UNIX_NAME)
