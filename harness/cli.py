"""``codex-harness``: the command-line entry point."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from contracts.argparsing import ArgumentParser
from contracts.exitcodes import USAGE, UsageError
from contracts.pipes import quiet_after_broken_pipe
from contracts.text import escaped_output
from harness import confine
from harness.commands import COMMAND_MODULES


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="codex-harness",
        description=(
            "Contract suite, fault injection and release validation for clients of the Codex CLI "
            "app-server (JSON-RPC over stdio)."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not built yet
                continue
            raise
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # Everything printed, by any command, goes through the one escaper (contracts.text): no control
        # character from a frame, a client or a scenario reaches the terminal raw.
        with escaped_output():
            code = _main(argv)
            sys.stdout.flush()  # a closed pipe shows here, where it is handled, not at interpreter exit
        return code
    except BrokenPipeError:  # the reader of our output went away (`... | head -1`): no traceback
        return quiet_after_broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return USAGE
    try:
        with confine.policy(args):  # --unconfined, for this command only
            return int(args._run(args))
    except UsageError as exc:
        print(f"codex-harness {args.command}: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
