"""Contracts over a session record: pure functions from a :class:`SessionRecord` to checks.

Each contract is one module that declares a :class:`~contracts.checks.registry.Contract` (its name, the level
and citation of each check it yields) and decorates its judge with it: ``@CONTRACT.judge`` registers it
(:mod:`contracts.checks.registry`). :func:`run_all` runs the session contracts in the order they registered,
which is the order of the imports below (the table's column order). A contract judges against the record's
``expect`` (the scenario's ground truth) and excuses only what its allowances declare.

Allowance kinds (``[[expect.allow]] contract = ..., what = ..., count = N``; with a count, exactly N):

- ``schema``: ``server_frames_invalid`` (server frames failing the schema, and lines that were not
  frames unless ``wire_errors`` is declared), ``wire_errors`` (non-JSON, invalid UTF-8, oversized
  server lines), ``client_frames_invalid``;
- ``protocol``: ``unanswered_server_requests`` (neither answered nor resolved within the request
  timeout), ``unknown_response_id`` (server answers to unknown or already answered ids);
- ``usage``: ``server_usage_inconsistent`` (the server's own cached > input or reasoning > output).

A scenario with ``[[expect.or]]`` courses is judged against the course whose turns allow the Results' statuses
(the first when none does).

Statuses: ``pass``; ``fail``; ``skip`` when something that should be judged could not be (no ground
truth, no bundle, no pinned schema), with the reason; ``warn`` for a weaker finding (usage derived from
the wire instead of declared, a missing log record).
"""

from __future__ import annotations

from dataclasses import replace

# Importing a contract module registers it; the session contracts register in this order (the table's columns).
# isort: off
from contracts.checks import terminal_status, latency, trace_closure, usage, schema, protocol
from contracts.checks import client_run, client_plan, scenario

# isort: on
from contracts import played_path
from contracts.checks import registry, wire_index
from contracts.checks.base import LEVELS, STATUSES, Check, Level, Status, shown, worst
from contracts.exitcodes import reraise_interrupt
from contracts.heap import collector_paused
from contracts.record import SessionRecord

#: The session contracts, in the table's column order.
CONTRACT_NAMES: tuple[str, ...] = registry.names("session")

del latency, trace_closure, usage, schema, protocol, terminal_status, client_run, client_plan, scenario


def run_all(record: SessionRecord, contracts: tuple[str, ...] = CONTRACT_NAMES) -> list[Check]:
    """Every check of every contract on ``record``; a contract that raises yields one failed check."""
    with collector_paused(), wire_index.shared():  # linear in the session: see contracts.heap
        return _run_all(record, contracts)


def _run_all(record: SessionRecord, contracts: tuple[str, ...]) -> list[Check]:
    # The course of the scenario the client's Results say it took ([[expect.or]]): every contract judges that one.
    course = record.expect.course_for({r.index: r.status for r in record.results})
    # A turn scripted around an approval the server never asked (the client's settings) is judged by the path played.
    course, rejudged = played_path.played(course, record.meta, record.wire, record.results)
    if rejudged and not course.why:
        course = replace(course, why="; ".join(rejudged))
    if course is not record.expect:
        record = replace(record, expect=course)
    checks: list[Check] = []
    for name in contracts:
        try:
            checks.extend(registry.judge_of(name)(record))
        except Exception as exc:  # a crashing contract must show up as red, not abort the report
            reraise_interrupt(exc)
            level, citation = registry.level_and_citation(name, "contract")
            detail = f"contract raised {exc!r}"
            checks.append(Check(record.scenario, record.target, name, "contract", "fail", detail, citation, (), level))
    return checks


__all__ = ["CONTRACT_NAMES", "LEVELS", "STATUSES", "Check", "Level", "Status", "registry", "run_all", "shown", "worst"]
