"""Contracts over a session record: pure functions from a :class:`SessionRecord` to checks.

Each contract is one module with ``NAME`` and ``check(record) -> list[Check]``; :func:`run_all`
runs them all in a fixed order. A contract judges against the record's ``expect`` (the scenario's
ground truth) and excuses only what its allowances declare.
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.checks.base import STATUSES, Check, Status, worst
from contracts.record import SessionRecord

CONTRACT_NAMES: tuple[str, ...] = ("terminal_status", "latency", "trace_closure", "usage", "schema", "protocol")


def _contract(name: str) -> Callable[[SessionRecord], list[Check]]:
    from importlib import import_module

    return import_module(f"contracts.checks.{name}").check  # type: ignore[no-any-return]


def run_all(record: SessionRecord, contracts: tuple[str, ...] = CONTRACT_NAMES) -> list[Check]:
    """Every check of every contract on ``record``; a contract that raises yields one failed check."""
    checks: list[Check] = []
    for name in contracts:
        try:
            checks.extend(_contract(name)(record))
        except Exception as exc:  # a crashing contract must show up as red, not abort the report
            checks.append(
                Check(record.scenario, record.target, name, "contract", "fail", f"contract raised {exc!r}", "")
            )
    return checks


__all__ = ["CONTRACT_NAMES", "STATUSES", "Check", "Status", "run_all", "worst"]
