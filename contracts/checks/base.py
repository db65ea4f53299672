"""The check a contract yields, and helpers every contract shares."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from contracts.expect import Allowance
from contracts.record import SessionRecord

Status = Literal["pass", "fail", "skip", "warn"]
#: ``must``: a protocol requirement (a failure fails); ``should``: a recommendation (a failure warns; ``--strict``).
Level = Literal["must", "should"]
LEVELS: tuple[Level, ...] = ("must", "should")
#: At most this many locations per check: enough to mark the frames on a page, bounded on a flood.
MAX_AT = 50
STATUSES: tuple[str, ...] = ("pass", "fail", "skip", "warn")
# What a group of checks shows (a contract's cell, a scenario): its worst *judged* check. A skip judged nothing,
# so it shows only where nothing was judged: one skipped sub-check does not hide the pass of the others.
_RANK = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True, slots=True)
class Check:
    """One verdict.

    ``citation``: where the rule comes from (a document that ships in this repository and its section, or how
    it was observed on the real binary); ``reference`` is the same text under the name checks.json has always
    used. ``level``: ``must`` (a protocol requirement: a failure fails) or ``should`` (a recommendation: a
    failure warns, and fails under ``--strict``); see :mod:`contracts.checks.registry`.
    ``at``: where the verdict points, as 1-based line numbers of the record's ``wire.jsonl`` (the frames
    that broke the contract, or that it measured); empty when no frame says it.
    ``applies``: False for a skip that is not a gap: what this kind of run cannot show by construction (an
    outside client's own trace, its cancel→Result latency) or where nothing of it happened (no turn was
    cancelled). ``--strict`` counts every other skip, never these.
    """

    scenario: str
    target: str
    contract: str
    name: str
    status: Status
    detail: str = ""
    citation: str = ""
    at: tuple[int, ...] = ()
    level: Level = "must"
    applies: bool = True

    @property
    def reference(self) -> str:
        return self.citation

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "target": self.target,
            "contract": self.contract,
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "level": self.level,
            "citation": self.citation,
            "reference": self.citation,  # what checks.json called it before citations: old readers keep reading
            "at": list(self.at),
            "applies": self.applies,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Check:
        """A check from checks.json, of any format so far (before levels and citations: ``must``, the reference)."""
        citation = data.get("citation")
        level = data.get("level")
        return cls(
            scenario=str(data["scenario"]),
            target=str(data["target"]),
            contract=str(data["contract"]),
            name=str(data.get("name", "")),
            status=data["status"],
            detail=str(data.get("detail", "")),
            citation=str(citation if isinstance(citation, str) else data.get("reference", "")),
            at=_lines(data.get("at")),
            level="should" if level == "should" else "must",
            applies=data.get("applies") is not False,
        )

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.scenario, self.target, self.contract, self.name)


def _lines(value: object) -> tuple[int, ...]:
    """``at`` from checks.json; a file from before locations (or a malformed entry) has none."""
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value[:MAX_AT] if isinstance(v, int) and not isinstance(v, bool) and v > 0)


def wire_lines(positions: Iterable[int]) -> tuple[int, ...]:
    """0-based positions in ``record.wire`` as the check's ``at`` (1-based wire.jsonl lines), bounded."""
    out = sorted({p + 1 for p in positions if p >= 0})
    return tuple(out[:MAX_AT])


def worst(statuses: list[str] | tuple[str, ...]) -> str:
    """What ``statuses`` show together: the worst judged one (fail > warn > pass); ``skip`` only when every one
    (or none at all) is a skip."""
    return max(statuses, key=lambda s: _RANK[s]) if statuses else "skip"


def shown(checks: Iterable[Check]) -> str:
    """What a group of checks shows with its level (a table cell): :func:`worst` of their statuses, except
    ``should`` where every failure among them is a recommendation (a should-level check: it warns, and fails a
    run only under ``--strict``)."""
    checks = list(checks)
    status = worst([c.status for c in checks])
    if status == "fail" and all(c.level == "should" for c in checks if c.status == "fail"):
        return "should"
    return status


class Rules(Protocol):
    """What a :class:`Maker` needs of a contract (:class:`contracts.checks.registry.Contract`)."""

    name: str

    def rule_for(self, name: str) -> tuple[Level, str]: ...


class Maker:
    """Builds checks of one contract for one record, so each call names only what varies: the level and the
    citation of each check come from what the contract declares for its name (:mod:`contracts.checks.registry`)."""

    def __init__(self, record: SessionRecord, contract: Rules) -> None:
        self.record, self.contract = record, contract

    def __call__(
        self, name: str, status: Status, detail: str = "", at: Iterable[int] = (), *, applies: bool = True
    ) -> Check:
        """``at``: 0-based positions in ``record.wire`` (stored as 1-based wire.jsonl lines); ``applies=False``: a
        skip that is not a gap (:class:`Check`)."""
        level, citation = self.contract.rule_for(name)
        return Check(
            self.record.scenario,
            self.record.target,
            self.contract.name,
            name,
            status,
            detail,
            citation,
            wire_lines(at),
            level,
            applies,
        )


def judge_allowance(
    record: SessionRecord, contract: str, what: str, observed: int, *, at_most: bool = False
) -> tuple[bool, str, Allowance | None]:
    """Whether ``observed`` violations of kind ``what`` are excused by ``record.expect``.

    Returns (ok, why, allowance). Without an allowance only zero is ok; an allowance with a
    count excuses exactly that many (a fault that did not strike is also a finding); one
    without a count excuses any number. ``at_most``: the count is a ceiling, for what the *client* may
    leave undone but may as well do (an approval the server never resolved may still be answered).
    """
    allowance = record.expect.allowance(contract, what)
    if allowance is None:
        return observed == 0, "", None
    reason = f" ({allowance.reason})" if allowance.reason else ""
    if allowance.count is None:
        return True, f"{observed} {what} allowed by [expect]{reason}", allowance
    if observed == allowance.count:
        return True, f"{observed} {what} as [expect] declares{reason}", allowance
    if at_most and observed < allowance.count:
        return True, f"{observed} {what}, [expect] allows up to {allowance.count}{reason}", allowance
    bound = "up to" if at_most else "exactly"
    return False, f"[expect] declares {bound} {allowance.count} {what}{reason}, saw {observed}", allowance
