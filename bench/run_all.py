"""Run every benchmark script and print one table (optionally into docs/performance.md).

Usage: ``python bench/run_all.py [--quick] [--only NAME ...] [--runs N] [--update-docs] [--json PATH]``

Each script runs in its own interpreter (one flood's garbage does not slow the next), with a
timeout. The gated scripts (ingest, interrupt) run ``--runs`` times (default 5) and each of their
figures is the median of the runs (the spread is noted); a target is judged on the medians.
Our scripts hand back their rows as JSON; ``bench/validate.py`` and ``bench/trace.py``
(owned by the validator and trace code) are run when they exist and their own tables are kept
verbatim, under the combined table.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, Row, arg_parser, machine, table

HERE = Path(__file__).resolve().parent
# (name, script, takes --json/--quick); the others' own tiny-mode arguments
SCRIPTS: tuple[tuple[str, str, bool], ...] = (
    ("ingest", "ingest.py", True),
    ("sdk", "sdk_compare.py", True),
    ("interrupt", "interrupt.py", True),
    ("ws", "ws.py", True),
    ("validate", "validate.py", False),
    ("trace", "trace.py", False),
    ("suite", "suite.py", True),
    ("scale", "scale.py", True),
    ("relay", "relay.py", True),
    ("fake_start", "fake_start.py", True),
)
QUICK_ARGS: dict[str, tuple[str, ...]] = {
    "validate.py": ("--seconds", "0.3"),
    "trace.py": ("--turns", "20", "--seconds", "0.3"),
}
GATED: frozenset[str] = frozenset({"ingest", "interrupt", "ws"})  # run --runs times, medians reported
SCRIPT_TIMEOUT = 150.0  # each should take under a minute; the SDK venv is built on first use
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def command(script: str, ours: bool, quick: bool) -> list[str]:
    argv = [sys.executable, str(HERE / script)]
    if quick:
        argv += ["--quick"] if ours else QUICK_ARGS.get(script, ())
    return argv


def run_one(name: str, script: str, ours: bool, quick: bool, tmp: Path) -> tuple[list[Row], str, float]:
    """Rows (ours), the script's own output, and its wall time."""
    path = HERE / script
    if not path.exists():
        return [], f"({script} not present)", 0.0
    argv = command(script, ours, quick)
    out_json = tmp / f"{name}.json"
    if ours:
        argv += ["--json", str(out_json)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=SCRIPT_TIMEOUT, cwd=REPO, start_new_session=True)
        text = proc.stdout.decode(errors="replace")
        if proc.returncode != 0:
            text += f"\n(exit {proc.returncode})\n" + proc.stderr.decode(errors="replace")[-1500:]
    except subprocess.TimeoutExpired:
        text = f"(timed out after {SCRIPT_TIMEOUT:.0f} s)"
    seconds = time.perf_counter() - t0
    rows: list[Row] = []
    if ours and out_json.exists():
        rows = [Row(**r) for r in orjson.loads(out_json.read_bytes())["rows"]]
    return rows, text.strip(), seconds


def median_rows(runs: list[list[Row]]) -> list[Row]:
    """One row per measure: the median of its runs' figures, targets judged on the medians."""
    out: list[Row] = []
    for row in runs[0]:
        same = [r for rows in runs for r in rows if (r.bench, r.name) == (row.bench, row.name)]
        values = [r.value for r in same]
        merged = Row(row.bench, row.name, statistics.median(values), row.unit, row.baseline, target=row.target)
        merged.note = row.note
        for attr in ("ratio", "cpu_ratio"):
            figures = [getattr(r, attr) for r in same if getattr(r, attr) is not None]
            setattr(merged, attr, statistics.median(figures) if figures else None)
        rates = [r.extra.get("cpu_rate") for r in same if r.extra and r.extra.get("cpu_rate")]
        merged.extra = {"cpu_rate": statistics.median(rates)} if rates else {}
        merged.ok = _judge(merged) if row.ok is not None else None
        if len(same) > 1 and row.ok is not None:
            spread = [r.cpu_ratio for r in same] if merged.cpu_ratio is not None else values
            merged.note = (merged.note + "; " if merged.note else "") + (
                f"median of {len(same)} runs (" + ", ".join(f"{v:.3f}" for v in sorted(x for x in spread if x)) + ")"
            )
        out.append(merged)
    return out


def _judge(row: Row) -> bool | None:
    match = re.match(r"\s*(>=|<=)\s*([0-9.]+)", row.target)
    if match is None:
        return None
    bound = float(match.group(2))
    if match.group(1) == ">=":
        figure = row.cpu_ratio if "(cpu)" in row.target else row.ratio
        return figure is not None and figure >= bound
    return row.value <= bound


def report(results: list[tuple[str, str, list[Row], str, float]], quick: bool) -> str:
    m = machine()
    lines = [
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['implementation']} {m['python']}, {m['platform']}.",
        f"Run: `python bench/run_all.py{' --quick' if quick else ''}` on {time.strftime('%Y-%m-%d %H:%M %Z')}.",
        "",
        table([r for _, _, rows, _, _ in results for r in rows]) if any(rows for _, _, rows, _, _ in results) else "",
        "",
        "Wall time per script: "
        + ", ".join(f"{name} {seconds:.1f} s" for name, _, _, _, seconds in results if seconds),
        "",
    ]
    for _, script, rows, text, _ in results:
        if not rows:  # not ours (or it failed): its own output, verbatim
            lines += [f"`bench/{script}` output:", "", "```", text, "```", ""]
    return "\n".join(lines)


def update_docs(text: str, doc: Path) -> None:
    body = doc.read_text(encoding="utf-8") if doc.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in body or END not in body:
        body += f"\n{BEGIN}\n{END}\n"
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--only", nargs="*", help="run only these (ingest, sdk, interrupt, validate, trace, suite, scale, relay)"
    )
    parser.add_argument("--update-docs", action="store_true", help="write the results into docs/performance.md")
    parser.add_argument("--runs", type=int, default=5, help="runs of the gated scripts (medians reported)")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        for name, script, ours in SCRIPTS:
            if args.only and name not in args.only:
                continue
            runs = max(1, args.runs) if name in GATED and not args.quick else 1
            all_rows: list[list[Row]] = []
            seconds = 0.0
            for k in range(runs):
                print(f"running bench/{script} ({k + 1}/{runs}) ...", file=sys.stderr, flush=True)
                rows, text, took = run_one(name, script, ours, args.quick, Path(tmp))
                seconds += took
                if rows:
                    all_rows.append(rows)
            rows = median_rows(all_rows) if all_rows else []
            results.append((name, script, rows, text, seconds))
    text = report(results, args.quick)
    print(text)
    if args.update_docs:
        update_docs(text, REPO / "docs" / "performance.md")
    if args.json:
        all_rows = [r for _, _, rows, _, _ in results for r in rows]
        Path(args.json).write_bytes(orjson.dumps({"machine": machine(), "rows": all_rows}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
