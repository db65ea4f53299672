"""The run's temporary work directories (``codex-harness-*`` in ``$TMPDIR``), removed however the run ends.

Each is removed when its block ends; an interrupt (codex_sandbox.interrupts) removes whatever is still listed,
so a signal that lands while a ``finally`` is deleting one does not leave the rest of it behind.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_live: set[Path] = set()


@contextlib.contextmanager
def work_dir(prefix: str, root: Path | None = None) -> Iterator[Path]:
    """A fresh directory ``root/prefix*`` (``root`` None: ``$TMPDIR``) for the duration of the block."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    _live.add(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        _live.discard(path)


def remove_all() -> None:
    """Remove every work directory still listed (the interrupt path)."""
    for path in list(_live):
        shutil.rmtree(path, ignore_errors=True)
        _live.discard(path)
