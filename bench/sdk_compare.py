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

import contextlib
import os
import signal
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
from _common import Deadline, Row, arg_parser, finish

BENCH = "sdk"
#: The SDK release compared, as the conformance client pins it (``conformance/clients/sdk.json``).
SDK_VERSION = orjson.loads((Path(__file__).resolve().parents[1] / "conformance" / "clients" / "sdk.json").read_bytes())[
    "version"
]
TARGET_RATIO = 2.0

# Runs inside the SDK's venv: one turn through the public sync API, every notification of the turn
# consumed from TurnHandle.stream() (the SDK's reader thread parses each into its pydantic model).
SDK_DRIVER = """
import json, sys, time
from openai_codex import Codex, CodexConfig
spec = json.loads(sys.argv[1])
if "codex_bin" in spec:  # the documented knob: BIN app-server --listen stdio://
    config = CodexConfig(codex_bin=spec["codex_bin"], env=spec["env"])
else:
    config = CodexConfig(launch_args_override=tuple(spec["argv"]))
with Codex(config) as codex:
    thread = codex.thread_start()
    c0, t0 = time.process_time(), time.perf_counter()
    handle = thread.turn("flood")
    count = 0
    for _event in handle.stream():
        count += 1
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"count": count, "seconds": seconds, "cpu": cpu}))
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


async def kill_group(proc: trio.Process) -> None:
    """On cancellation, the SDK driver and the server it spawned go together (one process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def sdk_measure(name: str, python: Path, spec: dict[str, Any], timeout: float, **kw: Any) -> ingest.Measure:
    """``spec``: ``{"argv": [...]}`` (launch_args_override) or ``{"codex_bin": PATH, "env": {...}}``."""

    async def run() -> ingest.Run:
        proc = await trio.run_process(
            [str(python), "-c", SDK_DRIVER, orjson.dumps(spec).decode()],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            start_new_session=True,
            deliver_cancel=kill_group,
        )
        if proc.returncode != 0:
            last = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise RuntimeError(f"SDK driver failed: {' '.join(last)[:300]}")
        result = orjson.loads(proc.stdout.splitlines()[-1])
        return result["count"], result["seconds"], result["cpu"]

    async def bounded() -> ingest.Run:
        with trio.fail_after(timeout):
            return await run()

    return ingest.Measure(name, "notif/s", bounded, **kw)


async def main_async(python: Path, n: int, repeat: int, deadline: Deadline) -> tuple[list[Row], int]:
    with tempfile.TemporaryDirectory(prefix="bench-sdk-") as tmp:
        script: dict[str, Any] = _flood.synthetic_script(n)
        path = Path(tmp) / "script.json"
        _flood.write_script(script, path)
        server = _flood.blast_argv(path)
        t = min(30.0, deadline.left)
        note = f"openai-codex {SDK_VERSION}, TurnHandle.stream(), blast server, {n} deltas"
        measures = [
            sdk_measure("pipe SDK", python, {"argv": server}, t, note=note),
            ingest.client_measure("pipe client validate on", server, True, t, baseline="pipe SDK", target=TARGET_RATIO),
            ingest.raw_measure(
                "pipe LineDecoder+validate", server, lambda: ingest.decoder_consumer(True), t, baseline="pipe SDK"
            ),
        ]
        fake = ingest.fake_argv(n, Path(tmp))
        if fake is not None:
            spec = {"codex_bin": fake[0], "env": {"FAKE_CODEX_SCENARIO": fake[-1]}}
            note = "CodexConfig(codex_bin=fake-codex), scenario from FAKE_CODEX_SCENARIO"
            measures += [
                sdk_measure("fake SDK", python, spec, t, note=note),
                ingest.client_measure("fake client validate on", fake, True, t, baseline="fake SDK"),
            ]
        rounds = await ingest.measure_rounds(measures, repeat, deadline)
        rows = ingest.rows_of(measures)
        for row in rows:
            row.bench = BENCH
            if row.target:  # the SDK runs in another process: its CPU time is its own, so both ratios compare
                row.target = f">= {TARGET_RATIO}x pipe SDK (cpu)"
        return rows, rounds


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="agent message deltas in the flood")
    parser.add_argument("--repeat", type=int, default=8, help="at most this many rounds (as fit in the minute)")
    parser.add_argument("--sdk-python", help="a python that can import openai_codex (default: a private venv)")
    args = parser.parse_args(argv)
    n, repeat = (2000, 1) if args.quick else (args.deltas, args.repeat)
    deadline = Deadline(50.0)
    t0 = time.perf_counter()
    rows: list[Row] = []
    try:
        python = Path(args.sdk_python) if args.sdk_python else ensure_sdk(default_venv(), timeout=120)
    except (subprocess.SubprocessError, OSError) as exc:
        rows.append(Row(BENCH, "openai-codex SDK", 0.0, "notif/s", note=f"SDK not installable here: {exc}"))
        return finish(rows, "sdk: skipped", args.json)
    rows, rounds = trio.run(main_async, python, n, repeat, deadline)
    title = f"sdk: {n} deltas, best of {rounds} interleaved rounds, {time.perf_counter() - t0:.1f} s"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
