"""Contracts over a session record: pure functions from a :class:`SessionRecord` to checks.

Each contract is one module with ``NAME`` and ``check(record) -> list[Check]``; :func:`run_all`
runs them all in a fixed order. A contract judges against the record's ``expect`` (the scenario's
ground truth) and excuses only what its allowances declare.

Allowance kinds (``[[expect.allow]] contract = ..., what = ..., count = N``; with a count, exactly N):

- ``schema``: ``server_frames_invalid`` (server frames failing the schema, and lines that were not
  frames unless ``wire_errors`` is declared), ``wire_errors`` (non-JSON, invalid UTF-8, oversized
  server lines), ``client_frames_invalid``;
- ``protocol``: ``unanswered_server_requests`` (neither answered nor resolved within the request
  timeout), ``unknown_response_id`` (server answers to unknown or already answered ids);
- ``usage``: ``server_usage_inconsistent`` (the server's own cached > input or reasoning > output).

Statuses: ``pass``; ``fail``; ``skip`` when something that should be judged could not be (no ground
truth, no bundle, no pinned schema), with the reason; ``warn`` for a weaker finding (usage derived from
the wire instead of declared, a missing log record).
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.checks import wire_index
from contracts.checks.base import STATUSES, Check, Status, worst
from contracts.heap import collector_paused
from contracts.record import SessionRecord

CONTRACT_NAMES: tuple[str, ...] = ("terminal_status", "latency", "trace_closure", "usage", "schema", "protocol")


def _contract(name: str) -> Callable[[SessionRecord], list[Check]]:
    from importlib import import_module

    return import_module(f"contracts.checks.{name}").check  # type: ignore[no-any-return]


def run_all(record: SessionRecord, contracts: tuple[str, ...] = CONTRACT_NAMES) -> list[Check]:
    """Every check of every contract on ``record``; a contract that raises yields one failed check."""
    with collector_paused(), wire_index.shared():  # linear in the session: see contracts.heap
        return _run_all(record, contracts)


def _run_all(record: SessionRecord, contracts: tuple[str, ...]) -> list[Check]:
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
