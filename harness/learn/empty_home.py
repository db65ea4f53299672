"""``config/read`` from an empty ``CODEX_HOME``, recorded from the binary for ``release learn``.

The fake derives every ``config/read`` answer from the release's answer with no ``config.toml`` and no ``-c``
(answers.json's ``config/read+empty`` / ``config/read+layers+empty``, :mod:`fake_server.home_config`). A binary
with no config at all reaches for the network at start-up (``harness.targets.real.HERMETIC_CONFIG`` says what),
so the session runs in a network namespace of its own (``unshare --net``), where nothing but a loopback that is
down exists; where ``unshare`` cannot make one the answers are not recorded (the caller keeps its profile's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import orjson
import trio

#: The answers.json keys, and the params of the request each is the answer to.
KEYS: Final = {"config/read+empty": {}, "config/read+layers+empty": {"includeLayers": True}}
STEP_S: Final = 60.0


def can_isolate() -> bool:
    """True when ``unshare`` can put a process in a network namespace of its own here."""
    tool = shutil.which("unshare")
    if tool is None:
        return False
    try:
        probe = subprocess.run(isolated(["true"]), capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def isolated(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace of its own, as the same user (root needs no user namespace)."""
    tool = shutil.which("unshare") or "unshare"
    if os.geteuid() == 0:
        return [tool, "--net", *argv]
    return [tool, "--net", "--map-root-user", *argv]


def record(codex: Path, work: Path) -> dict[str, Any] | None:
    """The answers of :data:`KEYS` from ``codex`` (paths in them as answers.json's ``${codex_home}``), or None
    when no network namespace can be made here."""
    if not can_isolate():
        return None
    found: dict[str, Any] = trio.run(_record, codex, work)
    return found


async def _record(codex: Path, work: Path) -> dict[str, Any]:
    from codex_client.process import spawn_process
    from fake_server.catalogue import resolve
    from harness.targets.real import real_target

    work.mkdir(parents=True, exist_ok=True)
    async with real_target(resolve("plain"), codex, base_dir=work, require_pinned_schema=False) as target:
        target.config_path.unlink()
        home = str(target.codex_home)
        async with spawn_process(isolated(list(target.argv)), cwd=target.cwd, env=target.env) as process:
            lines = _Lines(process)
            await lines.call(0, "initialize", {"clientInfo": {"name": "codex_harness", "version": "0"}})
            await process.send(b'{"method":"initialized"}\n')
            out: dict[str, Any] = {}
            for n, (key, params) in enumerate(KEYS.items(), 1):
                answer = await lines.call(n, "config/read", params)
                text = orjson.dumps(answer.get("result")).decode().replace(home, "${codex_home}")
                out[key] = orjson.loads(text)
            await process.close_input()
            with trio.move_on_after(10):
                await process.wait_exit()
    return out


class _Lines:
    def __init__(self, process: Any) -> None:
        self.process = process
        self.buf = b""

    async def call(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.process.send(orjson.dumps({"id": rid, "method": method, "params": params}) + b"\n")
        with trio.fail_after(STEP_S):
            while True:
                while b"\n" not in self.buf:
                    chunk = await self.process.receive()
                    if not chunk:
                        raise EOFError(f"codex closed its stdout before answering {method}")
                    self.buf += chunk
                    if len(self.buf) > 64 * 1024 * 1024:
                        raise ValueError("a line over 64 MiB")
                line, _, self.buf = self.buf.partition(b"\n")
                message = orjson.loads(line)
                if isinstance(message, dict) and message.get("id") == rid and "method" not in message:
                    if "error" in message:
                        raise ValueError(f"{method}: {message['error']}")
                    return message
