"""``codex-harness show DIR|wire.jsonl``: a readable timeline of one recorded session.

On a record directory of a ``run --report``, the verdict is the one ``run`` gave that session (its
``checks.json``, written beside the record): ``run`` knew what a record alone cannot show (the client's budgets
and deadline, its result file, what it left running), so ``show`` repeats it rather than judging differently.
A record without it (an older report, a ``fake-codex --record`` folder), or ``--rejudge``, is judged again from
what was recorded, as ``run`` judges (one report model, one verdict function). The ``RESULT:`` line closes the
output and the exit code is the verdict's (1 on a failing check, or when nothing was judged). A bare
wire.jsonl, or ``--no-checks``, is a timeline only: exit 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from contracts import bounded_parse, paths, safe_read
from contracts.checks import Check, run_all
from contracts.exitcodes import INVALID_INPUT, OK, UsageError
from contracts.record import SessionRecord, WireEntry
from contracts.releases import default_version
from contracts.report import Report, judge
from contracts.report.verdict import MAX_BASELINE_BYTES
from harness.report_dir import SESSION_VERDICT
from harness.timeline import render_lines
from harness.wire_file import WireFileError, iter_wire

NAME = "show"
HELP = "show a recorded session as a timeline (time, direction, method, summary; faults, open windows, failures)"
MAX_WIRE_BYTES = 512 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR|wire.jsonl", help="a saved session record directory or its wire.jsonl")
    parser.add_argument("--no-checks", action="store_true", help="do not re-run the contracts on a record directory")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="judge the record again from what it holds, instead of repeating the verdict run gave it",
    )
    parser.add_argument("--no-schema", action="store_true", help="do not mark frames the pinned schema rejects")
    parser.add_argument(
        "--html", metavar="OUT", help="also write the session as a self-contained HTML page (sequence diagram) to OUT"
    )


def _open_wire(path: Path) -> BinaryIO:
    """The wire file with the bounded reader (the user's own link followed): a FIFO, a directory or a device
    is named, never read; a file larger than MAX_WIRE_BYTES is refused, one growing past it is cut off."""
    paths.require_file(path, "wire file")
    try:
        return safe_read.open_bounded(path, MAX_WIRE_BYTES, follow=True)
    except safe_read.TooLarge:
        raise UsageError(f"{path}: larger than {MAX_WIRE_BYTES} bytes") from None
    except safe_read.Refused as exc:
        raise UsageError(f"wire file {path} {exc.reason}") from None


def _check_wire(path: Path) -> None:
    """Every line of a record's wire.jsonl is a transcript line (streamed), before the record is loaded."""
    with _open_wire(path) as fh:
        for _ in iter_wire(fh, str(path), MAX_WIRE_BYTES):
            pass


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    from harness.outside.show import is_outside, show_outside

    saved = None if args.rejudge or args.no_checks else saved_verdict(path)
    if saved is not None:
        print(f"verdict: as run gave it ({path / SESSION_VERDICT}; --rejudge judges the record again)")
    if is_outside(path):  # what fake-codex --record saw of a client: judged, exit 1 on a failing check
        return show_outside(args, path, saved)
    try:
        return _show(args, path, saved)
    except WireFileError as exc:  # a line that is not {"t", "dir", "msg"}: invalid input, with its line
        print(f"codex-harness show: {exc}", file=sys.stderr)
        return INVALID_INPUT
    except BrokenPipeError:
        raise  # the reader went away: the entry point ends quietly
    except OSError as exc:  # a file that stats as regular but fails to read (/proc/self/mem, a dying disk)
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def saved_verdict(path: Path) -> list[Check] | None:
    """The checks ``run`` wrote into a record directory, or None (no such file: judge the record)."""
    if not path.is_dir() or not (path / "record.json").is_file():
        return None
    try:
        body = safe_read.read_bounded(path / SESSION_VERDICT, MAX_BASELINE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path / SESSION_VERDICT}: {exc.strerror or exc}") from None
    try:
        items = bounded_parse.loads_json(body)
        return [Check.from_dict(d) for d in items]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path / SESSION_VERDICT} is not the checks of a run: {exc}") from None


def _show(args: argparse.Namespace, path: Path, saved: list[Check] | None = None) -> int:
    if args.html:  # checked before the timeline: a FIFO there would block the write forever
        paths.require_output_file(args.html, "--html")
    record: SessionRecord | None = None
    wire_fh: BinaryIO | None = None
    entries: Iterable[WireEntry]
    if path.is_dir():
        if not (path / "record.json").is_file():
            raise UsageError(f"{path}: no record.json (not a saved session record)")
        _check_wire(path / "wire.jsonl")
        try:
            record = SessionRecord.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot load the record in {path}: {exc}") from None
        entries = record.wire
    else:
        # A wire file streams: one line in memory at a time, whatever its size (--html needs them all).
        wire_fh = _open_wire(path)
        entries = iter_wire(wire_fh, str(path), MAX_WIRE_BYTES)
        if args.html:
            with wire_fh:
                entries = list(entries)
            wire_fh = None
    validator = None
    if not args.no_schema:
        from contracts.validator import Validator

        release = record.schema_release if record else default_version()
        try:
            validator = Validator.for_release(release, record.experimental_api if record else True)
        except Exception:  # an unpinned release still shows its timeline, unmarked
            validator = None
    checks = saved if saved is not None else run_all(record) if record is not None and not args.no_checks else []
    title = ""
    if record is not None:
        statuses = ", ".join(f"turn {r.index + 1} {r.status}" for r in sorted(record.results, key=lambda r: r.index))
        clock = " (virtual time)" if record.virtual_time else ""
        title = (
            f"{record.scenario} on {record.target}{clock}: {statuses or 'no Result'}; server exit {record.server_exit}"
        )
    try:
        for line in render_lines(entries, checks=checks, validator=validator, title=title):
            sys.stdout.write(line + "\n")
    finally:
        if wire_fh is not None:
            wire_fh.close()
    if args.html:
        from harness.html.show import write_show_html

        assert isinstance(entries, list)  # --html: a wire file was read whole above, a record's wire is a list
        print(f"HTML: {write_show_html(Path(args.html), record, entries, checks, path)}")
    if record is not None and record.stderr_tail.strip():
        from codex_client.stderr import terminal_lines  # records made before tails were stripped of colour

        tail = terminal_lines(record.stderr_tail, 10)
        print("\nstderr tail:\n" + "\n".join(f"  {line}" for line in tail))
    if record is None or args.no_checks:
        return OK  # a timeline, not a verdict
    from harness.report import result_line

    verdict = judge(Report(checks=checks, records=[record]))
    print("\n" + result_line(verdict))
    return verdict.exit_code
