"""What the session's helpers use of the session: the trio driver as a protocol.

The session (:class:`codex_client.session.Session`) does the waiting for the client core; four helpers do
parts of it in their own modules: the turn (:mod:`~codex_client.turn`), the turn supervisor
(:mod:`~codex_client.supervisor`), the approval tasks (:mod:`~codex_client.server_requests`) and the
teardown (:mod:`~codex_client.teardown`). They work against :class:`Driver`, declared here below all five, so
that none of them needs the session's module and the session is free to import them: no circle, and what a
helper may touch of the session is written down in one place (``tests/unit/test_client_driver.py`` checks that the
helpers use exactly these members and that the session has them all).

Turns are named by their core (:class:`~codex_client.turncore.TurnCore`); :meth:`Driver.turn_for` gives the
trio side of one, as far as the teardown needs it (:class:`CancellableTurn`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import trio

from codex_client.approvals import Policy
from codex_client.connection import ClientConnection
from codex_client.options import SessionOptions
from codex_client.turncore import TurnCore
from contracts.messages import NOTSET, Message, Request
from contracts.record import TeardownStep
from contracts.transport import MessageStream, ProcessHandle

_T = TypeVar("_T")


class CancellableTurn(Protocol):
    """The trio side of a turn, as the teardown ends it."""

    def request_cancel(self, status: str, error: str) -> None: ...

    async def wait_after_cancel(self) -> None: ...


class Driver(Protocol):
    """The session as its helpers see it. State the core keeps is read through :attr:`connection` and changed
    only through the core's methods; the rest is the driver's own (its clock, its events, its stream)."""

    # --- what it runs with and on ------------------------------------------------------------------
    options: SessionOptions
    policy: Policy  # server_requests
    connection: ClientConnection  # the client core
    stream: MessageStream  # teardown
    process: ProcessHandle | None  # teardown
    teardown: list[TeardownStep]  # teardown: the steps, as they ran
    reader_done: trio.Event  # teardown: the reader saw the end of the stream
    exited: trio.Event  # teardown: the server's exit status is known

    # --- clock, notes, log ---------------------------------------------------------------------------
    def now(self) -> float: ...

    def note(self, text: str) -> None: ...

    def write_log(self, level: int, message: str, **fields: Any) -> None: ...

    def stderr_suffix(self) -> str: ...

    # --- the core's events and the wire --------------------------------------------------------------
    def drive(self, step: Callable[[ClientConnection], _T]) -> _T: ...


    async def send(self, message: Message) -> None: ...

    async def call(self, request: Request, timeout: float, *, kill_on_timeout: bool = False) -> Any: ...

    async def request(self, method: str, params: Any = NOTSET, *, timeout: float | None = None) -> Any: ...

    # --- turns and the server ------------------------------------------------------------------------
    async def start_turn(self, core: TurnCore) -> None: ...

    def finish_turn(self, core: TurnCore, *, failure: str | None = None) -> None: ...

    def kill_turn(self, core: TurnCore, reason: str) -> None: ...

    def turn_for(self, core: TurnCore) -> CancellableTurn: ...

    def kill(self, reason: str, *, error: BaseException | None = None) -> None: ...

    def kill_server(self) -> None: ...
