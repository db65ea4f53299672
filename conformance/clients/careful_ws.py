#!/usr/bin/env python3
"""The careful outside client (``careful.py``) over a websocket: it starts ``$CODEX_BIN app-server --listen
ws://127.0.0.1:0`` itself, reads where it listens from its stderr, and speaks one JSON-RPC message per text frame
(wsproto, the harness's own dependency). Everything else is ``careful.py``'s. Usage: ``codex-harness run
--client-cmd "python conformance/clients/careful_ws.py"``: the fake records the connection and the client is
judged as a stdio client is.

Ending the server: close the connection (a close frame), then SIGTERM (a listening server does not exit when its
connection ends), then SIGKILL of the whole process group.
"""

from __future__ import annotations

import json
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, RejectConnection, Request, TextMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

if TYPE_CHECKING:  # the type checker reads the sibling as the package module it is
    from conformance.clients import careful
else:
    import careful

LISTENING = re.compile(rb"listening on: ws://([0-9.]+):(\d+)")
START_S = 30.0
MAX_MESSAGE = careful.MAX_LINE


class WsServer:
    """``careful.Server``'s interface over a websocket."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [os.environ["CODEX_BIN"], "app-server", "--listen", "ws://127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.answers: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock: socket.socket | None = None
        host, port = self._wait_port()
        if port:
            try:
                self.sock = socket.create_connection((host, port), timeout=START_S)
                self.sock.sendall(self.ws.send(Request(host=host, target="/")))
                self._upgraded()
                self.sock.settimeout(None)
            except (OSError, ConnectionError):
                self.sock = None  # no connection: every turn fails, the server is still ended
        threading.Thread(target=self._read, daemon=True).start()

    def _upgraded(self) -> None:
        """Wait for the 101 before the first message (wsproto sends nothing while the upgrade is pending)."""
        assert self.sock is not None
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection during the upgrade")
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, AcceptConnection):
                    return
                if isinstance(event, RejectConnection):
                    raise ConnectionError(f"the upgrade was refused: {event.status_code}")

    def _wait_port(self) -> tuple[str, int]:
        assert self.proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and len(seen) < 1 << 20:
            ready, _, _ = select.select([self.proc.stderr], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stderr.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
                found = LISTENING.search(seen)
                if found:
                    threading.Thread(target=self._drain, daemon=True).start()
                    return found.group(1).decode(), int(found.group(2))
        return "", 0

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        while os.read(self.proc.stderr.fileno(), 65536):
            pass

    def _read(self) -> None:
        parts: list[str] = []
        size = 0
        sock = self.sock
        while sock is not None:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            with self.lock:
                self.ws.receive_data(data)
                events = list(self.ws.events())
            for event in events:
                if isinstance(event, TextMessage):
                    size += len(event.data)
                    if size <= MAX_MESSAGE:
                        parts.append(event.data)
                    if event.message_finished:
                        text, parts, size = "".join(parts), [], 0
                        try:
                            message = json.loads(text) if len(text) <= MAX_MESSAGE else None
                        except ValueError:
                            continue  # garbage is skipped, never fatal
                        if isinstance(message, dict):
                            self.inbox.put(message)
                elif isinstance(event, Ping):
                    self._write(event.response())
                elif isinstance(event, CloseConnection | RejectConnection):
                    sock = None
                elif isinstance(event, AcceptConnection):
                    continue
        self.inbox.put(None)

    def _write(self, event: Any) -> None:
        if self.sock is None:
            return
        try:
            with self.lock:
                data = self.ws.send(event)
            self.sock.sendall(data)
        except Exception:
            pass

    def send(self, frame: dict[str, Any]) -> None:
        self._write(TextMessage(data=json.dumps(frame)))

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def end(self, teardown_s: float) -> None:
        self._write(CloseConnection(code=1000))
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=teardown_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


careful.Server = WsServer  # type: ignore[misc,assignment]

if __name__ == "__main__":
    sys.exit(careful.main())
