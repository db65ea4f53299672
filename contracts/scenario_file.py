"""Reading and writing scenario TOML files (stdlib ``tomllib`` in, ``tomli-w`` out).

Every error names the file, the key and what was expected, so a user fixes a scenario without
reading our code. The format is documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import builtins
import re
import tomllib
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson
import tomli_w

from contracts import bounded_parse, budget_defaults, method_overrides, probe_refs, scenario_rules
from contracts.exitcodes import InvalidInput
from contracts.expect import RELEASE_KEYS, RESULT_STATUSES, TRACE_EXPECTATIONS, Allowance, Expect, ExpectTurn
from contracts.faults import MAX_DELAY_MS, MAX_OCCURRENCE, FaultProblem, check_fault
from contracts.scenario import (
    ACTION_TRIGGERS,
    ACTIONS,
    DECISIONS,
    DEFAULT_INPUT,
    DEFAULT_JUSTIFICATION,
    DEFAULT_STEER_TEXT,
    MAX_PROBE_LINE_BYTES,
    MAX_PROBE_WAIT_MS,
    MAX_PROBE_WAITS_MS,
    MAX_PROBES,
    PROBE_POINTS,
    RESPONSE_ENDS,
    TARGETS,
    ClientAction,
    ClientFile,
    ClientPlan,
    ClientProbe,
    CommandItem,
    Fault,
    FileChangeItem,
    MessageItem,
    ModelItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    ServerConfig,
    TurnScript,
    Usage,
    default_approval_policy,
)
from contracts.text import one_line
from contracts.usage import UsageBuckets

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
#: The bound of an integer with no bound of its own (token counts): far above any real count.
MAX_INT = 10**12
#: Deltas of one message or reasoning item (``chunks``, or the ``deltas`` list).
MAX_CHUNKS = 100_000
#: An agent message built with ``repeat``: large frames are legal (a 16 MiB message is one), within the
#: client's 32 MiB line cap and the fake's bound on a line built in memory.
MAX_MESSAGE_BYTES = 24 * 1024 * 1024
#: Reconnects of a cut stream (``[config] stream_max_retries``).
MAX_RETRIES = 100
T = TypeVar("T")
RELEASE_RE = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}")
MAX_RELEASE_OVERRIDES = 16
SWITCH_CONDITION_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,63}(=[A-Za-z0-9_.-]{1,64})?")


class ScenarioError(InvalidInput, ValueError):
    """A scenario file that does not say what it must. ``str()`` names file, key and expectation."""

    def __init__(self, source: str, key: str, expected: str, got: Any = None) -> None:
        got_text = "" if got is None else f", got {got!r}"[:200]
        # A key is the file's text too (an unknown key of 1 MB): clipped, so the message stays a line.
        super().__init__(f"{source}: {one_line(key, 200)}: expected {expected}{got_text}")
        self.source = source
        self.key = key
        self.expected = expected


class _Reader:
    """Typed access to one TOML table, reporting errors at their dotted key path."""

    def __init__(self, source: str, table: dict[str, Any], path: str) -> None:
        self.source, self.data, self.path = source, table, path
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, expected: str, got: Any = None) -> ScenarioError:
        return ScenarioError(self.source, self.key(name), expected, got)

    def get(self, name: str, kind: type[T] | tuple[type, ...], default: Any, expected: str) -> Any:
        self.used.add(name)
        if name not in self.data:
            return default
        value = self.data[name]
        if isinstance(value, bool) and kind in (int, float):
            raise self.error(name, expected, value)
        if not isinstance(value, kind):
            raise self.error(name, expected, value)
        return value

    def int(self, name: str, default: int | None, minimum: int = 0, maximum: int = MAX_INT) -> int:
        """An integer in ``[minimum, maximum]``: every number a file gives is bounded (docs/scenarios.md)."""
        expected = f"an integer between {minimum} and {maximum}"
        value = self.get(name, int, default, expected)
        if value is None:
            raise self.error(name, f"{expected} (required)")
        if not minimum <= value <= maximum:
            raise self.error(name, expected, value)
        return value

    def str(self, name: str, default: str | None, choices: tuple[str, ...] | None = None) -> str:
        expected = f"one of {', '.join(choices)}" if choices else "a string"
        value = self.get(name, str, default, expected)
        if value is None:
            raise self.error(name, expected + " (required)")
        if choices and value not in choices:
            raise self.error(name, expected, value)
        return value

    def bool(self, name: builtins.str, default: bool) -> bool:
        return self.get(name, bool, default, "true or false")

    def strs(self, name: builtins.str, choices: tuple[builtins.str, ...] | None = None) -> tuple[builtins.str, ...]:
        value = self.get(name, list, [], "a list of strings")
        for i, v in enumerate(value):
            if not isinstance(v, str) or (choices and v not in choices):
                expected = f"one of {', '.join(choices)}" if choices else "a string"
                raise ScenarioError(self.source, f"{self.key(name)}[{i}]", expected, v)
        return tuple(value)

    def tables(self, name: builtins.str) -> list[_Reader]:
        value = self.get(name, list, [], "an array of tables")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise ScenarioError(self.source, f"{self.key(name)}[{i}]", "a table", item)
            out.append(_Reader(self.source, item, f"{self.key(name)}[{i}]"))
        return out

    def table(self, name: builtins.str) -> _Reader:
        value = self.get(name, dict, {}, "a table")
        return _Reader(self.source, value, self.key(name))

    def done(self, allowed_extra: tuple[builtins.str, ...] = ()) -> None:
        unknown = sorted(set(self.data) - self.used - set(allowed_extra))
        if unknown:
            raise self.error(unknown[0], f"a known key (known: {', '.join(sorted(self.used)) or 'none'})")


def split_text(text: str, chunks: int) -> tuple[str, ...]:
    """Split ``text`` into ``chunks`` nearly equal, non-empty parts (fewer if the text is short)."""
    chunks = max(1, min(chunks, len(text) or 1))
    size, extra = divmod(len(text), chunks)
    parts, start = [], 0
    for i in range(chunks):
        end = start + size + (1 if i < extra else 0)
        parts.append(text[start:end])
        start = end
    return tuple(p for p in parts if p) or (text,)


def _deltas(r: _Reader, text: str) -> tuple[str, ...]:
    if "deltas" in r.data:
        deltas = r.strs("deltas")
        if len(deltas) > MAX_CHUNKS:
            raise r.error("deltas", f"at most {MAX_CHUNKS} deltas", len(deltas))
        if "".join(deltas) != text:
            raise r.error("deltas", "strings that join to `text`", deltas)
        return deltas
    return split_text(text, r.int("chunks", 1, minimum=1, maximum=MAX_CHUNKS))


def _item(r: _Reader) -> ModelItem:
    kind = r.str("type", None, ("message", "reasoning", "command", "file_change"))
    item: ModelItem
    if kind == "message":
        text = r.str("text", None)
        delay = r.int("delay_ms", 0, maximum=MAX_DELAY_MS)
        repeat = r.int("repeat", 1, minimum=1, maximum=MAX_MESSAGE_BYTES)
        if repeat > 1:
            if len(text.encode()) * repeat > MAX_MESSAGE_BYTES:
                raise r.error("repeat", f"text x repeat at most {MAX_MESSAGE_BYTES} bytes", repeat)
            if "deltas" in r.data:
                raise r.error("deltas", "chunks, not deltas, with repeat (the deltas would be the large text)")
            text *= repeat
        item = MessageItem(text, _deltas(r, text), delay, r.get("id", str, None, "a string"), repeat=repeat)
    elif kind == "reasoning":
        text = r.str("summary", None)
        delay = r.int("delay_ms", 0, maximum=MAX_DELAY_MS)
        item = ReasoningItem(text, _deltas(r, text), delay, r.get("id", str, None, "a string"))
    elif kind == "command":
        item = CommandItem(
            command=r.str("command", None),
            call_id=r.get("call_id", str, None, "a string"),
            approval=r.bool("approval", False),
            justification=r.str("justification", DEFAULT_JUSTIFICATION),
            output=r.str("output", ""),
            exit_code=r.int("exit_code", 0, minimum=-255, maximum=255),
            duration_ms=r.int("duration_ms", 0, maximum=MAX_DELAY_MS),
        )
    else:
        item = FileChangeItem(
            path=r.str("path", None),
            content=r.str("content", ""),
            call_id=r.get("call_id", str, None, "a string"),
            approval=r.bool("approval", True),
        )
    r.done()
    return item


def _usage(r: _Reader, name: str) -> Usage | None:
    if name not in r.data:
        r.used.add(name)
        return None
    u = r.table(name)
    usage = Usage(u.int("input", 0), u.int("cached", 0), u.int("output", 0), u.int("reasoning", 0))
    u.done()
    if usage.cached > usage.input:
        raise r.error(name, "cached <= input (input includes cached tokens)", usage.cached)
    if usage.reasoning > usage.output:
        raise r.error(name, "reasoning <= output (output includes reasoning tokens)", usage.reasoning)
    return usage


def _response(r: _Reader) -> ModelResponse:
    response = ModelResponse(
        items=tuple(_item(i) for i in r.tables("items")),
        usage=_usage(r, "usage"),
        end=r.str("end", "completed", RESPONSE_ENDS),  # type: ignore[arg-type]
        error=r.str("error", "model error"),
        http_status=r.int("http_status", 500, minimum=100, maximum=599),
    )
    r.done()
    return response


def _fault(r: _Reader) -> Fault:
    """One ``[[turns.faults]]`` table, checked against the fault registry (kinds, points, bounds)."""
    r.used.update(r.data)  # the registry names unknown keys itself
    params = {k: v for k, v in r.data.items() if k not in ("kind", "at", "n")}
    try:
        kind, at, n, checked = check_fault(r.data.get("kind"), r.data.get("at"), r.data.get("n", 1), params)
    except FaultProblem as exc:
        raise r.error(exc.key, exc.expected, exc.got) from None
    if at == "request":
        raise r.error("at", "a turn's point (request faults go on a [[methods]] entry)", at)
    return Fault(kind, at, n, checked)


def _methods(r: _Reader) -> tuple[method_overrides.MethodOverride, ...]:
    """The ``[[methods]]`` tables: scripted answers to client requests (contracts.method_overrides)."""
    tables = r.tables("methods")
    if len(tables) > method_overrides.MAX_METHOD_OVERRIDES:
        raise r.error("methods", f"at most {method_overrides.MAX_METHOD_OVERRIDES} entries", len(tables))
    out = []
    for t in tables:
        try:
            out.append(method_overrides.parse(t.data, lambda kind, params: Fault(kind, "request", 1, params)))
        except method_overrides.OverrideProblem as exc:
            raise t.error(exc.key, exc.expected, exc.got) from None
    return tuple(out)


def _turn(r: _Reader) -> TurnScript:
    turn = TurnScript(
        input=r.str("input", DEFAULT_INPUT),
        responses=tuple(_response(x) for x in r.tables("responses")),
        faults=tuple(_fault(x) for x in r.tables("faults")),
    )
    r.done()
    return turn


def _client(r: _Reader) -> ClientPlan:
    actions = []
    for a in r.tables("actions"):
        action = ClientAction(
            turn=a.int("turn", 1, minimum=1, maximum=MAX_OCCURRENCE),
            do=a.str("do", None, ACTIONS),  # type: ignore[arg-type]
            at=a.str("at", "started", ACTION_TRIGGERS),
            n=a.int("n", 1, minimum=1, maximum=MAX_OCCURRENCE),
            delay_ms=a.int("delay_ms", 0, maximum=MAX_DELAY_MS),
            text=a.str("text", DEFAULT_STEER_TEXT),
        )
        a.done()
        actions.append(action)
    ms: dict[str, Any] = {"minimum": 1, "maximum": MAX_DELAY_MS}  # a budget: positive, bounded
    plan = ClientPlan(
        approval=r.str("approval", "accept", DECISIONS),
        approvals=r.strs("approvals", DECISIONS),
        approval_delay_ms=r.int("approval_delay_ms", 0, maximum=MAX_PROBE_WAIT_MS),
        actions=tuple(actions),
        interrupt_budget_ms=r.int("interrupt_budget_ms", budget_defaults.INTERRUPT_BUDGET_MS, **ms),
        request_timeout_ms=r.int("request_timeout_ms", budget_defaults.REQUEST_TIMEOUT_MS, **ms),
        turn_timeout_ms=r.int("turn_timeout_ms", budget_defaults.TURN_TIMEOUT_MS, **ms),
        teardown_ms=r.int("teardown_ms", budget_defaults.TEARDOWN_MS, **ms),
        startup_timeout_ms=r.int("startup_timeout_ms", budget_defaults.STARTUP_TIMEOUT_MS, **ms),
        experimental_api=r.bool("experimental_api", False),
        opt_out=r.strs("opt_out"),
        handshake=r.bool("handshake", True),
        play_turns=r.bool("play_turns", True),
        probes=tuple(_probe(p) for p in r.tables("probe")),
        files=_files(r),
    )
    r.done()
    if len(plan.probes) > MAX_PROBES:
        raise r.error("probe", f"at most {MAX_PROBES} [[client.probe]] steps", len(plan.probes))
    waits = sum(p.wait_ms for p in plan.probes)
    if waits > MAX_PROBE_WAITS_MS:  # 200 steps of 60 s each would be a legal 3.3-hour run
        raise r.error("probe", f"wait_ms that add up to at most {MAX_PROBE_WAITS_MS} over all steps", waits)
    _check_references(r, plan.probes)
    return plan


def _files(r: _Reader) -> tuple[ClientFile, ...]:
    """``[[client.files]]``: small text files put in the work directory before the session (bounded)."""
    tables = r.tables("files")
    if len(tables) > probe_refs.MAX_FILES:
        raise r.error("files", f"at most {probe_refs.MAX_FILES} [[client.files]]", len(tables))
    out: list[ClientFile] = []
    for f in tables:
        file = ClientFile(path=f.str("path", None), text=f.str("text", None))
        f.done()
        problem = probe_refs.check_file_path(file.path)
        if problem:
            raise f.error("path", problem, file.path)
        if len(file.text.encode()) > probe_refs.MAX_FILE_BYTES:
            raise f.error("text", f"at most {probe_refs.MAX_FILE_BYTES} bytes", len(file.text.encode()))
        for other in out:  # one path twice, or a file where another needs a folder
            if file.path == other.path or file.path.startswith(other.path + "/") or other.path.startswith(
                file.path + "/"
            ):
                raise f.error("path", f"a path that does not clash with {other.path!r}", file.path)
        out.append(file)
    return tuple(out)


def _check_references(r: _Reader, probes: tuple[ClientProbe, ...]) -> None:
    """Every ``${...}`` in a step is known, and an ``${answer.<step>...}`` names a request step taken before it."""
    order = sorted(range(len(probes)), key=lambda i: (PROBE_POINTS.index(probes[i].at), i))
    taken: dict[str, ClientProbe] = {}
    ids = [p.id for p in probes if p.id is not None]
    if len(ids) != len(set(ids)):
        raise r.error("probe", "a different id on every step", sorted({x for x in ids if ids.count(x) > 1}))
    for i in order:
        probe = probes[i]
        key = f"probe[{i}]"
        try:
            found = probe_refs.placeholders(probe.params) + probe_refs.placeholders(probe.raw)
        except probe_refs.RefError as exc:
            raise r.error(key, f"known placeholders ({exc})") from None
        if len(found) > probe_refs.MAX_PLACEHOLDERS:
            raise r.error(key, f"at most {probe_refs.MAX_PLACEHOLDERS} placeholders", len(found))
        for ref in found:
            if isinstance(ref, probe_refs.AnswerRef):
                earlier = taken.get(ref.step)
                if earlier is None:
                    raise r.error(key, f"${{answer.{ref.step}...}} to name a step taken before this one", ref.step)
                if earlier.send is None and earlier.raw is None:
                    raise r.error(key, f"${{answer.{ref.step}...}} to name a request step (send or raw)", ref.step)
                if earlier.no_wait:
                    raise r.error(key, f"${{answer.{ref.step}...}} to name a step that waits for its answer", ref.step)
        taken[str(i)] = probe
        if probe.id is not None:
            taken[probe.id] = probe


def _probe(r: _Reader) -> ClientProbe:
    """One ``[[client.probe]]`` step: exactly one of ``send``, ``raw``, ``close_stdin``."""
    given = [k for k in ("send", "raw", "close_stdin") if k in r.data]
    if len(given) != 1:
        raise r.error("send", "exactly one of send, raw, close_stdin", ", ".join(given) or None)
    params = r.get("params", dict, None, "a table (the request's params)")
    if params is not None and "send" not in r.data:
        raise r.error("params", "params only with send")
    probe = ClientProbe(
        at=r.str("at", "thread", PROBE_POINTS),
        send=r.get("send", str, None, "a method name"),
        params=params,
        raw=r.get("raw", str, None, "one line of text"),
        close_stdin=r.bool("close_stdin", False),
        wait_ms=r.int("wait_ms", 0),
        id=r.get("id", str, None, "a step name (a letter, then letters, digits, _ or -; at most 64)"),
        until=r.get("until", str, None, "a server notification's method"),
        no_wait=r.bool("no_wait", False),
    )
    r.done()
    if probe.no_wait and probe.send is None:
        raise r.error("no_wait", "no_wait only with send (a raw line never waits unless it is a request)")
    if probe.id is not None and not probe_refs.STEP_ID_RE.match(probe.id):
        raise r.error("id", "a step name (a letter, then letters, digits, _ or -; at most 64)", probe.id)
    if probe.until is not None and not (0 < len(probe.until) <= 128):
        raise r.error("until", "a server notification's method (1 to 128 characters)", probe.until)
    if probe.params is not None and len(orjson.dumps(probe.params)) > probe_refs.MAX_PARAMS_BYTES:
        raise r.error("params", f"at most {probe_refs.MAX_PARAMS_BYTES} bytes")
    if probe.send is not None and not probe.send:
        raise r.error("send", "a method name", probe.send)
    if "close_stdin" in r.data and not probe.close_stdin:
        raise r.error("close_stdin", "true (leave the step out otherwise)", False)
    if probe.raw is not None:
        if "\n" in probe.raw or "\r" in probe.raw:
            raise r.error("raw", "one line (no line break; the client adds the newline)", probe.raw)
        if len(probe.raw.encode()) > MAX_PROBE_LINE_BYTES:
            raise r.error("raw", f"at most {MAX_PROBE_LINE_BYTES} bytes", len(probe.raw.encode()))
    if probe.wait_ms > MAX_PROBE_WAIT_MS:
        raise r.error("wait_ms", f"an integer between 0 and {MAX_PROBE_WAIT_MS}", probe.wait_ms)
    return probe


#: ``[[expect.or]]`` tables a scenario may hold (each a whole truth: a few courses, never a search)
MAX_COURSES = 8


def _expect_turns(r: _Reader) -> list[ExpectTurn]:
    """``[[expect.turns]]`` of ``r``: one turn's truth each."""
    turns = []
    for t in r.tables("turns"):
        usage = None
        if "usage" in t.data:
            u = t.table("usage")
            usage = UsageBuckets(
                u.int("input", 0),
                u.int("cache_read", 0),
                u.int("cache_write", 0),
                u.int("output", 0),
                u.int("reasoning", 0),
            )
            u.done()
        else:
            t.used.add("usage")
        server_status = t.get("server_status", str, None, "completed, interrupted, failed or none")
        status = t.str("status", None, RESULT_STATUSES)
        also = tuple(s for s in dict.fromkeys(t.strs("also", RESULT_STATUSES)) if s != status)
        turns.append(ExpectTurn(status, usage, server_status, also))  # type: ignore[arg-type]
        t.done()
    return turns


def _expect(r: _Reader, nested: bool = False) -> Expect:
    """``[expect]``, or (``nested``) one ``[[expect.or]]``: the same keys, a required ``why``, no ``or`` nor
    ``release`` of its own (the release overrides of ``[expect]`` apply to every course)."""
    turns = _expect_turns(r)
    allow = []
    for a in r.tables("allow"):
        count = a.get("count", int, None, "an integer")
        allow.append(Allowance(a.str("contract", None), a.str("what", None), count, a.str("reason", "")))
        a.done()
    server_exit = r.get("server_exit", int, None, "an integer")
    alternatives: tuple[Expect, ...] = ()
    why = ""
    if nested:
        why = r.str("why", None)
        if not why.strip() or len(why) > 500:
            raise r.error("why", "one line saying why a correct client may take this course (1 to 500 characters)")
    else:
        courses = r.tables("or")
        if len(courses) > MAX_COURSES:
            raise r.error("or", f"at most {MAX_COURSES} [[expect.or]] courses", len(courses))
        alternatives = tuple(_expect(c, nested=True) for c in courses)
    expect = Expect(
        turns=tuple(turns),
        server_trace=r.str("server_trace", "closed", TRACE_EXPECTATIONS),  # type: ignore[arg-type]
        client_trace=r.str("client_trace", "closed", TRACE_EXPECTATIONS),  # type: ignore[arg-type]
        server_exit=server_exit,
        allow=tuple(allow),
        notes=r.get("notes", dict, {}, "a table"),
        releases={} if nested else _expect_releases(r.table("release")),
        switches={} if nested else _expect_switches(r.table("switch")),
        alternatives=alternatives,
        why=why,
    )
    r.done()
    return expect


def _release_name(r: _Reader, name: str, value: str) -> str:
    if not RELEASE_RE.fullmatch(value):
        raise r.error(name, "a codex-cli release version (MAJOR.MINOR.PATCH)", value)
    return value


def _expect_releases(r: _Reader) -> dict[str, dict[str, Any]]:
    """``[expect.release."X.Y.Z"]``: the trace verdicts and server exit that differ on that release."""
    out: dict[str, dict[str, Any]] = {}
    if len(r.data) > MAX_RELEASE_OVERRIDES:
        raise r.error("(table)", f"at most {MAX_RELEASE_OVERRIDES} releases", len(r.data))
    for release in list(r.data):
        _release_name(r, release, release)
        out[release] = _overrides(r.table(release))
    r.done()
    return out


def _expect_switches(r: _Reader) -> dict[str, dict[str, Any]]:
    """``[expect.switch.NAME]`` / ``[expect.switch."NAME=VALUE"]``: what differs on a release whose learned switch
    is on (has VALUE), e.g. a known server bug; the release's version plays no part."""
    out: dict[str, dict[str, Any]] = {}
    if len(r.data) > MAX_RELEASE_OVERRIDES:
        raise r.error("(table)", f"at most {MAX_RELEASE_OVERRIDES} switches", len(r.data))
    for condition in list(r.data):
        if not SWITCH_CONDITION_RE.fullmatch(condition):
            raise r.error(condition, "a release switch: NAME or NAME=VALUE", condition)
        t = r.table(condition)
        turns = _expect_turns(t) if "turns" in t.data else None  # the whole [[...turns]] list, replaced
        out[condition] = _overrides(t, ("turns",)) | ({"turns": tuple(turns)} if turns is not None else {})
    r.done()
    return out


def _overrides(t: _Reader, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for key in ("server_trace", "client_trace"):
        if key in t.data:
            overrides[key] = t.str(key, None, TRACE_EXPECTATIONS)
    if "server_exit" in t.data:
        overrides["server_exit"] = t.int("server_exit", None, maximum=255)
    t.done((*RELEASE_KEYS, *extra))
    return overrides


def _config(r: _Reader, turns: tuple[TurnScript, ...]) -> ServerConfig:
    config = ServerConfig(
        approval_policy=r.str("approval_policy", default_approval_policy(turns)),
        sandbox=r.str("sandbox", "read-only", ("read-only", "workspace-write", "danger-full-access")),
        stream_max_retries=r.int("stream_max_retries", 0, maximum=MAX_RETRIES),
        model=r.str("model", "mock-model"),
        auto_review=r.str("auto_review", "allow", ("allow", "deny")),
    )
    r.done()
    return config


def loads(text: str, source: str = "<scenario>", name: str | None = None) -> Scenario:
    """Parse scenario TOML text. ``name`` defaults to the file stem of ``source``."""
    try:
        data = bounded_parse.loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, "(file)", "valid TOML", str(exc)) from None
    except bounded_parse.TooDeep:  # measured before tomllib recurses per nested inline array or table
        limit = scenario_rules.MAX_DEPTH
        raise ScenarioError(source, "(file)", f"tables and arrays nested at most {limit} deep") from None
    try:
        scenario_rules.check_depth(data)
    except scenario_rules.RuleBroken as exc:
        raise ScenarioError(source, exc.key, exc.expected) from None
    r = _Reader(source, data, "")
    turns = tuple(_turn(t) for t in r.tables("turns"))
    if not turns and not _has_probes(data):
        raise r.error("turns", "at least one [[turns]] table (or [[client.probe]] steps)")
    scenario = Scenario(
        name=r.str("name", name or Path(source).stem),
        description=r.str("description", None),
        turns=turns,
        client=_client(r.table("client")),
        expect=_expect(r.table("expect")),
        config=_config(r.table("config"), turns),
        targets=r.strs("targets", TARGETS) or TARGETS,
        release=_release_name(r, "release", r.str("release", "")) if "release" in data else None,
        source=source,
        methods=_methods(r),
    )
    r.done()
    _check_consistency(scenario, source)
    try:
        scenario_rules.check(scenario)
    except scenario_rules.RuleBroken as exc:
        raise ScenarioError(source, exc.key, exc.expected, exc.got) from None
    return scenario


def _has_probes(data: dict[str, Any]) -> bool:
    client = data.get("client")
    return isinstance(client, dict) and bool(client.get("probe"))


def _check_probes(s: Scenario, source: str) -> None:
    plan = s.client
    if not plan.play_turns and not plan.probes:
        raise ScenarioError(source, "client.play_turns", "true unless [[client.probe]] steps start the turns")
    if not plan.handshake and s.turns and plan.play_turns:
        raise ScenarioError(source, "client.handshake", "true when the scenario has [[turns]] (a turn needs a thread)")
    closing = [i for i, p in enumerate(plan.probes) if p.close_stdin]
    if not closing:
        return
    i = closing[0]
    later_point = PROBE_POINTS.index(plan.probes[i].at)
    if i != len(plan.probes) - 1 or any(PROBE_POINTS.index(p.at) > later_point for p in plan.probes):
        raise ScenarioError(source, f"client.probe[{i}].close_stdin", "the last step (nothing can be sent after it)")
    if s.turns and plan.play_turns and plan.probes[i].at != "end":
        raise ScenarioError(source, f"client.probe[{i}].at", 'end (turns follow; nothing can be sent after it)')


def _check_consistency(s: Scenario, source: str) -> None:
    _check_probes(s, source)
    for i, action in enumerate(s.client.actions):
        if action.turn > len(s.turns):
            raise ScenarioError(
                source, f"client.actions[{i}].turn", f"a turn between 1 and {len(s.turns)}", action.turn
            )
    if s.expect.turns and len(s.expect.turns) != len(s.turns):
        raise ScenarioError(
            source, "expect.turns", f"one [[expect.turns]] per [[turns]] ({len(s.turns)})", len(s.expect.turns)
        )
    for condition, overrides in s.expect.switches.items():
        if "turns" in overrides and len(overrides["turns"]) != len(s.turns):
            raise ScenarioError(
                source,
                f"expect.switch.{condition}.turns",
                f"one [[expect.switch.{condition}.turns]] per [[turns]] ({len(s.turns)})",
                len(overrides["turns"]),
            )
    for i, course in enumerate(s.expect.alternatives):
        if len(course.turns) != len(s.turns):
            raise ScenarioError(
                source, f"expect.or[{i}].turns", f"one [[expect.or.turns]] per [[turns]] ({len(s.turns)})",
                len(course.turns),
            )


def check_unique_names(scenarios: list[Scenario]) -> list[Scenario]:
    """One run, one name per scenario: records are saved under ``sessions/<target>/<name>``."""
    seen: dict[str, Scenario] = {}
    for s in scenarios:
        first = seen.setdefault(s.name, s)
        if first is not s:
            where = f"{first.source or '<built-in>'} and {s.source or '<built-in>'}"
            expected = f"a name no other scenario of the run has ({where})"
            raise ScenarioError(s.source or s.name, "name", expected, s.name)
    return scenarios


def load(path: str | Path) -> Scenario:
    """Load a scenario file; errors name the file."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SCENARIO_BYTES:
            raise ScenarioError(str(p), "(file)", f"at most {MAX_SCENARIO_BYTES} bytes", size)
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(p), "(file)", "a readable file", exc.strerror) from None
    except UnicodeDecodeError:
        raise ScenarioError(str(p), "(file)", "UTF-8 text") from None
    return loads(text, str(p), p.stem)


# --- writing ---------------------------------------------------------------------------------


def _nondefault(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of a dataclass that differ from their defaults (keeps written files short)."""
    out = {}
    for f in fields(obj):
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = None
        if value is None or value == default or value == () or value == {}:
            continue
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _item_dict(item: ModelItem) -> dict[str, Any]:
    data: dict[str, Any] = {"type": item.type}
    if isinstance(item, MessageItem) and item.repeat > 1:
        data["text"] = item.text[: len(item.text) // item.repeat]
        data["chunks"] = len(item.deltas)
        data.update(_nondefault(item, ("text", "deltas", "type")))
    elif isinstance(item, MessageItem | ReasoningItem):
        data["text" if isinstance(item, MessageItem) else "summary"] = (
            item.text if isinstance(item, MessageItem) else item.summary
        )
        data["deltas"] = list(item.deltas)
        data.update(_nondefault(item, ("text", "summary", "deltas", "type", "repeat")))
    else:
        data.update(_nondefault(item, ("type",)))
    return data


def to_dict(s: Scenario) -> dict[str, Any]:
    turns = []
    for t in s.turns:
        turn: dict[str, Any] = {"input": t.input}
        if t.responses:
            turn["responses"] = []
            for resp in t.responses:
                rd: dict[str, Any] = {"items": [_item_dict(i) for i in resp.items]}
                if resp.usage is not None:
                    rd["usage"] = _nondefault(resp.usage) or {"input": 0}
                rd.update(_nondefault(resp, ("items", "usage")))
                turn["responses"].append(rd)
        if t.faults:
            turn["faults"] = [{"kind": f.kind, "at": f.at, "n": f.n, **f.params} for f in t.faults]
        turns.append(turn)
    data: dict[str, Any] = {"name": s.name, "description": s.description}
    if s.targets != TARGETS:
        data["targets"] = list(s.targets)
    if s.release:
        data["release"] = s.release
    if config := _nondefault(s.config):
        data["config"] = config
    data["turns"] = turns
    client = _nondefault(s.client, ("actions", "probes", "files"))
    if s.client.files:
        client["files"] = [{"path": f.path, "text": f.text} for f in s.client.files]
    if s.client.actions:
        client["actions"] = [_nondefault(a) | {"turn": a.turn, "do": a.do} for a in s.client.actions]
    if s.client.probes:
        client["probe"] = [_probe_dict(p) for p in s.client.probes]
    if client:
        data["client"] = client
    data["expect"] = s.expect.to_dict()
    if s.methods:
        data["methods"] = [method_overrides.to_dict(o) for o in s.methods]
    return data


def _probe_dict(p: ClientProbe) -> dict[str, Any]:
    data = _nondefault(p, ("params",)) | {"at": p.at}
    if p.params is not None:  # an empty table is a request with empty params, not one without
        data["params"] = p.params
    return data


def dumps(s: Scenario) -> str:
    return tomli_w.dumps(to_dict(s))


def dump(s: Scenario, path: str | Path) -> Path:
    p = Path(path)
    p.write_text(dumps(s), encoding="utf-8")
    return p


#: ``KIND[:param=value,…][@POINT[:N]][#TURN]``: one fault given on the command line (``fake-codex --fault``).
_FAULT_SPEC = re.compile(
    r"^(?P<kind>[a-z_]+)(?::(?P<params>[^@#]*))?(?:@(?P<at>[a-z_]+)(?::(?P<n>[0-9]{1,6}))?)?(?:#(?P<turn>[0-9]{1,3}))?$"
)
MAX_FAULT_SPECS = 16


def with_faults(scenario: Scenario, specs: list[str]) -> Scenario:
    """``scenario`` with the faults of ``specs`` added to their turns (turn 1 unless ``#TURN``), validated as a
    scenario file is (the same registry, the same messages; the source is the flag). A value is read as TOML
    (``exit_code=3``, ``text="x"``), else as a string."""
    if len(specs) > MAX_FAULT_SPECS:
        raise ScenarioError("--fault", "(flags)", f"at most {MAX_FAULT_SPECS} faults", len(specs))
    data = to_dict(scenario)
    for spec in specs:
        m = _FAULT_SPEC.match(spec)
        if m is None:
            raise ScenarioError(f"--fault {spec}", "(flag)", "KIND[:param=value,...][@POINT[:N]][#TURN]", spec)
        table: dict[str, Any] = {"kind": m["kind"]}
        for pair in filter(None, (m["params"] or "").split(",")):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ScenarioError(f"--fault {spec}", "(flag)", "param=value pairs separated by commas", pair)
            try:
                table[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
            except (tomllib.TOMLDecodeError, RecursionError):
                table[key.strip()] = value.strip()
        if m["at"]:
            table["at"] = m["at"]
            table["n"] = int(m["n"] or 1)
        turn = int(m["turn"] or 1)
        turns = data.get("turns") or []
        if not 1 <= turn <= len(turns):
            raise ScenarioError(f"--fault {spec}", "(flag)", f"a turn in 1..{len(turns)}", turn)
        turns[turn - 1].setdefault("faults", []).append(table)
    return loads(tomli_w.dumps(data), source=f"--fault {' --fault '.join(specs)}", name=scenario.name)
