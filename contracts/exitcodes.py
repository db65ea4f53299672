"""The one exit-code rule of every command of the project."""

from typing import Final

OK: Final = 0  # success
FAILED: Final = 1  # the thing checked does not hold
INVALID_INPUT: Final = 2  # invalid input, where a command says so (e.g. `trace check`)
USAGE: Final = 3  # usage errors and unreadable paths


class UsageError(Exception):
    """A usage error or an unreadable path: the command prints it and exits with USAGE."""
