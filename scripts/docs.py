"""Every block of the docs that the code knows, rewritten from the code: ``make docs`` (``--check``: CI).

Two kinds of marker, both invisible where Markdown is rendered:

- a block: ``<!-- generated: NAME (…) -->`` … ``<!-- end: NAME -->`` — a table made by a generator below (the
  fault tables of contracts.faults, the check levels of contracts.checks.registry, the methods table of
  tests/probe_replay.py);
- a number in prose: ``<!-- count: NAME -->61<!-- /count -->`` — a count the code knows (the built-in
  scenarios, those over stdio, the fault kinds), so no such number is typed by hand.

``python scripts/docs.py`` rewrites them in place; ``--check`` changes nothing and exits 1 naming every stale one
(tests/process/test_docs_generated.py runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "process")]

BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) [^>]*-->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)
COUNT = re.compile(r"(<!-- count: (?P<name>[\w-]+) -->)(?P<body>[^<]*)(<!-- /count -->)")


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def block_generators() -> dict[str, Callable[[], str]]:
    from contracts import faults
    from contracts.checks import registry

    out: dict[str, Callable[[], str]] = dict(faults.GENERATED)
    out.update({name: make for name, (_doc, make) in registry.GENERATED.items()})

    def methods() -> str:
        import probe_replay  # tests/: the recorded answers it reads ship with the tests
        from test_fake_surface import _stable_methods

        return probe_replay.methods_table(_stable_methods())

    out["methods"] = methods
    return out


def counts() -> dict[str, int]:
    from contracts.faults import FAULTS
    from harness import scenario_lookup

    every = [scenario_lookup.resolve(name) for name in scenario_lookup.builtin_names()]
    stdio = scenario_lookup.playable_over(every, "stdio")
    return {
        "scenarios": len(every),
        "scenarios-stdio": len(stdio),
        "scenarios-ws-only": len(every) - len(stdio),
        "fault-kinds": len(FAULTS),
    }


def refresh(text: str, blocks: dict[str, Callable[[], str]], numbers: dict[str, int], where: str) -> str:
    def block(m: re.Match[str]) -> str:
        make = blocks.get(m["name"])
        if make is None:
            raise SystemExit(f"{where}: no generator for the block {m['name']!r}")
        return m.group(1) + make() + m.group(4)

    def count(m: re.Match[str]) -> str:
        if m["name"] not in numbers:
            raise SystemExit(f"{where}: no count named {m['name']!r}")
        return f"{m.group(1)}{numbers[m['name']]}{m.group(4)}"

    return COUNT.sub(count, BLOCK.sub(block, text))


#: Python files that carry a generated copy of a module (a raw string between ``# --- generated: NAME`` and
#: ``# --- end: NAME``): the careful reference client carries the plan interpreter, so one copied file runs alone.
CARRIED = {"conformance/clients/careful.py": ("triggers", "contracts/triggers.py")}
_Q = "'" * 3
CARRIED_BLOCK = re.compile(
    rf"(# --- generated: (?P<name>[\w-]+) [^\n]*\n_\w+ = r{_Q})(?P<body>.*?)({_Q}\n# --- end: (?P=name) ---)", re.S
)


def carried(text: str, name: str, source: str) -> str:
    """``text`` with the block ``name`` holding the source file ``source`` whole."""
    body = (REPO / source).read_text(encoding="utf-8")
    if _Q in body or body.endswith("\\"):
        raise SystemExit(f"{source} cannot be carried in a raw string")

    def put(m: re.Match[str]) -> str:
        return m.group(1) + "\n" + body + m.group(4) if m["name"] == name else m.group(0)

    return CARRIED_BLOCK.sub(put, text)


def stale(write: bool) -> list[str]:
    blocks, numbers = block_generators(), counts()
    found = []
    for path, (name, source) in CARRIED.items():
        doc = REPO / path
        text = doc.read_text(encoding="utf-8")
        new = carried(text, name, source)
        if new != text:
            found.append(path)
            if write:
                doc.write_text(new, encoding="utf-8")
    for doc in _documents():
        text = doc.read_text(encoding="utf-8")
        new = refresh(text, blocks, numbers, doc.name)
        if new != text:
            found.append(str(doc.relative_to(REPO)))
            if write:
                doc.write_text(new, encoding="utf-8")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every stale document")
    args = parser.parse_args()
    found = stale(write=not args.check)
    if args.check and found:
        print(f"stale generated blocks in {', '.join(found)}: run `make docs`", file=sys.stderr)
        return 1
    print(f"{'rewrote' if found else 'current'}: {', '.join(found) or 'every generated block'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
