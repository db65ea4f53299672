"""``codex-harness release learn``: learn a release's folder from its binary into the store.

Plays the reference set on the binary and derives what the release does (:mod:`harness.learn`); afterwards
``fake-codex --release X``, ``diff``, ``validate-release`` and ``matrix`` use the folder as they use a shipped
one. Exit 0 when the folder was written (the learning sessions the learned profile still plays differently
are listed), 1 when nothing could be learned (no session recorded, no trace bundle read), 3 on a usage error
(no binary, a store that cannot be written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from codex_sandbox import confine
from contracts import schema_store
from contracts.exitcodes import FAILED, OK
from contracts.releases import ReleaseError
from contracts.text import one_line

NAME = "release"
HELP = "learn a codex release's folder (schema pin, methods, answers, trace format, turn flow) from its binary"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="release_command", metavar="SUBCOMMAND", parser_class=type(parser))
    sub.required = True
    learn = sub.add_parser(
        "learn",
        help="play the reference set on a binary and write what its release does into the store",
        description=(
            "Pin the binary's schema, play the reference scenarios and probes on it (tests/data/real/reference.txt, "
            "as `make reference` records them, and a file change), and derive its release folder: the methods its "
            "deserializer lists beyond the pin, its trace bundle format, the answers it gives beyond the turn "
            "core, the closest profile and the switches and fields under which the fake plays those sessions as "
            "the binary did. Written into your store: --store DIR, else $CODEX_HARNESS_STORE, else "
            "${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas. Exit 0 when written and every learning "
            "session compared plays as recorded; 1 when nothing could be learned, or when the folder is written "
            "but some sessions still play differently (named, and `partly_learned` in its learned_from); 3 on a "
            "usage error."
        ),
    )
    learn.add_argument("--codex", metavar="PATH", help="the codex binary (default: $CODEX_BIN)")
    confine.add_argument(learn)
    learn.add_argument("--store", metavar="DIR", type=Path, help="your store (default: see above)")
    learn.add_argument("--reference", metavar="FILE", type=Path, help="the reference listing (default: the repo's)")
    learn.add_argument("--workers", type=int, default=3, help="real sessions at a time (default 3)")


def run(args: argparse.Namespace) -> int:
    from harness.fidelity_run import select_binary
    from harness.learn import learner as learn
    from harness.schema_pin import user_store_to_write

    started = time.monotonic()
    store = user_store_to_write(str(args.store) if args.store else None)
    codex = select_binary(args.codex, require_pinned_schema=False)
    reference = args.reference or learn.REFERENCE
    with schema_store.using_user_store(store):
        try:
            result = learn.learn(
                codex, store, reference=reference, progress=_progress, workers=max(1, min(args.workers, 8))
            )
        except ReleaseError as exc:
            print(f"codex-harness release learn: {exc}", file=sys.stderr)
            return FAILED
    fake = result.description["fake"]
    trace = result.description["trace"]
    print(f"learned codex-cli {result.version} -> {result.folder}")
    print(f"  closest profile: {result.base} (its frame templates)")
    print(f"  switches: {', '.join(f'{k}={v}' for k, v in fake['switches'].items())}")
    print(f"  fields not written: {len(fake['not_written'])}")
    print(
        f"  trace: schema {trace['schema']}, {'payload files' if trace['payload_files'] else 'zstd shards'}, "
        f"closed by {trace['closing_event']}"
    )
    beyond = result.description["methods"].get("beyond_schema", {}).get("names", [])
    print(f"  methods beyond the schema: {', '.join(beyond) or 'none'}")
    print(f"  answers: {result.description['learned_from']['answers']}")
    compared = sum(1 for s in result.sessions if s.record is not None and s.model_level)
    if result.remaining:
        print(f"  PARTLY LEARNED: {len(result.remaining)} of {compared} learning sessions still play differently:")
        for name, lines in result.remaining.items():
            print(f"    {name}: {one_line('; '.join(lines), 300)}")
    else:
        print(f"  every learning session compared plays as recorded ({compared} compared)")
    left_out = len(result.sessions) - compared
    if left_out:
        print(f"  {left_out} recorded session(s) are not replayed by the fake and were not compared")
    for note in result.notes:
        print(f"  note: {note}")
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in result.seconds.items())
    print(f"  time: {time.monotonic() - started:.0f} s ({parts})")
    # A folder the fake does not play whole is written (and says so) but is no success to build on.
    return FAILED if result.remaining else OK


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
