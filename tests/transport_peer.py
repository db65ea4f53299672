"""The echo peer of ``tests/transport_check.py`` as a process: newline-delimited JSON on its stdio."""

from __future__ import annotations

import os
import sys

import trio
from transport_check import serve_echo

from contracts.transport import LineStream


async def main() -> int:
    stdin, stdout = trio.lowlevel.FdStream(os.dup(0)), trio.lowlevel.FdStream(os.dup(1))
    codes: list[int] = []

    async def receive(max_bytes: int) -> bytes:
        try:
            return await stdin.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""

    async def exit(code: int) -> None:
        codes.append(code)

    await serve_echo(LineStream(stdout.send_all, receive, stdout.aclose), exit)
    return codes[0]


if __name__ == "__main__":
    code = trio.run(main)
    sys.stdout.flush()
    os._exit(code)
