"""Suite time: wall time of ``codex-harness run`` (every built-in scenario on the in-process fake).

Usage: ``python bench/suite.py [--repeat K] [--quick] [--json PATH]``

The baseline measured in the same run is ``codex-harness --help``: the interpreter start and the CLI
import, which every invocation pays. ``run - help`` is the suite's own work; per scenario it shows
whether a slow suite comes from a few scenarios or from all of them.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, Deadline, Row, arg_parser, finish, median

BENCH = "suite"


def cli() -> list[str]:
    here = Path(sys.executable).parent / "codex-harness"
    return [str(here)] if here.exists() else [sys.executable, "-m", "harness.cli"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], timeout: float, cwd: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the command and the children it reaped, exit status, last output lines)."""
    c0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=cwd, start_new_session=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    tail = (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()[-3:]
    return wall, cpu, proc.returncode, " / ".join(tail)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each command; the median counts")
    parser.add_argument("--run-args", default="", help="extra arguments for `codex-harness run` (space-separated)")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    run_args = args.run_args.split() or (["--scenario", "flood"] if args.quick else [])
    deadline = Deadline(55.0)
    scenarios = run_args.count("--scenario") or len(list((REPO / "fake_server" / "scenarios").glob("*.toml")))
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        cwd = Path(tmp)  # run writes its reports under the cwd; keep them out of the checkout
        helps = [timed([*cli(), "--help"], 20, cwd)[:2] for _ in range(repeat)]
        help_s, help_cpu = median([h[0] for h in helps]), median([h[1] for h in helps])
        runs: list[tuple[float, float]] = []
        code, tail = 0, ""
        for _ in range(repeat):
            if runs and deadline.left < runs[-1][0] * 1.2:
                break  # another run would not fit in the minute
            try:
                seconds, cpu, code, tail = timed([*cli(), "run", *run_args], deadline.left, cwd)
            except subprocess.TimeoutExpired:
                code, tail = -1, "timed out"
                break
            runs.append((seconds, cpu))
    base = "codex-harness --help"
    rows.append(Row(BENCH, base, help_s, "s", note=f"baseline: interpreter start + CLI import; CPU {help_cpu:.2f} s"))
    if not runs or code not in (0, 1):  # 0: contracts hold, 1: some do not; both are a full run
        rows.append(Row(BENCH, "codex-harness run", 0.0, "s", note=f"not measured (exit {code}): {tail[:300]}"))
        return finish(rows, "suite", args.json)
    run_s, run_cpu = median([r[0] for r in runs]), median([r[1] for r in runs])
    note = f"{scenarios} scenario(s), exit {code} ({tail[-120:]}); CPU {run_cpu:.2f} s (user+sys)"
    rows.append(
        Row(
            BENCH,
            "codex-harness run",
            run_s,
            "s",
            base,
            run_s / help_s,
            run_cpu / help_cpu if help_cpu else None,
            note=note,
        )
    )
    if scenarios:
        per = (run_s - help_s) / scenarios * 1000
        rows.append(Row(BENCH, "run per scenario (minus startup)", per, "ms"))
    title = f"suite: median of {len(runs)}, pid {os.getpid()}"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
