"""A reader that went away (``codex-harness scenarios | head -1``) ends a command quietly.

Python raises ``BrokenPipeError`` on the next write to a closed pipe, and again when the interpreter
flushes stdout at exit ("Exception ignored ..."). An entry point catches the first and calls
:func:`quiet_after_broken_pipe`: stdout and stderr are pointed at ``/dev/null`` so the final flush has
nowhere to fail, and the command exits :data:`BROKEN_PIPE` (128 + SIGPIPE, what a shell reports for a
tool that SIGPIPE ended). No traceback either way.
"""

from __future__ import annotations

import os
import sys
from typing import Final

BROKEN_PIPE: Final = 141  # 128 + SIGPIPE (13)


def quiet_after_broken_pipe() -> int:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (AttributeError, OSError, ValueError):  # a stream without a descriptor (captured in tests)
                pass
    finally:
        os.close(devnull)
    return BROKEN_PIPE
