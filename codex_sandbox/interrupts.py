"""SIGTERM, SIGHUP and SIGINT end any command the same way: everything it started dies at once, the run unwinds.

SIGTERM is what ``timeout`` and a cancelled CI job send; SIGHUP what a closed terminal or SSH session sends
(handled as SIGTERM, unless it was ignored, as ``nohup`` does); SIGINT is Ctrl-C. On any of them:

1. every process tree and process group the run has open (:func:`codex_sandbox.proctree.end_all`) is SIGKILLed
   from the handler itself (SIGTERM), or as the interrupt unwinds (SIGINT: trio owns that handler);
2. a ``KeyboardInterrupt`` unwinds the command: the trees' and targets' exits reap what was killed, the
   work directories (``codex-harness-*`` in ``$TMPDIR``) are removed by their ``finally``;
3. the command writes no report: ``run`` writes ``checks.json``, ``junit.xml`` and ``index.html`` only
   once every scenario was played (a report on part of them would read as a verdict on all of them; the
   records of the scenarios that finished stay in ``--report``/sessions), and it exits 130 (SIGINT),
   143 (SIGTERM) or 129 (SIGHUP) without a traceback, saying so in one line.

The SIGTERM handler raises the interrupt through the SIGINT handler in force: inside ``trio.run`` that is
trio's, which delivers ``KeyboardInterrupt`` at a point where trio's own state is safe. A second SIGTERM
only kills again: it never cuts the cleanup of the first short.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from codex_sandbox import proctree, workdirs

EXIT_CODES: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
#: Handled by :func:`_on_sigterm` (SIGINT is trio's, or Python's default handler).
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    first = not _received
    _received.append(signum)
    proctree.end_all()
    if not first:
        return
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # raises KeyboardInterrupt now, or (trio) at the next safe point
    else:  # someone changed SIGINT inside the block: nobody else will raise it
        raise KeyboardInterrupt


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM handled as described above for the duration of the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = {
        signum: signal.signal(signum, _on_sigterm)
        for signum in TERMINATING
        if signal.getsignal(signum) is not signal.SIG_IGN  # nohup: the user asked for SIGHUP to be ignored
    }
    # A shell starts a background job with SIGINT ignored, and then trio installs no handler of its own: the
    # interrupt raised from the SIGTERM handler would land anywhere, inside trio's own run loop too (the run is
    # abandoned and ~100 lines of "Exception ignored" follow). With Python's default handler in place trio
    # installs its own, which delivers the interrupt where trio's state is safe.
    previous_int = signal.getsignal(signal.SIGINT)
    if not callable(previous_int):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        _received.clear()  # a library call after the block is no command of the block's to end (check())
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if not callable(previous_int):
            signal.signal(signal.SIGINT, previous_int if previous_int is not None else signal.SIG_DFL)


def check() -> None:
    """Between two units of a long command (a scenario, an example, a session): raise the interrupt again if a SIGTERM
    or SIGHUP came. Its ``KeyboardInterrupt`` normally unwinds the command by itself, but Python turns one raised in
    some calls into another exception (contracts.exitcodes.interrupt_in), which a handler deep in a run may take for
    a verdict and go on: the command then stops here, before the next unit and before any report. In the main thread
    only, where a signal's handler runs: a worker thread's unit ends with its run, which the interrupt unwinds."""
    if _received and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def pending() -> bool:
    """A SIGTERM or SIGHUP came during the block (:func:`handled`)."""
    return bool(_received)


def received() -> int:
    """The signal that interrupted the command: the first SIGTERM or SIGHUP that came, else SIGINT."""
    return next((signum for signum in _received if signum in TERMINATING), signal.SIGINT)


def interrupted(command: str | None) -> int:
    """End what is left, say so on stderr; the exit code (130 / 143)."""
    proctree.end_all()
    workdirs.remove_all()
    signum = received()
    name = signal.Signals(signum).name
    what = f"codex-harness {command}" if command else "codex-harness"
    print(f"{what}: interrupted by {name}: every process it started was ended; it did not finish", file=sys.stderr)
    return EXIT_CODES[signum]
