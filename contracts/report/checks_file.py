"""``checks.json``: the checks of a run as a JSON list, written by ``run --report`` and read back (``--baseline``).

One object per check: ``scenario``, ``target``, ``contract``, ``name``, ``status``, ``detail``, ``level``
(``must`` | ``should``), ``citation``, ``reference`` (the citation under the name every earlier checks.json used)
and ``at`` (wire lines). Files written before levels, citations or locations still read: a missing ``level`` is
``must``, a missing ``citation`` is the ``reference``, a missing ``at`` is none.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson

from contracts import bounded_parse, safe_read
from contracts.checks.base import Check
from contracts.report.verdict import MAX_BASELINE_BYTES
from contracts.safe_dir import write_file


def checks_json(checks: Iterable[Check]) -> bytes:
    return orjson.dumps([c.to_dict() for c in checks], option=orjson.OPT_INDENT_2)


def write_checks_json(checks: Iterable[Check], path: str | Path) -> Path:
    return write_file(path, checks_json(checks))


def read_checks_json(path: str | Path) -> list[Check]:
    return [
        Check.from_dict(d)
        for d in bounded_parse.loads_json(safe_read.read_bounded(path, MAX_BASELINE_BYTES, follow=True))
    ]
