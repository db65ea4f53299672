"""What the client needs from a server, whatever it runs in.

Two implementations satisfy :class:`Transport`: a child process (``codex app-server`` or
``fake-codex app-server``, see :mod:`harness.client.process`) and the in-process fake over trio
memory streams (``fake_server.inprocess``). The client code is the same on both.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class TransportClosed(Exception):
    """The server's input is closed or the server is gone: nothing more can be sent."""


@runtime_checkable
class Transport(Protocol):
    async def send(self, data: bytes) -> None:
        """Write bytes to the server's stdin. Raises TransportClosed when it cannot."""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Read from the server's stdout; ``b""`` at end of stream."""

    async def close_input(self) -> None:
        """Close the server's stdin (the server sees EOF). Idempotent."""

    async def wait_exit(self) -> int:
        """Wait until the server has exited and return its status (negative: killed by that signal).

        Callers bound this with a cancel scope.
        """

    def kill(self) -> None:
        """Force-stop the server now: SIGKILL to the whole process group, or crash the in-process engine.

        Idempotent; never raises for a server that already exited.
        """

    @property
    def exit_code(self) -> int | None:
        """The exit status once known, else None."""

    def stderr_tail(self) -> str:
        """The bounded, redacted tail of the server's stderr."""

    @property
    def pid(self) -> int | None:
        """The process id, or None in process."""
