"""``codex-harness record``: play a scenario on the real binary (offline, as ``run --target real`` does) and
write its transcript, machine values masked (:mod:`harness.transcript`); ``--trace-out`` keeps the
server's rollout-trace bundle as the server wrote it.

Exit 0 when the transcript was written; 1 when the session could not be recorded (the run broke, the
client reported an error, the server said nothing, did not answer the handshake with a result or wrote lines
that are not JSON-RPC frames, no trace bundle for ``--trace-out``); 2 for an
invalid scenario file or a scenario the real binary cannot play (fake-only faults); 3 for usage
errors (no binary, an output path that cannot be written).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from codex_sandbox import confine
from contracts.exitcodes import FAILED, INVALID_INPUT, OK, InternalError, UsageError
from contracts.record import MAX_RECORD_COPY_BYTES
from contracts.safe_dir import CopyBudget, SafeDir, write_file
from harness import scenario_lookup, store_option
from harness.transcript import handshake_problem

NAME = "record"
HELP = "play a scenario on the real codex offline and write its transcript ({t, dir, msg} lines)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    store_option.add_argument(parser)
    parser.add_argument("--codex", metavar="PATH", help="the real codex binary (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument("--scenario", metavar="NAME|PATH", required=True, help="a built-in scenario or a scenario file")
    parser.add_argument("--out", metavar="FILE.jsonl", required=True, help="where the transcript is written")
    parser.add_argument("--trace-out", metavar="DIR", help="also keep the server's trace bundle in DIR")


def _in_writable_folder(flag: str, path: Path) -> Path:
    """``path``'s folder exists (created when missing) and can be written; a usage error naming ``flag`` else."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create its folder: {exc.strerror}") from None
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"{flag} {path}: its folder is not writable")
    return path


def _writable_file(path: Path) -> Path:
    if path.exists() and not path.is_file():
        raise UsageError(f"--out {path} exists and is not a regular file")
    return _in_writable_folder("--out", path)


def _bundle_dir(path: Path) -> Path:
    """``--trace-out``: a new or empty folder, or one holding an earlier bundle (replaced); nothing else."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"--trace-out {path} exists and is not a folder")
        if any(path.iterdir()) and not (path / "manifest.json").is_file():
            raise UsageError(f"--trace-out {path} holds files that are not a trace bundle; give a new folder")
    return _in_writable_folder("--trace-out", path)


def _keep_bundle(bundle: Path, trace_out: Path) -> list[str]:
    """Copy the binary's bundle to ``--trace-out`` (swapped in whole) with the one safe copy: what it refused
    (a link, a FIFO, past the copy budget), empty when the bundle was kept whole."""
    budget = CopyBudget(MAX_RECORD_COPY_BYTES)
    try:
        with SafeDir.open(trace_out.parent) as parent, parent.replacing(trace_out.name) as fresh:
            if not fresh.fill_from(bundle, budget) or budget.not_copied:
                raise _NotWhole  # the earlier bundle there stays
    except _NotWhole:
        return budget.not_copied
    return []


class _NotWhole(InternalError):
    pass


def _fail(message: str) -> int:
    print(f"codex-harness record: {message}", file=sys.stderr)
    return FAILED


def run(args: argparse.Namespace) -> int:
    """With ``--store DIR``, every release lookup of the command (pins, learned profiles) reads that store."""
    with store_option.using(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from harness.fidelity_run import select_binary
    from harness.runner import play
    from harness.targets import TargetUnavailable
    from harness.transcript import dumps, transcript

    try:
        scenario = scenario_lookup.resolve(args.scenario)
    except scenario_lookup.ScenarioError as exc:
        print(f"codex-harness record: {exc}", file=sys.stderr)
        return INVALID_INPUT
    supported, reason = scenario.supports("real")
    if not supported:
        print(f"codex-harness record: {scenario.name} cannot be recorded: {reason}", file=sys.stderr)
        return INVALID_INPUT
    out = _writable_file(Path(args.out))
    trace_out = _bundle_dir(Path(args.trace_out)) if args.trace_out else None
    codex = select_binary(args.codex)
    with tempfile.TemporaryDirectory(prefix=f"codex-harness-record-{scenario.name}-") as tmp:
        work_dir = Path(tmp) / "run"
        try:
            record = play(scenario, "real", work_dir=work_dir, codex=codex)
        except TargetUnavailable as exc:
            raise UsageError(f"the real target cannot run: {exc}") from None
        except Exception as exc:  # a broken run is a result, not a traceback
            return _fail(f"{scenario.name}: the run broke: {type(exc).__name__}: {exc}")
        if record.client_errors:
            return _fail(f"{scenario.name}: {'; '.join(record.client_errors)}")
        if not any(entry.dir == "s2c" for entry in record.wire):
            tail = record.stderr_tail.strip().splitlines()[-5:]
            return _fail(f"{scenario.name}: the server wrote nothing; stderr: {' | '.join(tail) or 'empty'}")
        problem = handshake_problem(record, scenario.client.handshake)
        if problem is not None:
            return _fail(f"{scenario.name}: not recorded, {problem}")
        if trace_out is not None:
            if record.server_trace is None:
                return _fail(f"{scenario.name}: the server wrote no trace bundle for --trace-out")
            refused = _keep_bundle(record.server_trace, trace_out)
            if refused:
                return _fail(f"{scenario.name}: the trace bundle was not kept whole: {'; '.join(refused[:5])}")
        lines = transcript(record, [work_dir])
    write_file(out, dumps(lines))  # whole, never through a link at its name
    version = record.server_version or "?"
    frames = sum(1 for line in lines if line["dir"] != "note")
    kept = f", trace bundle in {trace_out}" if trace_out is not None else ""
    print(f"{scenario.name}: codex {version}, {frames} frames -> {out}{kept}")
    return OK
