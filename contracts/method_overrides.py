"""``[[methods]]`` in a scenario: script the answer to any client request (pure model and validation).

An entry names a client method of the default release (:mod:`contracts.releases`) and says what the fake does with its
requests: answer with ``result`` or ``error``, after ``delay_ms``, or strike a ``fault`` of point ``request`` from the
fault registry (``no_answer``, ``crash`` before answering, ``hang``...). ``n`` limits the entry to the n-th request of
that method (0: every one). A ``result`` must validate against the method's response in the pinned schema, unless the
entry declares ``schema_violation = "why"``; an ``error`` needs an integer ``code`` and a ``message``. Only fakes
honour ``[[methods]]``: the real target skips such a scenario.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from contracts.exitcodes import InvalidInput
from contracts.faults import MAX_DELAY_MS, MAX_OCCURRENCE, FaultProblem, check_fault

MAX_METHOD_OVERRIDES: Final = 1000
MAX_MESSAGE_CHARS: Final = 64 * 1024
MAX_REASON_CHARS: Final = 1024
KEYS: Final = ("name", "result", "error", "delay_ms", "fault", "n", "schema_violation")
INT32: Final = 2**31
#: The fault ledger's ``turn`` for a ``[[methods]]`` fault; its ``index`` is the entry's position in
#: ``[[methods]]`` (turn faults use the 0-based turn and the fault's position in the turn).
LEDGER_TURN: Final = -1


@dataclass(frozen=True, slots=True)
class MethodOverride:
    name: str
    answer: str | None = None  # "result" / "error" / None: the fake's own answer (after delay_ms)
    value: Any = None  # the result, or the error object {code, message[, data]}
    delay_ms: int = 0
    fault: Any = None  # a contracts.scenario.Fault at point "request", or None
    n: int = 0  # 0: every request of the method; k: only the k-th
    schema_violation: str | None = None

    def applies(self, occurrence: int) -> bool:
        return self.n in (0, occurrence)


class OverrideProblem(InvalidInput, ValueError):
    def __init__(self, key: str, expected: str, got: Any = None) -> None:
        super().__init__(f"{key}: expected {expected}")
        self.key, self.expected, self.got = key, expected, got


def client_methods() -> frozenset[str]:
    """Every client request method of the default release (experimental ones and those beyond its schema)."""
    from contracts import releases

    return releases.default().methods.known


def schema_problem(method: str, result: Any) -> str | None:
    """Why the default release's pinned schema rejects ``result`` as the answer to ``method`` (None: it accepts it)."""
    from contracts.validator import Validator

    validator = Validator.for_release(None, experimental=True)
    violations = validator.validate({"id": 0, "result": result}, "s2c", method)
    return str(violations[0]) if violations else None


def _default_line() -> str:
    from contracts import releases

    return releases.default().version_line


def parse(entry: Mapping[str, Any], make_fault: Any) -> MethodOverride:
    """One ``[[methods]]`` table; ``make_fault(kind, params)`` builds the scenario's Fault. Raises OverrideProblem."""
    for key in entry:
        if key not in KEYS:
            raise OverrideProblem(key, f"a known key (known: {', '.join(KEYS)})")
    name = entry.get("name")
    if not isinstance(name, str):
        raise OverrideProblem("name", "a client method name (required)", name)
    if name not in client_methods():
        raise OverrideProblem("name", f"a client method of {_default_line()}", name)
    given = [k for k in ("result", "error", "fault") if k in entry]
    if len(given) > 1:
        raise OverrideProblem(given[1], f"only one of result, error, fault (got {', '.join(given)})")
    delay = entry.get("delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_DELAY_MS:
        raise OverrideProblem("delay_ms", f"an integer between 0 and {MAX_DELAY_MS}", delay)
    n = entry.get("n", 0)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_OCCURRENCE:
        raise OverrideProblem("n", f"an integer between 0 (every request) and {MAX_OCCURRENCE}", n)
    reason = entry.get("schema_violation")
    if reason is not None and (not isinstance(reason, str) or not 1 <= len(reason) <= MAX_REASON_CHARS):
        raise OverrideProblem("schema_violation", f"a reason of 1 to {MAX_REASON_CHARS} characters", reason)
    if not given and delay == 0:
        raise OverrideProblem("result", "one of result, error, fault, or a delay_ms")
    answer, value, fault = None, None, None
    if "result" in entry:
        answer, value = "result", entry["result"]
        problem = schema_problem(name, value)
        if problem is not None and reason is None:
            raise OverrideProblem(
                "result", f'a result the pinned schema accepts, or schema_violation = "why" ({problem})'
            )
    elif "error" in entry:
        answer, value = "error", _error(entry["error"])
    elif "fault" in entry:
        fault = _fault(entry["fault"], make_fault)
    return MethodOverride(name, answer, value, delay, fault, n, reason)


def _error(error: Any) -> dict[str, Any]:
    if not isinstance(error, Mapping):
        raise OverrideProblem("error", "a table {code = ..., message = ...[, data = ...]}", error)
    unknown = sorted(set(error) - {"code", "message", "data"})
    if unknown:
        raise OverrideProblem(f"error.{unknown[0]}", "code, message or data")
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, int) or not -INT32 <= code < INT32:
        raise OverrideProblem("error.code", "a 32-bit integer", code)
    message = error.get("message")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS:
        raise OverrideProblem("error.message", f"a string of at most {MAX_MESSAGE_CHARS} characters", message)
    out: dict[str, Any] = {"code": code, "message": message}
    if "data" in error:
        out["data"] = error["data"]
    return out


def _fault(value: Any, make_fault: Any) -> Any:
    kind: object  # as the table says: check_fault judges it
    if isinstance(value, str):
        kind, params = value, {}
    elif isinstance(value, Mapping):
        kind, params = value.get("kind"), {k: v for k, v in value.items() if k != "kind"}
    else:
        raise OverrideProblem("fault", 'a fault kind ("no_answer") or a table {kind = ..., ...}', value)
    try:
        kind, _point, _n, checked = check_fault(kind, "request", 1, params)
    except FaultProblem as exc:
        raise OverrideProblem(f"fault.{exc.key}", exc.expected, exc.got) from None
    return make_fault(kind, checked)


def to_dict(o: MethodOverride) -> dict[str, Any]:
    out: dict[str, Any] = {"name": o.name}
    if o.answer is not None:
        out[o.answer] = o.value
    if o.fault is not None:
        out["fault"] = {"kind": o.fault.kind, **o.fault.params}
    if o.delay_ms:
        out["delay_ms"] = o.delay_ms
    if o.n:
        out["n"] = o.n
    if o.schema_violation is not None:
        out["schema_violation"] = o.schema_violation
    return out
