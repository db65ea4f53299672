"""Scale: the whole ``codex-harness run`` path on one scenario of N turns, and t(10,000) / t(1,000).

Usage: ``python bench/scale.py [--turns 1000 5000 10000] [--quick] [--json PATH]``

Each size runs in a fresh interpreter (one size's heap does not tax the next) and times, from inside,
``codex-harness run --scenario FILE --report DIR --quiet`` after the imports: load the scenario, play it
on the in-process fake, save and reload the session record, judge every contract, write checks.json,
junit.xml and the table. The figure is CPU seconds of that process (robust on a shared machine; wall
time is in the notes). Linear work gives t(10,000) / t(1,000) near 10; the target is <= 15 (a
quadratic step gives ~100). ``--quick``: 100 and 1,000 turns.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, Row, arg_parser, finish

BENCH = "scale"
RATIO_TARGET = 15.0
CHILD_TIMEOUT_S = 600.0


def scenario_text(turns: int) -> str:
    """A scenario of ``turns`` plain turns: a message in two deltas and a usage update each."""
    out = [f'name = "scale_{turns}"', f'description = "{turns} plain turns on one thread"', ""]
    for i in range(turns):
        out += [
            "[[turns]]",
            f'input = "turn {i + 1}"',
            "[[turns.responses]]",
            "usage = { input = 100, cached = 40, output = 20, reasoning = 5 }",
            "[[turns.responses.items]]",
            'type = "message"',
            f'text = "answer number {i + 1}"',
            "chunks = 2",
            "",
        ]
    out += ["[expect]", 'server_trace = "closed"', 'client_trace = "closed"', ""]
    out += ['[[expect.turns]]\nstatus = "completed"\nserver_status = "completed"\n'] * turns
    return "\n".join(out)


def one(turns: int) -> dict[str, float | int]:
    """In this process: write the scenario, import the CLI, then time one ``run`` of it."""
    from harness.cli import build_parser, main

    build_parser()  # imports every command module: not part of the figure
    with tempfile.TemporaryDirectory(prefix=f"bench-scale-{turns}-") as tmp:
        path = Path(tmp) / f"scale_{turns}.toml"
        path.write_text(scenario_text(turns), encoding="utf-8")
        sink = io.StringIO()
        c0, t0 = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):
            code = main(["run", "--scenario", str(path), "--report", str(Path(tmp) / "report"), "--quiet"])
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {"turns": turns, "cpu": cpu, "wall": wall, "exit": code, "out": sink.getvalue()[-300:]}


def measure(turns: int) -> dict[str, float | int]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", str(turns)]
    proc = subprocess.run(argv, capture_output=True, timeout=CHILD_TIMEOUT_S, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{turns} turns: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-800:]}")
    return orjson.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", help="sizes (default 1000 5000 10000; quick: 100 1000)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: one size, JSON out
    args = parser.parse_args(argv)
    if args.one:
        print(orjson.dumps(one(args.one)).decode())
        return 0
    sizes = sorted(set(args.turns or ([100, 1000] if args.quick else [1000, 5000, 10000])))
    results = [measure(n) for n in sizes]
    rows: list[Row] = []
    base = results[0]
    base_name = f"{base['turns']:,} turns"
    for r in results:
        name = f"{r['turns']:,} turns"
        ok = r["exit"] == 0
        note = f"wall {r['wall']:.2f} s, exit {r['exit']}" + ("" if ok else f": {r['out']}")
        rows.append(Row(BENCH, name, float(r["cpu"]), "s", note=note))
    for r in results[1:]:
        factor = r["turns"] / base["turns"]
        cpu_ratio = r["cpu"] / base["cpu"] if base["cpu"] else None
        wall_ratio = r["wall"] / base["wall"] if base["wall"] else None
        target = RATIO_TARGET * factor / 10
        rows.append(
            Row(
                BENCH,
                f"t({r['turns']:,}) / t({base['turns']:,})",
                cpu_ratio or 0.0,
                "x",
                base_name,
                cpu_ratio,
                target=f"<= {target:g} (linear: {factor:g})",
                ok=None if cpu_ratio is None else cpu_ratio <= target,
                note=f"wall ratio {wall_ratio:.2f}" if wall_ratio else "",
            )
        )
    title = f"scale: codex-harness run on one scenario of N turns ({', '.join(map(str, sizes))})"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
