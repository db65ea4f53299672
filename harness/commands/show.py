"""``codex-harness show DIR|wire.jsonl``: a readable timeline of one recorded session."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from contracts.checks import run_all
from contracts.exitcodes import OK, UsageError
from contracts.record import SessionRecord, WireEntry
from harness.timeline import render

NAME = "show"
HELP = "show a recorded session as a timeline (time, direction, method, summary; faults, open windows, failures)"
MAX_WIRE_BYTES = 512 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR|wire.jsonl", help="a saved session record directory or its wire.jsonl")
    parser.add_argument("--no-checks", action="store_true", help="do not re-run the contracts on a record directory")
    parser.add_argument("--no-schema", action="store_true", help="do not mark frames the pinned schema rejects")
    parser.add_argument(
        "--html", metavar="OUT", help="also write the session as a self-contained HTML page (sequence diagram) to OUT"
    )


def _read_wire(path: Path) -> list[WireEntry]:
    try:
        if path.stat().st_size > MAX_WIRE_BYTES:
            raise UsageError(f"{path}: larger than {MAX_WIRE_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    entries = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(WireEntry.from_json(orjson.loads(line)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}:{n}: not a transcript line ({exc})") from None
    return entries


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    from harness.outside.show import is_outside, show_outside

    if is_outside(path):  # what fake-codex --record saw of a client: judged, exit 1 on a failing check
        return show_outside(args, path)
    record: SessionRecord | None = None
    if path.is_dir():
        if not (path / "record.json").is_file():
            raise UsageError(f"{path}: no record.json (not a saved session record)")
        try:
            record = SessionRecord.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot load the record in {path}: {exc}") from None
        entries = record.wire
    elif path.is_file():
        entries = _read_wire(path)
    else:
        raise UsageError(f"{path}: no such file or directory")
    validator = None
    if not args.no_schema:
        from contracts.validator import Validator

        release = record.schema_release if record else "0.171.0"
        try:
            validator = Validator.for_release(release, record.experimental_api if record else True)
        except Exception:  # an unpinned release still shows its timeline, unmarked
            validator = None
    checks = run_all(record) if record is not None and not args.no_checks else []
    title = ""
    if record is not None:
        statuses = ", ".join(f"turn {r.index + 1} {r.status}" for r in sorted(record.results, key=lambda r: r.index))
        clock = " (virtual time)" if record.virtual_time else ""
        title = (
            f"{record.scenario} on {record.target}{clock}: {statuses or 'no Result'}; server exit {record.server_exit}"
        )
    print(render(entries, checks=checks, validator=validator, title=title), end="")
    if args.html:
        from harness.html.show import write_show_html

        print(f"HTML: {write_show_html(Path(args.html), record, entries, checks, path)}")
    if record is not None and record.stderr_tail.strip():
        from harness.client.stderr import strip_ansi  # records made before tails were stripped of colour

        tail = strip_ansi(record.stderr_tail).strip().splitlines()[-10:]
        print("\nstderr tail:\n" + "\n".join(f"  {line}" for line in tail))
    return OK
