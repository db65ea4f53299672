"""``codex-harness``: the command-line entry point."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from codex_sandbox import confine, interrupts
from contracts.argparsing import ArgumentParser
from contracts.exitcodes import USAGE, UsageError, exit_code
from contracts.pipes import quiet_after_broken_pipe
from contracts.text import escaped_output
from contracts.version import version_line
from harness.commands import COMMAND_MODULES


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="codex-harness",
        description=(
            "Contract suite, fault injection and release validation for clients of the Codex CLI "
            "app-server (JSON-RPC over stdio)."
        ),
    )
    parser.add_argument("--version", "-V", action="version", version=version_line())
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
    command: list[str] = []  # the subcommand, once parsed (for the interrupt's message)
    code: int | None = None
    signalled = False
    with interrupts.handled():  # SIGTERM: everything the command started ends, exit 143 (codex_sandbox.interrupts)
        try:
            # A nursery hands what ended it over wrapped in an exception group (trio's strict groups): the
            # interrupt, the closed pipe and the usage error are found wherever they are in it.
            try:
                # Everything printed, by any command, goes through the one escaper (contracts.text): no control
                # character from a frame, a client or a scenario reaches the terminal raw.
                with escaped_output():
                    code = _main(argv, command)
                    sys.stdout.flush()  # a closed pipe shows here, where it is handled, not at interpreter exit
            except* KeyboardInterrupt:
                signalled = True
            except* BrokenPipeError:  # the reader of our output went away (`... | head -1`): no traceback
                code = quiet_after_broken_pipe()
        except BaseException:
            if not signalled:
                raise
            # Beside the interrupt: what killing the run's processes made fail on the way out. Not a finding.
        # A SIGTERM whose interrupt something swallowed on the way (interrupts.check): the command was still ended.
        if signalled or interrupts.pending():
            return interrupts.interrupted(command[0] if command else None)
    assert code is not None
    return code


def _main(argv: Sequence[str] | None, command: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return USAGE
    command.append(args.command)
    try:
        with confine.policy(args):  # --unconfined, for this command only
            return int(args._run(args))
    except* UsageError as group:
        error = _first(group)
        print(f"codex-harness {args.command}: {error}", file=sys.stderr)
        code = exit_code(error)
    return code


def _first(group: BaseExceptionGroup) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


if __name__ == "__main__":
    sys.exit(main())
