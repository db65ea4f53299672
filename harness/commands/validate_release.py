"""``codex-harness validate-release``: does a codex release break clients? One report to decide.

For the binary given with ``--codex``: pin its wire schema (into your schema store, like ``schema pin``:
``--store DIR``, else ``$CODEX_HARNESS_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``;
a release shipped with the package is compared with the shipped pin, never written), diff the schema
against the newest other pinned release, run the model-level built-in scenarios on the real binary with
the contracts, the fidelity diff of each against the fake, and the interrupt latency cases. Writes ``report.md`` and
``report.json`` (and ``report.html``, ``checks.json``, ``junit.xml``) into ``--out``. The report is the one
model (:mod:`contracts.report`) and its verdict the one function every command uses: exit 1 when the schema
pin fails or differs, the schema diff has breaking changes, a contract fails, or a fidelity diff is not empty
(``RESULT: FAIL``), or when nothing was judged; 3 for usage errors (no binary, no writable store).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from codex_sandbox import confine
from harness.release_validation import Ask, validate_release

NAME = "validate-release"
HELP = "pin a codex release's schema, diff it, run the real-binary suite, fidelity diffs and latency; one report"
DEFAULT_LATENCY_SAMPLES = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--codex", metavar="PATH", help="the codex binary to validate (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument(
        "--report",
        "--out",
        dest="out",
        metavar="DIR",
        type=Path,
        help="where report.md / report.json go (default: ./release-<version>; --out: the same)",
    )
    parser.add_argument(
        "--latency-samples",
        type=int,
        default=DEFAULT_LATENCY_SAMPLES,
        metavar="N",
        help=f"samples per latency case (default {DEFAULT_LATENCY_SAMPLES}; 0 skips the measurement)",
    )
    parser.add_argument(
        "--scenario", metavar="NAME", action="append", default=[], help="only these model-level scenarios"
    )
    parser.add_argument(
        "--profile",
        metavar="RELEASE",
        help="the profile the fake plays (default: the binary's own release, else the closest by measured behaviour)",
    )
    parser.add_argument(
        "--from",
        dest="from_codex",
        metavar="PATH",
        help="the release your clients run today: play the catalogue on both binaries and report the step "
        "from it to --codex (schema by client impact, behaviour changes per scenario; as `matrix` with the two)",
    )
    parser.add_argument(
        "--store",
        metavar="DIR",
        type=Path,
        help="your schema store (default: $CODEX_HARNESS_STORE, else "
        "${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas)",
    )


def run(args: argparse.Namespace) -> int:
    ask = Ask(
        codex=args.codex,
        out=args.out,
        scenarios=args.scenario,
        latency_samples=args.latency_samples,
        profile=args.profile,
        from_codex=getattr(args, "from_codex", None),
        store=args.store,
    )
    return validate_release(ask)


