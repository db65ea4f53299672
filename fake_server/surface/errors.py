"""The typed error a request handler raises; the engine answers it as a JSON-RPC error."""

from __future__ import annotations

from typing import Any

from contracts.exitcodes import InvalidInput
from contracts.messages import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

INVALID_PARAMS = -32602  # the real server uses it for a few argument checks (sections, skills/config/write)


class RequestError(InvalidInput):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data  # None: the error has no data member


def invalid(message: str, data: Any = None) -> RequestError:
    """-32600: what the real server answers for bad ids, unknown threads and most refusals."""
    return RequestError(INVALID_REQUEST, message, data)


def invalid_params(message: str) -> RequestError:
    return RequestError(INVALID_PARAMS, message)


def internal(message: str) -> RequestError:
    """-32603: the real server answers host I/O errors (a missing file) with the OS message."""
    return RequestError(INTERNAL_ERROR, message)


def not_supported(message: str) -> RequestError:
    return RequestError(METHOD_NOT_FOUND, message)
