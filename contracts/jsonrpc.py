"""The JSON-RPC endpoint core (sans-IO), one class for both roles.

Like h11's state machine, it does not know whether it is the server or the client, so neither
side can cheat: the fake and the client allocate ids, track pending requests in both directions
and correlate responses with the same rules. Messages go in (``receive``) and out (``request``,
``notify``, ``respond``...); no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.exitcodes import Finding
from contracts.messages import (
    NOTSET,
    ErrorResponse,
    JsonId,
    Message,
    Notification,
    Request,
    Response,
)


class RpcError(Finding):
    """A JSON-RPC error answer, as a typed exception: ``code``, ``message``, ``data``."""

    def __init__(self, code: int, message: str, data: Any = None, method: str | None = None) -> None:
        where = f"{method}: " if method else ""
        super().__init__(f"{where}JSON-RPC error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method

    @classmethod
    def from_response(cls, response: ErrorResponse, method: str | None = None) -> RpcError:
        return cls(response.code, response.message, response.data, method)


class ProtocolViolation(Finding):
    """This endpoint was asked to do something JSON-RPC forbids (answer an unknown request...)."""


# --- events returned by Endpoint.receive -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    request: Request


@dataclass(frozen=True, slots=True)
class IncomingNotification:
    notification: Notification


@dataclass(frozen=True, slots=True)
class ResponseMatched:
    """A response (or error answer) to a request this endpoint sent."""

    request: Request
    response: Response | ErrorResponse

    @property
    def ok(self) -> bool:
        return isinstance(self.response, Response)


@dataclass(frozen=True, slots=True)
class LateResponse:
    """A response to a request this endpoint abandoned (e.g. an approval cleared by an interrupt)."""

    request: Request
    response: Response | ErrorResponse


@dataclass(frozen=True, slots=True)
class DuplicateResponse:
    """A second response for an id that was already answered."""

    request: Request
    response: Response | ErrorResponse


@dataclass(frozen=True, slots=True)
class UnknownResponse:
    """A response whose id this endpoint never used."""

    response: Response | ErrorResponse


@dataclass(frozen=True, slots=True)
class DuplicateRequest:
    """A request reusing the id of one that is still unanswered."""

    request: Request


Event = (
    IncomingRequest
    | IncomingNotification
    | ResponseMatched
    | LateResponse
    | DuplicateResponse
    | UnknownResponse
    | DuplicateRequest
)


class Endpoint:
    """Request ids, the pending tables in both directions, and response correlation.

    ``first_id`` is 0 for both roles by default: the real server numbers its requests from 0 per
    connection. Answered and abandoned requests are remembered (to tell a duplicate or late answer
    from an unknown one) up to ``memory`` of each, oldest forgotten first, so a long session stays
    bounded; an answer to a forgotten id is reported as unknown.
    """

    def __init__(self, first_id: int = 0, memory: int = 4096) -> None:
        if memory < 1:
            raise ValueError("memory must be positive")
        self._memory = memory
        self._next_id = first_id
        self.outgoing: dict[JsonId, Request] = {}  # sent by us, not answered yet
        self.incoming: dict[JsonId, Request] = {}  # sent to us, not answered yet
        self._answered: dict[JsonId, Request] = {}  # sent by us and answered
        self._abandoned: dict[JsonId, Request] = {}  # sent by us, given up without an answer

    # --- sending ------------------------------------------------------------------------------

    def request(self, method: str, params: Any = NOTSET) -> Request:
        request = Request.make(self._next_id, method, params)
        self._next_id += 1
        self.outgoing[request.id] = request
        return request

    def notify(self, method: str, params: Any = NOTSET, **extra: Any) -> Notification:
        return Notification.make(method, params, **extra)

    def respond(self, request_id: JsonId, result: Any) -> Response:
        self._take_incoming(request_id)
        return Response.make(request_id, result)

    def respond_error(self, request_id: JsonId, code: int, message: str, data: Any = NOTSET) -> ErrorResponse:
        self._take_incoming(request_id)
        return ErrorResponse.make(request_id, code, message, data)

    def abandon(self, request_id: JsonId) -> Request:
        """Stop waiting for an answer; a later one is reported as :class:`LateResponse`."""
        try:
            request = self.outgoing.pop(request_id)
        except KeyError:
            raise ProtocolViolation(f"no pending outgoing request with id {request_id!r}") from None
        self._remember(self._abandoned, request)
        return request

    def _remember(self, table: dict[JsonId, Request], request: Request) -> None:
        table[request.id] = request
        if len(table) > self._memory:
            del table[next(iter(table))]  # dicts keep insertion order: this is the oldest

    def _take_incoming(self, request_id: JsonId) -> Request:
        try:
            return self.incoming.pop(request_id)
        except KeyError:
            raise ProtocolViolation(f"no pending incoming request with id {request_id!r}") from None

    # --- receiving ----------------------------------------------------------------------------

    def receive(self, message: Message) -> Event:
        if isinstance(message, Notification):
            return IncomingNotification(message)
        if isinstance(message, Request):
            if message.id in self.incoming:
                return DuplicateRequest(message)
            self.incoming[message.id] = message
            return IncomingRequest(message)
        return self._correlate(message)

    def _correlate(self, response: Response | ErrorResponse) -> Event:
        rid = response.id
        if rid is None:
            return UnknownResponse(response)
        if (request := self.outgoing.pop(rid, None)) is not None:
            self._remember(self._answered, request)
            return ResponseMatched(request, response)
        if (request := self._abandoned.pop(rid, None)) is not None:
            self._remember(self._answered, request)
            return LateResponse(request, response)
        if (request := self._answered.get(rid)) is not None:
            return DuplicateResponse(request, response)
        return UnknownResponse(response)
