"""The contracts, each registered with a decorator, and every check each can yield with its level and citation.

A contract module declares its :class:`Contract` (name, default level, default citation, and the checks it
yields, by name) and decorates its judge with it (as pytest-lsp's checks do)::

    USAGE = Contract("usage", citation="docs/client-rules.md §4", checks=("turn N usage", Rule("…", citation=…)))

    @USAGE.judge
    def check(record: SessionRecord) -> list[Check]:
        make = USAGE.maker(record)
        ...

So the registry knows every contract and, per check, what it holds the client (or the server) to:

- ``level``: ``must`` — what the protocol requires (the schema, JSON-RPC, behaviour the real binary depends on);
  ``should`` — a recommendation, robustness beyond the protocol. A failed ``should`` check warns and fails only
  under ``--strict`` (:func:`contracts.report.verdict.judge`).
- ``citation``: where the rule comes from: a document that ships in this repository and its section
  (``docs/client-rules.md §3``), or how it was observed on the real binary (``observed on the real binary: …``).
- ``outside``: why the check is not judged for an outside client (``run --client-cmd``), when it is not: what
  that kind of run cannot show by construction (its own trace bundle, cancel→Result on its own clock). The
  outside runner makes such a check a skip with this reason that ``--strict`` does not count
  (:attr:`contracts.checks.base.Check.applies`), and docs/clients.md lists it so.

Levels follow one question: would the client's authors accept this failure as a bug? What a correct client may
do otherwise is a ``should``. Where liveness is concerned: a client still waiting at its run deadline, or a
process it started left alive, fails a ``must``; a client that ended, but over a budget it declared, or that left
alive what the *server* started, fails a ``should``.

A check name ``turn N …`` stands for one check per turn (``turn 1 status``, ``turn 2 status``, …), and
``server N: …`` is the check of the N-th server an outside client started. A name the contract does not
declare gets the contract's own level and citation (``tests/unit/test_check_registry.py`` finds such names on the
built-in catalogue and on the reference outside clients).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from contracts.checks.base import LEVELS, Check, Level, Maker
from contracts.record import SessionRecord

#: Where each contract is run: ``session`` on every session record (:func:`contracts.checks.run_all`),
#: ``outside`` for an outside client's run (``harness.outside``), ``scenario`` on a played scenario's record,
#: ``fuzz`` on a generated example (``harness.fuzz.invariants``, registered when the fuzzer is imported).
Suite = Literal["session", "outside", "scenario", "fuzz"]
Judge = Callable[[SessionRecord], list[Check]]
_F = TypeVar("_F", bound=Callable[..., object])
#: Names any contract's check may carry without declaring them (skips and failures the harness makes itself):
#: ``scenario`` (the scenario was not played on the target), ``contract`` (the contract raised), ``outside
#: client`` (not judged for an outside client).
OUTSIDE_CLIENT = "outside client"
GENERIC_NAMES = frozenset({"scenario", "contract", OUTSIDE_CLIENT})
_PER_TURN = re.compile(r"turn \d+ ")
#: An outside client that started several servers gets each server's checks as ``server N: <check>``.
_PER_SERVER = re.compile(r"server \d+: ")


@dataclass(frozen=True, slots=True)
class Rule:
    """One check a contract declares. ``None``: the contract's own level or citation."""

    name: str
    level: Level | None = None
    citation: str | None = None
    #: not judged for an outside client, and why (None: judged, or the contract's own reason)
    outside: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the catalogue: a check as the registry knows it, level and citation resolved."""

    contract: str
    name: str
    level: Level
    citation: str
    #: why an outside client is not judged on it; None: it is
    outside: str | None = None


class Contract:
    """A contract: its name, the level and citation its checks have unless they say otherwise, and its checks."""

    def __init__(
        self,
        name: str,
        *,
        citation: str,
        level: Level = "must",
        checks: Iterable[str | Rule] = (),
        suite: Suite = "session",
        outside: str | None = None,
    ) -> None:
        """``outside``: the whole contract is not judged for an outside client, and why."""
        if level not in LEVELS:
            raise ValueError(f"contract {name}: level {level!r} is not one of {LEVELS}")
        self.name, self.citation, self.level, self.suite = name, citation, level, suite
        self.outside = outside
        self.rules: dict[str, Rule] = {}
        self.judges: list[Callable[..., object]] = []
        self.add(*checks)

    def add(self, *checks: str | Rule) -> Contract:
        """Declare more checks (a module that judges part of another module's contract adds its own)."""
        for spec in checks:
            rule = Rule(spec) if isinstance(spec, str) else spec
            if rule.level is not None and rule.level not in LEVELS:
                raise ValueError(f"{self.name} / {rule.name}: level {rule.level!r} is not one of {LEVELS}")
            if rule.name in self.rules:
                raise ValueError(f"{self.name} / {rule.name} is declared twice")
            self.rules[rule.name] = rule
        return self

    def judge(self, fn: _F) -> _F:
        """Decorator: ``fn`` judges this contract; the contract joins the registry (once, in import order)."""
        self.judges.append(fn)
        register(self)
        return fn

    def declared(self, name: str) -> Rule | None:
        """The rule a check named ``name`` follows (``turn 3 status`` follows ``turn N status``); None if undeclared."""
        if _PER_SERVER.match(name):
            name = _PER_SERVER.sub("", name, count=1)
        rule = self.rules.get(name)
        if rule is None and _PER_TURN.match(name):
            rule = self.rules.get(_PER_TURN.sub("turn N ", name, count=1))
        return rule

    def rule_for(self, name: str) -> tuple[Level, str]:
        """The level and citation of the check named ``name``."""
        rule = self.declared(name)
        if rule is None:
            return self.level, self.citation
        return rule.level or self.level, self.citation if rule.citation is None else rule.citation

    def not_judged_outside(self, name: str) -> str | None:
        """Why an outside client is not judged on the check named ``name`` (None: it is)."""
        rule = self.declared(name)
        return self.outside or (rule.outside if rule is not None else None)

    def maker(self, record: SessionRecord) -> Maker:
        return Maker(record, self)

    def catalogue(self) -> list[Entry]:
        return [Entry(self.name, name, *self.rule_for(name), self.not_judged_outside(name)) for name in self.rules]

    def citations(self) -> set[str]:
        """Every citation a check of this contract can carry (its own, for a name it does not declare, too)."""
        return {self.citation} | {e.citation for e in self.catalogue()}

    def __repr__(self) -> str:
        return f"Contract({self.name!r}, suite={self.suite!r}, {len(self.rules)} checks)"


_REGISTRY: dict[str, Contract] = {}


def register(contract: Contract) -> Contract:
    """Add ``contract`` to the registry; a second, different contract of the same name is a programming error."""
    known = _REGISTRY.get(contract.name)
    if known is not None and known is not contract:
        raise ValueError(f"two contracts named {contract.name!r}")
    _REGISTRY.setdefault(contract.name, contract)
    return contract


def get(name: str) -> Contract | None:
    return _REGISTRY.get(name)


def contracts(suite: Suite | None = None) -> list[Contract]:
    """The registered contracts in registration order (the table's column order), of one suite or all."""
    return [c for c in _REGISTRY.values() if suite is None or c.suite == suite]


def names(suite: Suite | None = None) -> tuple[str, ...]:
    return tuple(c.name for c in contracts(suite))


def judge_of(name: str) -> Judge:
    """The one-record judge of contract ``name`` (a ``KeyError`` names an unknown contract)."""
    contract = _REGISTRY[name]
    if not contract.judges:
        raise KeyError(f"contract {name!r} has no judge of one record")
    return contract.judges[0]  # type: ignore[return-value]


def level_and_citation(contract: str, name: str) -> tuple[Level, str]:
    """For a check the harness builds itself (a skip for a scenario not played): what the registry says."""
    known = _REGISTRY.get(contract)
    return known.rule_for(name) if known is not None else ("must", "")


def catalogue() -> Iterator[Entry]:
    """Every declared check of every registered contract, level and citation resolved."""
    for contract in _REGISTRY.values():
        yield from contract.catalogue()


# --- the docs tables ------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _judged_contracts() -> list[Contract]:
    """The contracts that judge a client: the session ones in the table's column order, then the outside client's."""
    return contracts("session") + contracts("outside")


def levels_table() -> str:
    """Every check of the session and outside-client contracts with its level and citation: the table of
    ``docs/client-rules.md`` (a test asserts the docs hold exactly this)."""
    lines = ["| contract / check | level | rests on |", "|---|---|---|"]
    for contract in _judged_contracts():
        for entry in contract.catalogue():
            if entry.name not in GENERIC_NAMES:
                lines.append(f"| `{contract.name} / {entry.name}` | {entry.level} | {_cell(entry.citation)} |")
    return "\n".join(lines) + "\n"


def outside_table() -> str:
    """Every check an outside client (``run --client-cmd``) can get, with its level, its citation, and whether it
    is judged for such a client: the table of ``docs/clients.md`` (a test asserts the docs hold exactly this). A
    contract not judged at all for it is one row."""
    lines = ["| contract / check | level | rests on | for an outside client |", "|---|---|---|---|"]
    for contract in _judged_contracts():
        if contract.outside is not None:
            levels = "/".join(sorted({e.level for e in contract.catalogue()}))
            row = [f"`{contract.name}` (every check)", levels, contract.citation, f"not judged: {contract.outside}"]
            lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
            continue
        for entry in contract.catalogue():
            if entry.name in GENERIC_NAMES:
                continue
            judged = "judged" if entry.outside is None else f"not judged: {entry.outside}"
            name = f"`{contract.name} / {entry.name}`"
            lines.append(f"| {name} | {entry.level} | {_cell(entry.citation)} | {_cell(judged)} |")
    return "\n".join(lines) + "\n"


#: The generated tables and the documents whose marker lines fence them.
GENERATED: dict[str, tuple[str, Callable[[], str]]] = {
    "check-levels": ("docs/client-rules.md", levels_table),
    "outside-checks": ("docs/clients.md", outside_table),
}


def main() -> None:
    """Print each generated table between its marker lines, to paste into its document."""
    # The contract modules register themselves on import, in the package's module (not this __main__ copy).
    from contracts.checks import registry

    for name, (doc, make) in registry.GENERATED.items():
        print(f"<!-- generated: {name} (python -m contracts.checks.registry), in {doc} -->")
        print(make(), end="")
        print(f"<!-- end: {name} -->\n")


if __name__ == "__main__":
    main()
