"""``codex-harness diff``: play a scenario on the fake and on the real binary, compare the server sides.

The comparison is structural (:mod:`contracts.fidelity`): method, item type and status, turn status,
thread status and active flags, ``willRetry``; ids, timestamps, texts and ambient notifications are
ignored, runs of identical deltas count once, and ``serverRequest/resolved`` is counted per turn
rather than placed. The fake plays the release profile of the binary's version (fake_server.profiles), else
the closest by measured behaviour (harness.learn.choose), or ``--profile X``, and says which and why; every
frame of both sides must also
validate against its release's pinned schema. The two servers' trace bundles are compared too, event by
event (:mod:`contracts.trace.sequence`: types, statuses, which history items; ids and payloads ignored).
Exit 0 when the two sides agree, 1 when they differ (or a side could not be played), 2 for an invalid
scenario file or a fake-only scenario, 3 for usage errors (no binary).
"""

from __future__ import annotations

import argparse
import json
import sys

from codex_sandbox import confine
from contracts.exitcodes import FAILED, INVALID_INPUT, OK
from contracts.fidelity import render
from contracts.text import one_line
from harness import scenario_lookup, store_option
from harness.fidelity_run import fidelity_diff, select_binary

NAME = "diff"
HELP = "play a scenario on the fake and on the real codex; print the structural difference of the server sides"
FAKE_TARGETS = ("fake", "fake-process")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", metavar="NAME|PATH", required=True, help="a built-in scenario or a scenario file")
    parser.add_argument("--codex", metavar="PATH", help="the real codex binary (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument(
        "--fake-target", choices=FAKE_TARGETS, default="fake", help="which fake to compare (default: in-process)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--profile",
        metavar="RELEASE",
        help="the profile the fake plays (default: the binary's own release, else the closest by measured behaviour)",
    )
    store_option.add_argument(parser)


def run(args: argparse.Namespace) -> int:
    with store_option.using(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        scenario = scenario_lookup.resolve(args.scenario)
    except scenario_lookup.ScenarioError as exc:
        print(f"codex-harness diff: {exc}", file=sys.stderr)
        return INVALID_INPUT
    for target in (args.fake_target, "real"):  # invalid input (2) is said before the binary is looked at
        supported, reason = scenario.supports(target)
        if not supported:
            print(f"{scenario.name}: cannot be compared: {target}: {reason}")
            return INVALID_INPUT
    codex = select_binary(args.codex)
    result = fidelity_diff(scenario, codex, fake_target=args.fake_target, profile=args.profile)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=list))
    elif result.skipped:
        print(f"{scenario.name}: cannot be compared: {result.skipped}")
    elif result.error:
        print(f"{scenario.name}: {one_line(result.error, 400)}")
    else:
        version = result.server_version or "?"
        played = f"{args.fake_target} playing {result.profile} ({result.profile_note})"
        print(f"{scenario.name}: {played} vs real codex {version}")
        print(render(result.differences))
        for line in result.invalid_frames:
            print(f"invalid against its release's schema: {one_line(line, 400)}")
        if result.trace_differences:
            print("trace bundle events (fake / real):")
            for line in result.trace_differences[:50]:
                print(f"  {one_line(line, 400)}")
        else:
            print("trace bundles: the same events")
    if result.skipped:
        return INVALID_INPUT
    return OK if result.equal else FAILED
