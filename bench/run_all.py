"""Run every benchmark script and print one table (optionally into docs/performance.md).

Usage: ``python bench/run_all.py [--quick] [--only NAME ...] [--update-docs] [--json PATH]``

Each script runs in its own interpreter (one flood's garbage does not slow the next), with a
timeout. Our scripts hand back their rows as JSON; ``bench/validate.py`` and ``bench/trace.py``
(owned by the validator and trace code) are run when they exist and their own tables are kept
verbatim, under the combined table.
"""

from __future__ import annotations

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
    ("validate", "validate.py", False),
    ("trace", "trace.py", False),
    ("suite", "suite.py", True),
)
QUICK_ARGS: dict[str, tuple[str, ...]] = {
    "validate.py": ("--seconds", "0.3"),
    "trace.py": ("--turns", "20", "--seconds", "0.3"),
}
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
    parser.add_argument("--only", nargs="*", help="run only these (ingest, sdk, interrupt, validate, trace, suite)")
    parser.add_argument("--update-docs", action="store_true", help="write the results into docs/performance.md")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        for name, script, ours in SCRIPTS:
            if args.only and name not in args.only:
                continue
            print(f"running bench/{script} ...", file=sys.stderr, flush=True)
            rows, text, seconds = run_one(name, script, ours, args.quick, Path(tmp))
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
