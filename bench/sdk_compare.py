"""Our client against the official Python SDK (``openai-codex`` on PyPI) on the same flood.

Usage: ``python bench/sdk_compare.py [--deltas N] [--repeat K] [--sdk-python PATH] [--quick] [--json PATH]``

The SDK spawns its server from ``CodexConfig(codex_bin=...)`` (argv ``BIN app-server --listen
stdio://``) or, verbatim, from ``CodexConfig(launch_args_override=(...))``; we use the latter to start
the blast server of ``bench/_flood.py`` (and ``fake-codex app-server --scenario`` when the fake plays
the flood). The SDK is never a dependency of this project: it is installed, without its bundled
``openai-codex-cli-bin`` binary, into a private venv under the user cache (``--sdk-python`` uses an
existing interpreter instead). Target: our client reads at least 2x the SDK's notifications/s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _flood
import ingest
from _common import Deadline, Row, arg_parser, finish, ratio

BENCH = "sdk"
SDK_VERSION = "0.163.0"
TARGET_RATIO = 2.0

# Runs inside the SDK's venv: one turn through the public sync API, every notification of the turn
# consumed from TurnHandle.stream() (the SDK's reader thread parses each into its pydantic model).
SDK_DRIVER = """
import json, sys, time
from openai_codex import Codex, CodexConfig
argv = json.loads(sys.argv[1])
with Codex(CodexConfig(launch_args_override=tuple(argv))) as codex:
    thread = codex.thread_start()
    t0 = time.perf_counter()
    handle = thread.turn("flood")
    count = 0
    for _event in handle.stream():
        count += 1
    seconds = time.perf_counter() - t0
print(json.dumps({"count": count, "seconds": seconds}))
"""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "codex-harness" / f"bench-openai-codex-{SDK_VERSION}"


def ensure_sdk(venv: Path, timeout: float) -> Path:
    """The venv's python with the SDK importable; created on first use (pip, no bundled binary)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import openai_codex, pydantic"]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=timeout).returncode == 0:
        return python
    quiet = {"check": True, "timeout": timeout, "capture_output": True}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # --no-deps: the SDK pins openai-codex-cli-bin (the real binary, ~100 MB); we bring our own server.
    subprocess.run([*pip, "--no-deps", f"openai-codex=={SDK_VERSION}"], **quiet)
    subprocess.run([*pip, "pydantic>=2.12", "packaging"], **quiet)
    subprocess.run(probe, **quiet)
    return python


def sdk_rate(python: Path, argv: list[str], repeat: int, timeout: float) -> tuple[float, int]:
    best, count = 0.0, 0
    for _ in range(repeat):
        proc = subprocess.run(
            [str(python), "-c", SDK_DRIVER, orjson.dumps(argv).decode()],
            capture_output=True,
            timeout=timeout,
            start_new_session=True,
        )
        if proc.returncode != 0:
            last = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise RuntimeError(f"SDK driver failed: {' '.join(last)[:300]}")
        result = orjson.loads(proc.stdout.splitlines()[-1])
        count = result["count"]
        best = max(best, result["count"] / result["seconds"])
    return best, count


async def ours(argv: list[str], repeat: int, timeout: float) -> tuple[str, float, str]:
    """Our full client when it exists, else our decode+validate loop (said so in the row name)."""
    try:
        rate = await ingest.client_rate(argv, True, repeat, timeout)
        return "client validate on", rate, ""
    except ImportError as exc:
        rate = await ingest.best_raw(argv, lambda: ingest.decoder_consumer(True), repeat, timeout)
        return "LineDecoder+validate", rate, f"client not available ({exc}): decode+validate loop instead"


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=50_000, help="agent message deltas in the flood")
    parser.add_argument("--repeat", type=int, default=2, help="runs per row; the best counts")
    parser.add_argument("--sdk-python", help="a python that can import openai_codex (default: a private venv)")
    args = parser.parse_args(argv)
    n, repeat = (2000, 1) if args.quick else (args.deltas, args.repeat)
    deadline = Deadline(55.0)
    t0 = time.perf_counter()
    rows: list[Row] = []
    try:
        python = Path(args.sdk_python) if args.sdk_python else ensure_sdk(default_venv(), timeout=120)
    except (subprocess.SubprocessError, OSError) as exc:
        rows.append(Row(BENCH, "openai-codex SDK", 0.0, "notif/s", note=f"SDK not installable here: {exc}"))
        return finish(rows, "sdk: skipped", args.json)
    with tempfile.TemporaryDirectory(prefix="bench-sdk-") as tmp:
        script: dict[str, Any] = _flood.synthetic_script(n)
        path = Path(tmp) / "script.json"
        _flood.write_script(script, path)
        server = _flood.blast_argv(path)
        sdk, count = sdk_rate(python, server, repeat, timeout=max(5.0, deadline.left / 2))
        base = "pipe SDK"
        rows.append(
            Row(
                BENCH,
                base,
                sdk,
                "notif/s",
                note=f"openai-codex {SDK_VERSION} TurnHandle.stream(), {count} notifications, blast server",
            )
        )
        name, rate, note = trio.run(ours, server, repeat, max(5.0, deadline.left))
        r = ratio(rate, sdk)
        rows.append(
            Row(
                BENCH,
                f"pipe ours: {name}",
                rate,
                "notif/s",
                base,
                r,
                target=f">= {TARGET_RATIO}x {base}",
                ok=r is not None and r >= TARGET_RATIO,
                note=note,
            )
        )
        fake = ingest.fake_argv(n, Path(tmp))
        if fake is not None and not deadline.expired():
            try:
                fsdk, _ = sdk_rate(python, fake, 1, timeout=max(5.0, deadline.left / 2))
                fname, frate, _ = trio.run(ours, fake, 1, max(5.0, deadline.left))
                rows.append(Row(BENCH, "fake SDK", fsdk, "notif/s", note="fake-codex app-server --scenario flood"))
                rows.append(Row(BENCH, f"fake ours: {fname}", frate, "notif/s", "fake SDK", ratio(frate, fsdk)))
            except (RuntimeError, subprocess.SubprocessError, OSError, trio.TooSlowError) as exc:
                rows.append(Row(BENCH, "fake SDK", 0.0, "notif/s", note=f"not measured: {str(exc)[:300]}"))
    title = f"sdk: {n} deltas, best of {repeat}, {time.perf_counter() - t0:.1f} s"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
