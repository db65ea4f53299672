"""JSON-RPC message types of the app-server wire, shared by the fake server and the client.

The app-server speaks JSON-RPC 2.0 shapes without the ``"jsonrpc"`` field. Every message keeps the
exact frame (the parsed JSON object) it came from or will be written as, because the validator,
the recorder and the fidelity diff all need the frame as it was on the wire (absent and ``null``
are different things there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

JsonId: TypeAlias = int | str


class _NotSet:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTSET"

    def __bool__(self) -> bool:
        return False


#: Marks "field absent from the frame" where ``None`` would mean JSON ``null``.
NOTSET: Final = _NotSet()


@dataclass(frozen=True, slots=True)
class Request:
    id: JsonId
    method: str
    params: Any
    frame: dict[str, Any]

    @classmethod
    def make(cls, id: JsonId, method: str, params: Any = NOTSET) -> Request:
        frame: dict[str, Any] = {"id": id, "method": method}
        if params is not NOTSET:
            frame["params"] = params
        return cls(id, method, None if params is NOTSET else params, frame)


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: Any
    frame: dict[str, Any]

    @classmethod
    def make(cls, method: str, params: Any = NOTSET, **extra: Any) -> Notification:
        frame: dict[str, Any] = {"method": method}
        if params is not NOTSET:
            frame["params"] = params
        frame.update(extra)
        return cls(method, None if params is NOTSET else params, frame)


@dataclass(frozen=True, slots=True)
class Response:
    id: JsonId
    result: Any
    frame: dict[str, Any]

    @classmethod
    def make(cls, id: JsonId, result: Any) -> Response:
        return cls(id, result, {"id": id, "result": result})


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    id: JsonId | None
    code: int
    message: str
    data: Any
    frame: dict[str, Any]

    @classmethod
    def make(cls, id: JsonId | None, code: int, message: str, data: Any = NOTSET) -> ErrorResponse:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not NOTSET:
            error["data"] = data
        # Key order as the real server writes it: error first, then id.
        return cls(id, code, message, None if data is NOTSET else data, {"error": error, "id": id})


Message: TypeAlias = Request | Notification | Response | ErrorResponse

# JSON-RPC error codes the app-server uses.
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INTERNAL_ERROR: Final = -32603
SERVER_OVERLOADED: Final = -32001


def _is_int(value: object) -> bool:
    # bool is an int subclass in Python but never a JSON-RPC id or error code.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: object) -> bool:
    return _is_int(value) or isinstance(value, str)


def classify(obj: dict[str, Any]) -> Message | str:
    """Turn a parsed JSON object into a message, or return why it is none.

    Accepts frames with or without ``"jsonrpc"``. Returns a short reason string (not an
    exception) for frames that are neither request, response nor notification, so a reader can
    report it and carry on.
    """
    method = obj.get("method", NOTSET)
    has_id = "id" in obj
    if method is not NOTSET:
        if not isinstance(method, str):
            return "method is not a string"
        params = obj.get("params")
        if has_id:
            if not _is_id(obj["id"]):
                return "request id is neither an integer nor a string"
            return Request(obj["id"], method, params, obj)
        return Notification(method, params, obj)
    if not has_id:
        return "neither method nor id"
    msg_id = obj["id"]
    if "result" in obj:
        if not _is_id(msg_id):
            return "response id is neither an integer nor a string"
        return Response(msg_id, obj["result"], obj)
    if "error" in obj:
        err = obj["error"]
        code = err.get("code") if isinstance(err, dict) else None
        if not (_is_int(code) and isinstance(err.get("message"), str)):
            return "error is not an object with an integer code and a string message"
        if msg_id is not None and not _is_id(msg_id):
            return "error id is neither an integer, a string nor null"
        return ErrorResponse(msg_id, err["code"], err["message"], err.get("data"), obj)
    return "id without method, result or error"
