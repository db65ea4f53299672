"""The one exit-code rule of every command of the project, and the one root of its errors.

Every exception class the project defines derives from :class:`HarnessError`, through one of four families
(as h11's ``ProtocolError`` has its local and remote children); :data:`EXIT_CODES` is the one table from a family
to the status a command ends with, and :func:`exit_code` reads it. A class that is also a built-in kind keeps
that base (``class ScenarioError(InvalidInput, ValueError)``), so ``except ValueError`` still holds it.

- :class:`UsageError` (exit 3): the command was asked something it cannot do, or named a path it cannot read;
  the command line (``codex-harness``, ``fake-codex``, the relays) prints it on one line and exits 3.
- :class:`InvalidInput` (exit 2): an input was read and rejected (a scenario, a record, a trace bundle, a path that
  is a FIFO where a file must be); where it is a path the user named, the command says so as a usage error.
- :class:`Finding` (exit 1): what is checked does not hold, or the peer broke the protocol (the server's error
  answer, a frame that is not JSON-RPC, a server that exited mid-request).
- :class:`InternalError` (exit 1): the harness or what it needs from the machine (a binary, confinement, a
  port) failed it: neither the user's input nor the thing checked. One that reaches the command line ends it with
  the interpreter's status 1 and its traceback, what a bug report needs.
"""

from typing import Final

OK: Final = 0  # success
FAILED: Final = 1  # the thing checked does not hold
INVALID_INPUT: Final = 2  # invalid input, where a command says so (e.g. `trace check`)
USAGE: Final = 3  # usage errors and unreadable paths


class HarnessError(Exception):
    """The root of every error the project raises."""


class UsageError(HarnessError):
    """A usage error or an unreadable path: the command prints it and exits with USAGE."""


class InvalidInput(HarnessError):
    """An input read and rejected (``str()`` says why)."""


class Finding(HarnessError):
    """What is checked does not hold, or the peer broke the protocol."""


class InternalError(HarnessError):
    """The harness, or what it needs from the machine, failed it."""


#: Family -> the status a command ends with when an error of that family ends it.
EXIT_CODES: Final[dict[type[HarnessError], int]] = {
    UsageError: USAGE,
    InvalidInput: INVALID_INPUT,
    Finding: FAILED,
    InternalError: FAILED,
}


def exit_code(exc: BaseException) -> int:
    """The status a command ends with for ``exc``: its family's (:data:`EXIT_CODES`); FAILED for anything else."""
    for family, code in EXIT_CODES.items():
        if isinstance(exc, family):
            return code
    return FAILED


#: How many exceptions of a chain (causes, contexts, group members) :func:`interrupt_in` reads at the most.
_CHAIN_LIMIT: Final = 64


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM through ``codex_sandbox.interrupts``) that ``exc`` stands for:
    ``exc`` itself, a member of its group, or the cause or context it was raised from; None when there is none.

    Python turns an interrupt raised inside some calls into another exception, with the interrupt as its cause: in a
    descriptor's ``__set_name__`` while a class is made (a dataclass of a module imported lazily, mid-run) into
    ``RuntimeError``; in orjson's ``default`` into ``JSONEncodeError``. A handler that makes an exception a verdict
    (``except Exception``: a scenario's runner error, a contract that raised) would so judge the interrupt and go on.
    """
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < _CHAIN_LIMIT:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def reraise_interrupt(exc: BaseException) -> None:
    """In a handler that makes ``exc`` a verdict: raise the interrupt it stands for (:func:`interrupt_in`), if any."""
    interrupt = interrupt_in(exc)
    if interrupt is not None:
        raise interrupt
