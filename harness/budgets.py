"""The budgets a client declares: ``run --budget KEY=MS`` (repeatable) and ``run --budgets FILE`` (TOML).

A client is judged against the budgets it promises: one that waits ten minutes for a silent server by design
is not failed at the five seconds a scenario's plan allows itself. A declared budget replaces the scenario's
(``[client]`` of the scenario, the plan an adapter reads) for every scenario of the run, so the plan, the
checks and the run's deadline all follow it; a budget not declared stays the scenario's (the defaults of
docs/scenarios.md: turn 60 s, request 30 s, interrupt 2 s, teardown 3 s, start-up 30 s).

Keys (milliseconds, positive integers), each also by its short name:

- ``turn_timeout_ms`` (``turn``): how long the client waits on a turn before it gives up on it: its turn
  deadline or its inactivity timeout (a silent server is given up on after it);
- ``request_timeout_ms`` (``request``): how long it waits for the answer to a request;
- ``interrupt_budget_ms`` (``interrupt``): after a ``turn/interrupt``, for the interrupt's answer and the
  turn's ``turn/completed``, before it ends the server;
- ``teardown_ms`` (``teardown``): after its last turn, to end the server;
- ``startup_timeout_ms`` (``startup``): for the server's first answer (``initialize``), counted from the server
  process's start (a process start is slow on a loaded machine: not a request being late).

Capped: a budget at most :data:`MAX_BUDGET_MS` (15 min), a scenario's run deadline at most :data:`MAX_RUN_S`
(60 min). Anything else (an unknown key, a negative or non-integer value, a file that is a link, a FIFO or
larger than :data:`MAX_FILE_BYTES`, not TOML or nested deeper than
:data:`contracts.bounded_parse.MAX_DEPTH`) is a :class:`~contracts.exitcodes.UsageError` (exit 3) with one
clear line, before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contracts import bounded_parse, safe_read
from contracts.exitcodes import UsageError
from contracts.scenario import ClientPlan, Scenario

#: The budgets a client can declare, as the plan names them, with their short names.
KEYS: dict[str, str] = {
    "turn_timeout_ms": "turn",
    "request_timeout_ms": "request",
    "interrupt_budget_ms": "interrupt",
    "teardown_ms": "teardown",
    "startup_timeout_ms": "startup",
}
_BY_SHORT = {short: key for key, short in KEYS.items()}
MAX_BUDGET_MS = 15 * 60 * 1000
MAX_RUN_S = 60 * 60.0
#: A budgets file holds four numbers: anything larger is not one.
MAX_FILE_BYTES = 64 * 1024
#: ``--budget`` milliseconds: ASCII digits only, at most 12 of them.
_ASCII_INT = re.compile(r"-?[0-9]{1,12}")
#: Room in the run deadline over the budgets' sum: starting the client and the server, streaming, scheduling.
DEADLINE_EXTRA_S = 10.0


def _key(name: str, where: str) -> str:
    key = _BY_SHORT.get(name, name)
    if key not in KEYS:
        known = ", ".join(f"{k} ({s})" for k, s in KEYS.items())
        raise UsageError(f"{where}: unknown budget {name[:60]!r}; known: {known}")
    return key


def _ms(value: object, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where}: {key} must be an integer of milliseconds, not {str(value)[:60]!r}")
    if value <= 0:
        raise UsageError(f"{where}: {key} must be a positive number of milliseconds, not {value}")
    if value > MAX_BUDGET_MS:
        raise UsageError(f"{where}: {key} = {value} ms is over the cap of {MAX_BUDGET_MS} ms (15 min)")
    return value


def parse_flag(text: str) -> tuple[str, int]:
    """``KEY=MS`` of ``--budget``: the budget's plan name and its milliseconds."""
    where = f"--budget {text[:80]!r}"
    name, sep, value = text.partition("=")
    if not sep:
        raise UsageError(f"{where}: expected KEY=MS (for example turn_timeout_ms=600000)")
    key = _key(name.strip(), where)
    raw = value.strip()
    if not _ASCII_INT.fullmatch(raw):  # str.isdigit and int() take any script's digits: "١٢٣" is not a budget
        raise UsageError(f"{where}: {key} must be an integer of milliseconds, not {raw[:60]!r}")
    return key, _ms(int(raw), key, where)


def load_file(path: str | Path) -> dict[str, int]:
    """The budgets of a TOML file (top-level ``KEY = MS``), read bounded: never a link, a FIFO or a huge file."""
    where = f"--budgets {path}"
    try:
        data = safe_read.read_bounded(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except safe_read.TooLarge:
        raise UsageError(f"{where}: larger than {MAX_FILE_BYTES} bytes (a budgets file holds four numbers)") from None
    except OSError as exc:
        raise UsageError(f"--budgets: {safe_read.explain(path, exc)}") from None
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None
    try:
        table = bounded_parse.loads_toml(data.decode("utf-8"))
    except bounded_parse.TooDeep as exc:
        raise UsageError(f"{where}: {exc} (a budgets file holds four numbers)") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{where}: not TOML: {str(exc)[:200]}") from None
    out: dict[str, int] = {}
    for name, value in table.items():
        key = _key(name, where)
        if key in out:
            raise UsageError(f"{where}: {key} is given twice")
        out[key] = _ms(value, key, where)
    return out


def declared(flags: Sequence[str] = (), file: str | Path | None = None) -> dict[str, int]:
    """What the client declares: the file's budgets, then each ``--budget`` (a flag wins over the file)."""
    out = load_file(file) if file is not None else {}
    for text in flags:
        key, ms = parse_flag(text)
        out[key] = ms
    return out


def plan_budgets(plan: ClientPlan) -> dict[str, int]:
    """The four budgets of ``plan`` by their plan names (what the plan file and a record hold)."""
    return {key: int(getattr(plan, key)) for key in KEYS}


def with_budgets(scenario: Scenario, budgets: Mapping[str, int]) -> Scenario:
    """``scenario`` whose client plan has the declared ``budgets`` (the same scenario when none changes it).

    A scenario changed so is no longer its file (``source`` None): a fake that plays it is given it written out,
    and an outside client's ``played as given`` compares with what it was given."""
    changed: dict[str, Any] = {k: v for k, v in budgets.items() if getattr(scenario.client, k) != v}  # fields by name
    if not changed:
        return scenario
    client = dataclasses.replace(scenario.client, **changed)
    return dataclasses.replace(scenario, client=client, source=None)


def run_deadline_s(plan: ClientPlan, turns: int) -> float:
    """How long a client that keeps its budgets may take on a scenario of ``turns`` turns, the one formula of
    docs/clients.md (The run deadline): the start-up budget, then each turn its turn budget, its interrupt budget
    and one request budget (a bounded request after the turn gave up, a cleanup on a hung server), then the
    teardown, plus :data:`DEADLINE_EXTRA_S`."""
    per_turn = plan.turn_timeout_ms + plan.interrupt_budget_ms + plan.request_timeout_ms
    total_ms = plan.startup_timeout_ms + per_turn * max(1, turns) + plan.teardown_ms
    return total_ms / 1000 + DEADLINE_EXTRA_S


def scenario_deadline_s(scenario: Scenario) -> float:
    return run_deadline_s(scenario.client, len(scenario.turns))


def check_run_caps(scenarios: Iterable[Scenario]) -> None:
    """Refuse (exit 3) a scenario whose run deadline, under the declared budgets, is over :data:`MAX_RUN_S`."""
    for scenario in scenarios:
        deadline = scenario_deadline_s(scenario)
        if deadline > MAX_RUN_S:
            raise UsageError(
                f"--budget: scenario {scenario.name!r} would run up to {deadline:g} s under these budgets "
                f"({len(scenario.turns)} turn(s)), over the cap of {MAX_RUN_S:g} s (60 min)"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        metavar="KEY=MS",
        action="append",
        default=[],
        help="a budget the client keeps, in ms, replacing every scenario's (repeatable): turn_timeout_ms (turn), "
        "request_timeout_ms (request), interrupt_budget_ms (interrupt), teardown_ms (teardown), startup_timeout_ms "
        "(startup); at most 15 min",
    )
    parser.add_argument(
        "--budgets", metavar="FILE", help="the client's budgets as TOML (KEY = MS lines); --budget flags win over it"
    )


def from_args(args: argparse.Namespace) -> dict[str, int]:
    """The budgets ``run``'s arguments declare (a usage error, exit 3, for anything wrong in them)."""
    return declared(getattr(args, "budget", None) or (), getattr(args, "budgets", None))


def describe(budgets: Mapping[str, int]) -> str:
    """``turn_timeout_ms=600000, teardown_ms=3000`` (in the plan's order), for the terminal and the report."""
    return ", ".join(f"{k}={budgets[k]}" for k in KEYS if k in budgets)
