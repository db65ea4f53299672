"""Rules over a whole scenario, checked at load (``contracts.scenario_file.loads`` turns each broken
rule into a ``ScenarioError``, exit 2): what no single key can say on its own.

- the name is a safe slug (it names report folders and temp directories);
- the parsed TOML nests at most :data:`MAX_DEPTH` deep;
- a fault at a point that can be counted from the turn's scripted items comes at most that often
  (``crash at delta n=99`` on a 4-delta message never strikes), and session-level points belong to
  the first turn; the same for the client's ``delta`` / ``item_started`` / ``approval_pending``
  triggers;
- ``[expect]`` is consistent: a completed Result needs a completed ``turn/completed``, usage has
  reasoning <= output, ``server_exit`` is something the scenario can produce;
- a scenario whose faults only a fake produces declares a fake target;
- explicit item ids (``id``, ``call_id``) are unique within a turn.

A rule that depends on how the run goes (a point an earlier fault or the client's cancel cuts off)
cannot be judged here: the run's ``scenario`` check ``fault_not_struck`` catches those.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any, Final

from contracts.exitcodes import InvalidInput
from contracts.expect import Expect
from contracts.faults import FAULTS, POINTS, fake_only
from contracts.scenario import (
    CommandItem,
    Fault,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    TurnScript,
)

#: Scenario names: they become folder names under ``--report`` and in temp directories.
SCENARIO_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SCENARIO_NAME_RULE: Final = "a letter or digit, then up to 63 letters, digits, '_', '.' or '-'"
#: How deep tables and arrays may nest (the format needs 5; ``[expect] notes`` gets some room).
MAX_DEPTH: Final = 32
SERVER_STATUSES: Final = ("completed", "interrupted", "failed", "none")
#: ``server_exit`` values a kill gives (the client's SIGKILL / SIGTERM of the group), besides 0.
SIGNAL_EXITS: Final = (-9, -15)


class RuleBroken(InvalidInput, ValueError):
    """``key`` (dotted) breaks a rule: ``expected`` says what would be valid."""

    def __init__(self, key: str, expected: str, got: Any = None) -> None:
        super().__init__(f"{key}: expected {expected}")
        self.key, self.expected, self.got = key, expected, got


def is_safe_name(name: str) -> bool:
    return SCENARIO_NAME_RE.fullmatch(name) is not None


def check_depth(data: Any, limit: int = MAX_DEPTH) -> None:
    """Iteratively (a deep document must not exhaust the stack here either)."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > limit:
            raise RuleBroken(path or "(file)", f"tables and arrays nested at most {limit} deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))


def check(s: Scenario) -> None:
    """Every whole-scenario rule; raises :class:`RuleBroken` at the first one broken."""
    if not is_safe_name(s.name):
        raise RuleBroken("name", f"a safe name: {SCENARIO_NAME_RULE} (it defaults to the file's stem)", s.name)
    _check_faults(s)
    _check_actions(s)
    _check_ids(s)
    _check_expect(s)
    if s.fake_only and not ({"fake", "fake-process"} & set(s.targets)):
        kinds = ", ".join(sorted({f.kind for f in s.faults if fake_only(f.kind)}))
        what = f"faults {kinds}" if kinds else "[[methods]] answers"
        raise RuleBroken("targets", f"fake or fake-process ({what} only a fake produces)", list(s.targets))


# --- counting points from the script ------------------------------------------------------------


def played(script: TurnScript, max_retries: int) -> Iterator[ModelResponse]:
    """The model responses a turn can play, at most (no steer): the script in order while the model is
    called again (tools, retries), then the default follow-up, which ends the turn."""
    retries, index = 0, 0
    while True:
        response = script.response(index)
        yield response
        if response.end in ("http_error", "failed"):
            return
        if response.end == "disconnect":
            if retries >= max_retries:
                return
            retries += 1
        else:
            retries = 0
            if not any(isinstance(i, CommandItem | FileChangeItem) for i in response.items):
                return
        index += 1


def point_bounds(script: TurnScript, max_retries: int) -> Counter[str]:
    """How often each counted point can come in one turn that is not steered (an upper bound)."""
    bounds: Counter[str] = Counter()
    for response in played(script, max_retries):
        if response.end == "http_error":
            continue  # the request fails before anything streams
        cut = response.end != "completed"
        for item in response.items:
            if isinstance(item, MessageItem):
                bounds["item_started"] += 1
                bounds["delta"] += len(item.deltas)
            elif isinstance(item, ReasoningItem):
                bounds["item_started"] += 1
            elif not cut:
                bounds["item_started"] += 1
                bounds["approval_pending"] += int(item.approval)
        if not cut and response.usage is not None:
            bounds["usage"] += 1
    return bounds


def _steered(s: Scenario, turn: int) -> bool:
    """A steer folds new input into the turn and replays the model: its points can come more often."""
    return any(a.do == "steer" for a in s.client.actions_for(turn))


def _check_faults(s: Scenario) -> None:
    for t, script in enumerate(s.turns):
        bounds = None if _steered(s, t + 1) else point_bounds(script, s.config.stream_max_retries)
        for i, fault in enumerate(script.faults):
            key = f"turns[{t}].faults[{i}]"
            if POINTS[fault.at].scope == "session" and t > 0:
                raise RuleBroken(f"{key}.at", f"a turn point: {fault.at} is counted over the session and "
                                 "takes the first turn's faults only", fault.at)
            if bounds is not None and POINTS[fault.at].counted and fault.n > bounds[fault.at]:
                raise RuleBroken(
                    f"{key}.n",
                    f"at most {bounds[fault.at]}: turn {t + 1}'s script has {bounds[fault.at]} {fault.at} "
                    "point(s), so this fault would never strike",
                    fault.n,
                )


def _check_actions(s: Scenario) -> None:
    """The client's counted triggers must come: a cancel at delta 99 of a 4-delta turn never fires."""
    for i, action in enumerate(s.client.actions):
        if action.at == "started" and action.n > 1:
            raise RuleBroken(f"client.actions[{i}].n", "1: turn/started comes once a turn", action.n)
        if action.at not in ("delta", "item_started", "approval_pending") or action.turn > len(s.turns):
            continue
        if _steered(s, action.turn):
            continue
        script = s.turns[action.turn - 1]
        bounds = point_bounds(script, s.config.stream_max_retries)
        # What the client counts beyond the model's items: the user message's item/started, late deltas.
        bounds["item_started"] += 1
        bounds["delta"] += sum(_added_deltas(f) for f in script.faults)
        if action.n > bounds[action.at]:
            raise RuleBroken(
                f"client.actions[{i}].n",
                f"at most {bounds[action.at]}: turn {action.turn} has {bounds[action.at]} {action.at} event(s), "
                "so this action would never fire",
                action.n,
            )


def _added_deltas(fault: Fault) -> int:
    """The agent message deltas a fault adds to its turn (its row's ``adds_deltas`` parameter)."""
    spec = FAULTS.get(fault.kind)
    return int(fault.param(spec.adds_deltas)) if spec is not None and spec.adds_deltas else 0


def _exit_status(fault: Fault) -> int | None:
    """The status a fault ends the server with (its row's effect's ``exit`` parameter); None: it ends none."""
    spec = FAULTS.get(fault.kind)
    effect = spec.effect if spec is not None else None
    return int(fault.param(effect.exit)) if effect is not None and effect.exit else None


def _check_ids(s: Scenario) -> None:
    for t, script in enumerate(s.turns):
        ids = Counter(
            item.id if isinstance(item, MessageItem | ReasoningItem) else item.call_id
            for response in script.responses
            for item in response.items
        )
        ids.pop(None, None)
        for item_id, count in ids.items():
            if count > 1:
                raise RuleBroken(f"turns[{t}].responses", "item ids (id, call_id) unique within a turn", item_id)


def _check_expect(s: Scenario) -> None:
    _check_course(s, s.expect, "expect")
    for i, course in enumerate(s.expect.alternatives):
        _check_course(s, course, f"expect.or[{i}]")


def _check_course(s: Scenario, e: Expect, prefix: str) -> None:
    for i, turn in enumerate(e.turns):
        key = f"{prefix}.turns[{i}]"
        if turn.server_status is not None and turn.server_status not in SERVER_STATUSES:
            raise RuleBroken(f"{key}.server_status", "one of " + ", ".join(SERVER_STATUSES), turn.server_status)
        if "completed" in turn.statuses and turn.server_status not in (None, "completed"):
            raise RuleBroken(
                f"{key}.server_status", 'completed (a completed Result is a turn/completed "completed")',
                turn.server_status,
            )
        if turn.usage is not None and turn.usage.reasoning > turn.usage.output:
            raise RuleBroken(f"{key}.usage.reasoning", "reasoning <= output (output includes reasoning)",
                             turn.usage.reasoning)
    if e.server_exit is not None:
        crashes = sorted({code for f in s.faults if (code := _exit_status(f)) is not None})
        possible = [0, *SIGNAL_EXITS, *crashes]
        if e.server_exit not in possible:
            raise RuleBroken(
                f"{prefix}.server_exit",
                f"an exit status the scenario can produce: {', '.join(map(str, possible))} "
                "(0, a kill, or a crash fault's exit_code)",
                e.server_exit,
            )
    for i, allowance in enumerate(e.allow):
        if allowance.count is not None and allowance.count < 0:
            raise RuleBroken(f"{prefix}.allow[{i}].count", "an integer >= 0", allowance.count)
