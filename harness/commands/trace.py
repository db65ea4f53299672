"""``codex-harness trace``: check a rollout-trace bundle's closure, or show its windows as a timeline.

``trace check BUNDLE_DIR [--json]`` exits 0 when the bundle is valid and closed (partial payloads only
warn), 1 when it is valid but unclosed or a closure invariant is broken, 2 when replay rejects it (or a
closed recording's shard lacks its content checksum), 3 on usage errors and unreadable paths.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from contracts.exitcodes import FAILED, INVALID_INPUT, OK, UsageError
from contracts.text import one_line
from contracts.trace.closure import TraceVerdict, check_bundle
from contracts.trace.errors import TraceInvalid, TraceUnreadable
from contracts.trace.reader import ReplayedTrace, read_bundle

NAME = "trace"
HELP = "check a rollout-trace bundle's closure (exit 0 closed, 1 unclosed/violation, 2 invalid) or show it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", parser_class=type(parser))
    check = sub.add_parser("check", help="replay a bundle strictly and check trace closure")
    check.add_argument("bundle", metavar="BUNDLE_DIR", type=Path)
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    show = sub.add_parser("show", help="print the bundle's execution windows as a timeline")
    show.add_argument("bundle", metavar="BUNDLE_DIR", type=Path)


def _bundle_dir(path: Path) -> Path:
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    return path


_EXIT = {"closed": OK, "unclosed": FAILED, "violation": FAILED, "invalid": INVALID_INPUT}


def _format_verdict(v: TraceVerdict) -> str:
    lines: list[str] = []
    if v.verdict == "invalid":
        where = f" (line {v.error_line})" if v.error_line is not None else ""
        lines.append(f"INVALID {v.path}: replay rejects the bundle{where}: {one_line(v.error, 400)}")
        return "\n".join(lines)
    head = {
        "closed": "CLOSED",
        "unclosed": "UNCLOSED: valid, but the recording was not closed (live or killed writer)",
        "violation": "VIOLATION: valid, but a trace-closure invariant is broken",
    }[v.verdict]
    lines.append(f"{head} {v.path}")
    status = f"recording_status={one_line(v.recording_status, 40)} rollout status={one_line(v.rollout_status, 40)}"
    lines.append(f"  {status}")
    if v.verdict == "unclosed":
        opened = v.open_windows()
        if opened:
            lines.append(f"  {len(opened)} window(s) left open:")
    for p in v.problems:
        lines.append(f"  {one_line(p.describe(), 400)}")
    for w in v.warnings:
        lines.append(f"  warning: {one_line(w, 400)}")
    return "\n".join(lines)


def _check(args: argparse.Namespace) -> int:
    bundle = _bundle_dir(args.bundle)
    try:
        verdict = check_bundle(bundle)
    except TraceUnreadable as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        sys.stdout.write(orjson.dumps(verdict.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(_format_verdict(verdict))
    return _EXIT[verdict.verdict]


def format_timeline(trace: ReplayedTrace) -> str:
    """Windows ordered by start, indented by nesting (thread > turn > inference/tool > terminal op)."""
    t0 = trace.started_at_unix_ms
    depth = {
        "thread": 0,
        "codex_turn": 1,
        "inference_call": 2,
        "tool_call": 2,
        "compaction_request": 2,
        "code_cell": 2,
        "terminal_operation": 3,
    }
    # Every string here is the bundle's (another program wrote it): one line each, clipped (contracts.text).
    lines = [
        f"trace {one_line(trace.trace_id, 80)} rollout {one_line(trace.rollout_id, 80)}",
        f"status={one_line(trace.status, 40)} recording_status={one_line(trace.recording_status, 40)} "
        f"events={trace.event_count}",
        f"{'start':>8} {'end':>8}  {'seq':>11}  window",
    ]
    for w in sorted(trace.windows(), key=lambda w: (w.started_seq, depth[w.kind])):
        end = f"+{w.ended_at_unix_ms - t0}" if w.ended_at_unix_ms is not None else "open"
        seqs = f"{w.started_seq}-{w.ended_seq if w.ended_seq is not None else '…'}"
        extra = f" ({one_line(w.label, 80)})" if w.label else ""
        doubles = f"  ENDED {len(w.ends)}x" if len([m for m in w.ends if not m.implicit]) > 1 else ""
        indent = "  " * depth[w.kind]
        lines.append(
            f"{'+' + str(w.started_at_unix_ms - t0):>8} {end:>8}  {seqs:>11}  {indent}{w.kind} {one_line(w.id, 80)}"
            f"{extra} [{one_line(w.status, 40)}]{doubles}"
        )
    if trace.rollout_ended:
        last = trace.rollout_ended[-1]
        lines.append(
            f"{'+' + str(last.wall_time_unix_ms - t0):>8} {'':>8}  {last.seq:>11}  "
            f"rollout_ended [{one_line(last.status, 40)}]"
        )
    if trace.recording_completed_seq is not None:
        lines.append(f"{'':>8} {'':>8}  {trace.recording_completed_seq:>11}  recording_completed")
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    bundle = _bundle_dir(args.bundle)
    try:
        trace = read_bundle(bundle)
    except TraceUnreadable as exc:
        raise UsageError(str(exc)) from exc
    except TraceInvalid as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        print(f"INVALID {bundle}: replay rejects the bundle{where}: {one_line(exc.message, 400)}", file=sys.stderr)
        return INVALID_INPUT
    print(format_timeline(trace))
    return OK


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "trace_command", None)
    if command == "check":
        return _check(args)
    if command == "show":
        return _show(args)
    raise UsageError("expected a subcommand: check BUNDLE_DIR [--json] | show BUNDLE_DIR")
