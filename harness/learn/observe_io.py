"""What every observation script shares: a line-delimited JSON connection to one server on stdio, and writing what
was observed (``--out FILE`` or stdout), so each script holds only its cases (harness.learn.policy_observe and the
observation scripts under tests/)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

#: A line longer than this from the server ends the observation (the binaries' largest answers are a few MiB).
MAX_LINE_BYTES = 64 * 1024 * 1024


class LineConn:
    """One server process on stdio (``process`` has ``send`` and ``receive``, as a trio process's streams do): one
    JSON object a line, each way; requests numbered from 1."""

    def __init__(self, process: Any) -> None:
        self.process = process
        self.buf = b""
        self.next_id = 0

    async def send(self, obj: dict[str, Any]) -> None:
        await self.process.send(orjson.dumps(obj) + b"\n")

    async def recv(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = await self.process.receive()
            if not chunk:
                raise EOFError("the server closed its stdout")
            self.buf += chunk
            if len(self.buf) > MAX_LINE_BYTES:
                raise ValueError(f"a line over {MAX_LINE_BYTES // (1024 * 1024)} MiB")
        line, _, self.buf = self.buf.partition(b"\n")
        message: dict[str, Any] = orjson.loads(line)
        return message

    async def request(self, method: str, params: Any) -> int:
        """Send the next request; its id."""
        self.next_id += 1
        await self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id


def write_observed(data: Any, out: str | None, *, sort_keys: bool = False) -> None:
    """``data`` as indented JSON into ``out`` (its folder made), or on stdout when ``out`` is None."""
    option = orjson.OPT_INDENT_2 | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    text = orjson.dumps(data, option=option) + b"\n"
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_bytes(text)
    else:
        sys.stdout.write(text.decode())
