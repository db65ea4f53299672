"""One module per ``codex-harness`` subcommand.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; the
exit code follows the project's rule (see :mod:`contracts.exitcodes`).
"""

# Order is the order of ``codex-harness --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "harness.commands.run",
    "harness.commands.latency",
    "harness.commands.scenarios",
    "harness.commands.baseline",
    "harness.commands.report",
    "harness.commands.show",
    "harness.commands.diff",
    "harness.commands.record",
    "harness.commands.fuzz",
    "harness.commands.schema",
    "harness.commands.trace",
    "harness.commands.validate_release",
    "harness.commands.matrix",
    "harness.commands.release",
)
