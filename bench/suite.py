"""Suite time: wall time of ``codex-harness run`` (every built-in scenario on the in-process fake).

Usage: ``python bench/suite.py [--repeat K] [--quick] [--json PATH]``

The baseline measured in the same run is ``codex-harness --help``: the interpreter start and the CLI
import, which every invocation pays. ``run - help`` is the suite's own work; per scenario it shows
whether a slow suite comes from a few scenarios or from all of them.
"""

from __future__ import annotations

import os
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


def timed(argv: list[str], timeout: float, cwd: Path) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=cwd, start_new_session=True)
    tail = (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()[-3:]
    return time.perf_counter() - t0, proc.returncode, " / ".join(tail)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median counts")
    parser.add_argument("--run-args", default="", help="extra arguments for `codex-harness run` (space-separated)")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    deadline = Deadline(55.0)
    scenarios = len(list((REPO / "conformance" / "scenarios").glob("*.toml")))
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        cwd = Path(tmp)  # run writes its reports under the cwd; keep them out of the checkout
        helps = [timed([*cli(), "--help"], 20, cwd)[0] for _ in range(repeat)]
        help_s = median(helps)
        runs: list[float] = []
        code, tail = 0, ""
        for _ in range(repeat):
            if deadline.left < 5:
                break
            try:
                seconds, code, tail = timed([*cli(), "run", *args.run_args.split()], deadline.left, cwd)
            except subprocess.TimeoutExpired:
                code, tail = -1, "timed out"
                break
            runs.append(seconds)
    rows.append(Row(BENCH, "codex-harness --help", help_s, "s", note="baseline: interpreter start + CLI import"))
    if not runs or code not in (0, 1):  # 0: contracts hold, 1: some do not; both are a full run
        rows.append(Row(BENCH, "codex-harness run", 0.0, "s", note=f"not measured (exit {code}): {tail[:300]}"))
        return finish(rows, "suite", args.json)
    run_s = median(runs)
    note = f"{scenarios} built-in scenarios, exit {code}"
    rows.append(Row(BENCH, "codex-harness run", run_s, "s", "codex-harness --help", run_s / help_s, note=note))
    if scenarios:
        per = (run_s - help_s) / scenarios * 1000
        rows.append(Row(BENCH, "run per scenario (minus startup)", per, "ms"))
    title = f"suite: median of {len(runs)}, pid {os.getpid()}"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
