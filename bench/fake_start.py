"""Start-up of ``fake-codex``: ``--version`` and the first answer over stdio, next to the interpreter and the real
binary, in the same run.

Usage: ``python bench/fake_start.py [--runs N] [--codex PATH] [--quick] [--json PATH]``

Each start is timed from just before the exec to the end of its first line on stdout (``python -c pass``: to
its exit); for ``--version`` the version line, for ``app-server`` the answer to ``initialize`` (written to its
stdin at once, as a client does).
Measured, each ``--runs`` times (best and median): ``python -c pass`` (the baseline: an interpreter that imports
nothing), ``fake-codex --version``, ``fake-codex app-server`` to its ``initialize`` answer, and the same two of
the real binary (``--codex``, ``$CODEX_BIN``, else ``.tools/node_modules/.bin/codex``; left out, with the reason,
when there is none). Target: the fake's ``--version`` and first answer within 0.3 s of exec (the best run: on a
loaded machine the others wait for a core), with the project's bytecode cached as an installed package has it
(``PYTHONDONTWRITEBYTECODE`` is dropped for the starts). The CPU time of each start (its own and its children's)
is noted, and its ratio to the baseline's: a busy machine changes it far less than the wall time.

The real binary runs as the harness starts it: confined to a temporary run directory (:mod:`codex_sandbox.confine`),
its ``CODEX_HOME``, ``HOME`` and ``TMPDIR`` there, no ``OPENAI_*``/``CODEX_*`` variable.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO, Row, arg_parser, fake_codex_argv, finish, ratio

BENCH = "fake_start"
TARGET_S = 0.3
#: how long one start may take to its first line before it counts as failed (a loaded machine: seconds)
START_TIMEOUT_S = 30.0
INITIALIZE = b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"bench","version":"1"}}}\n'


class StartFailed(Exception):
    pass


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_start(argv: Sequence[str], stdin: bytes | None, env: dict[str, str], cwd: str | None = None) -> float:
    """Seconds from the exec of ``argv`` to the end of its first stdout line (``stdin`` written at once)."""
    t0 = time.perf_counter()
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        if stdin is not None and process.stdin is not None:
            process.stdin.write(stdin)
            process.stdin.flush()
        assert process.stdout is not None
        fd = process.stdout.fileno()
        seen = b""
        while b"\n" not in seen:
            left = START_TIMEOUT_S - (time.perf_counter() - t0)
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise StartFailed(f"{argv[0]}: no line on stdout within {START_TIMEOUT_S:.0f} s")
            chunk = os.read(fd, 65536)
            if not chunk and not seen and argv[-1] == "pass":
                break  # the baseline prints nothing: its end of stdout (its exit) is its "line"
            if not chunk:
                raise StartFailed(f"{argv[0]}: stdout closed before a line (exit {process.wait(5)})")
            seen += chunk
        return time.perf_counter() - t0
    finally:
        if process.stdin is not None:
            try:
                process.stdin.close()  # EOF: a server ends by itself
            except OSError:
                pass
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the group we started, nothing else
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()


def measure(
    name: str, argv: Sequence[str], stdin: bytes | None, env: dict[str, str], runs: int, cwd: str | None = None
) -> tuple[float, float, float]:
    """(best wall s, median wall s, median CPU s) of ``runs`` starts, after one unmeasured start (warm caches)."""
    time_start(argv, stdin, env, cwd)
    walls, cpus = [], []
    for _ in range(runs):
        cpu0 = _children_cpu()
        walls.append(time_start(argv, stdin, env, cwd))
        cpus.append(_children_cpu() - cpu0)
    return min(walls), statistics.median(walls), statistics.median(cpus)


def _real_binary(given: str | None) -> str | None:
    path = given or os.environ.get("CODEX_BIN") or str(REPO / ".tools" / "node_modules" / ".bin" / "codex")
    return path if os.access(path, os.X_OK) else None


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="starts measured per row (default 9)")
    parser.add_argument("--codex", metavar="PATH", help="the real binary (default $CODEX_BIN, else .tools/)")
    args = parser.parse_args()
    runs = 1 if args.quick else max(1, args.runs)
    fake = fake_codex_argv()
    if fake is None:
        print("fake-codex is not installed (pip install -e .)", file=sys.stderr)
        return 1
    rows: list[Row] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_", "FAKE_CODEX_"))}
    env["FAKE_CODEX_QUIET"] = "1"
    # As an installed package starts: its bytecode cached (pip compiles it; here the unmeasured first start of
    # each row writes it). Without the cache every start compiles the project's sources first.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def row(label: str, argv: Sequence[str], stdin: bytes | None, run_env: dict[str, str], **kw: str) -> None:
        best, med, cpu = measure(label, argv, stdin, run_env, runs, kw.get("cwd"))
        is_fake = label.startswith("fake-codex")
        rows.append(
            Row(
                BENCH,
                label,
                best * 1000,
                "ms",
                baseline=None if label == "python -c pass" else "python -c pass",
                ratio=None if label == "python -c pass" else ratio(best, base_best),
                cpu_ratio=ratio(cpu, base_cpu),
                target=f"<= {TARGET_S * 1000:.0f} ms" if is_fake else "",
                ok=best <= TARGET_S if is_fake else None,
                note=f"median {med * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms (median) over {runs} starts",
            )
        )

    base_best, base_med, base_cpu = measure("python", [sys.executable, "-c", "pass"], None, env, runs)
    rows.append(
        Row(
            BENCH,
            "python -c pass",
            base_best * 1000,
            "ms",
            note=f"median {base_med * 1000:.0f} ms, CPU {base_cpu * 1000:.0f} ms (median) over {runs} starts",
        )
    )
    row("fake-codex --version", [*fake, "--version"], None, env)
    row("fake-codex app-server: initialize answered", [*fake, "app-server"], INITIALIZE, env)
    real = _real_binary(args.codex)
    if real is None:
        rows.append(Row(BENCH, "real codex", 0.0, "ms", note="left out: no real binary (--codex, $CODEX_BIN, .tools/)"))
        return finish(rows, "fake-codex start-up (same run)", args.json)
    from codex_client.process import child_environment
    from codex_sandbox import confine
    from harness.codex_bin import run_dir

    launcher = confine.current()  # self-tested once, before any start is timed
    with run_dir(prefix="codex-harness-bench-") as run:
        real_env = child_environment(run.env(os.environ))
        where = confine.layout(real, writable=[run.root], cwd=run.workdir, scratch=run.root, path_env=env.get("PATH"))
        cwd = str(run.workdir)
        row("real codex --version", launcher.wrap([real, "--version"], where), None, real_env, cwd=cwd)
        row(
            "real codex app-server: initialize answered",
            launcher.wrap([real, "app-server"], where),
            INITIALIZE,
            real_env,
            cwd=cwd,
        )
    rows[-1].note += f"; confined ({launcher.mechanism})"
    rows[-2].note += f"; confined ({launcher.mechanism})"
    return finish(rows, "fake-codex start-up (same run)", args.json)


if __name__ == "__main__":
    sys.exit(main())
