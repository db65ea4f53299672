"""The typed error a surface handler raises; the engine answers it as a JSON-RPC error."""

from __future__ import annotations

from typing import Any

from contracts.messages import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

INVALID_PARAMS = -32602  # the real server uses it for a few argument checks (sections, skills/config/write)


class SurfaceError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def invalid(message: str, data: Any = None) -> SurfaceError:
    """-32600: what the real server answers for bad ids, unknown threads and most refusals."""
    return SurfaceError(INVALID_REQUEST, message, data)


def invalid_params(message: str) -> SurfaceError:
    return SurfaceError(INVALID_PARAMS, message)


def internal(message: str) -> SurfaceError:
    """-32603: the real server answers host I/O errors (a missing file) with the OS message."""
    return SurfaceError(INTERNAL_ERROR, message)


def not_supported(message: str) -> SurfaceError:
    return SurfaceError(METHOD_NOT_FOUND, message)
