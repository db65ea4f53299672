"""What ``fake-codex`` says on stderr for the person debugging a client, and ``--quiet``.

One home for the switch, read by :mod:`fake_server.cli` (the flag) and :mod:`fake_server.serving` (a fault as it
strikes); light, so that ``fake-codex --version`` does not import the server for it.
"""

from __future__ import annotations

import os

from contracts.text import escape

QUIET_ENV = "FAKE_CODEX_QUIET"
_QUIET = [False]


def say(text: str) -> None:
    """One line on stderr for the person debugging a client (the scenario played, a fault as it strikes, where
    the recording went); none under ``--quiet`` or ``$FAKE_CODEX_QUIET``. Written whole with one write."""
    if _QUIET[0]:
        return
    data = escape(f"fake-codex: {text}").encode("utf-8", "replace") + b"\n"
    try:
        os.write(2, data)
    except OSError:
        pass


def set_quiet(flag: bool) -> None:
    """``--quiet`` (or ``$FAKE_CODEX_QUIET``): say nothing from now on."""
    _QUIET[0] = flag
