"""``client / plan followed``: an outside client did what its plan asks, as far as the servers let it.

The plan (``CODEX_HARNESS_PLAN``, :mod:`harness.outside.plan`) is the user's side of the scenario. Judged over
every server the client started, in the order of the wire:

- each plan turn started, matched by order (turn N is the N-th turn of the run: :func:`counted_starts`), and
  its ``turn/start`` carried the turn's input: the plan's text appears in its text items' text (NFKC and
  whitespace normalised: a template, role tags, a transcript or a preamble around it are the client's own);
  extra requests and retries are allowed;
- each action whose trigger happened while the turn still ran was sent: ``cancel`` as a ``turn/interrupt`` of
  that turn, ``steer`` as a ``turn/steer`` carrying the action's text, ``resume`` as a ``thread/resume`` before
  the turn (on any server: a client may start a new one for it);
- each approval the client answered got the plan's decision (``in_order`` by the session's count, else
  ``default``; ``error``: a JSON-RPC error); one the plan cancels while pending is not judged, nor is an
  unanswered one (``protocol`` judges answers);
- ``initialize`` asked what the plan asks (``experimentalApi``, the opted-out notifications), when it asks.

A turn is due unless the server made it impossible: the handshake failed (an error answer, no answer within the
request timeout, the server gone), the turn before was not answered within the request timeout or did not end
within its budget (``turn_timeout_ms`` + ``interrupt_budget_ms``), or the server ended itself or closed its
stdout before the client could start it.
An action is due when its trigger came (``contracts.triggers`` moments on the turn's own stretch of the wire,
plus ``delay_ms``) and the turn was still running :data:`SLACK_S` later. Turns the client reported
``unsupported`` are not judged; when it reported every turn so, the check is a skip. An action or an approval
decision a turn's ``unsupported`` list names (:func:`unsupported_parts`) is not judged, the rest of the turn
is. This check fails whatever levels come later: a client that plays nothing has not been judged on anything
else.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from contracts.checks.base import Check, wire_lines
from contracts.checks.client_run import CONTRACT as CLIENT
from contracts.checks.registry import Rule
from contracts.checks.wire_index import WireIndex, shared
from contracts.heap import collector_paused
from contracts.jsonval import as_object
from contracts.record import SessionRecord

NAME = "client"
REFERENCE = "docs/clients.md"
#: The id of its check (other modules name it by this).
PLAN_FOLLOWED = "plan followed"
# Judged over every server's record at once (not a judge of one record). Must: a client that plays nothing of the
# plan has not been judged on anything else.
CLIENT.add(Rule(PLAN_FOLLOWED, citation="docs/clients.md (What is judged)"))
#: Scheduling room on every wire-judged bound (as contracts.checks.client_run).
SLACK_S = 0.5
#: Requests that set the session up; one the server fails excuses the turns it would have carried.
HANDSHAKE = ("initialize", "thread/start", "thread/resume", "thread/fork")
#: Approval decisions the fake counts as ``accept`` (fake_server.turns): the amendment forms of an accept.
_ACCEPT_FORMS = ("acceptWithExecpolicyAmendment", "applyNetworkPolicyAmendment")
_SHOWN = 4
_CLIP = 60
#: The longest a server process may take to start that the judge believes (start.json's process start).
MAX_START_S = 600.0


def _summary(items: list[str]) -> str:
    return "; ".join(items[:_SHOWN]) + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:_CLIP] + ("…" if len(text) > _CLIP else ""))


def _int(value: Any, default: int) -> int:
    """A count from the plan as the record holds it (a saved record may be forged: never raise)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _norm(text: str) -> str:
    """Text as the plan's input is compared: Unicode compatibility forms folded (NFKC: a full-width letter, a
    ligature, a composed accent are the same text), whitespace runs collapsed to one space."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _texts(items: Any) -> tuple[list[str], str]:
    """The texts of the text items of ``items`` (a ``turn/start`` or ``turn/steer`` input), and, when there is
    none, what the input holds instead. Other items (an image, a mention a client adds) carry no plan text."""
    if not isinstance(items, list) or not items:
        return [], "no input items"
    texts = [
        i["text"] for i in items if isinstance(i, dict) and i.get("type") == "text" and isinstance(i.get("text"), str)
    ]
    if texts:
        return texts, ""
    kinds = sorted({_clip(i.get("type") if isinstance(i, dict) else type(i).__name__) for i in items[:_SHOWN]})
    return [], f"no text item (an input item of type {', '.join(kinds)} where the plan gives text)"


def _keys(texts: list[str]) -> tuple[str, ...]:
    """What the texts say, split across items or not (joined as they are, or word by word)."""
    joined = _norm("".join(texts))
    spaced = _norm(" ".join(texts))
    return (joined,) if joined == spaced else (joined, spaced)


def _contains(text: str, want: str) -> bool:
    """``want`` appears in ``text`` as a whole: not inside a longer word ("hi" is not in "this")."""
    if not want:
        return True
    start = text.find(want)
    while start >= 0:
        end = start + len(want)
        before = text[start - 1] if start > 0 else " "
        after = text[end] if end < len(text) else " "
        if not (want[0].isalnum() and before.isalnum()) and not (want[-1].isalnum() and after.isalnum()):
            return True
        start = text.find(want, start + 1)
    return False


def input_matches(items: Any, text: str) -> tuple[bool, str]:
    """Whether ``items`` carries the plan's ``text`` (it appears in the input's text, whitespace and Unicode
    normalised: a template around it, role tags, a transcript of earlier turns or a preamble are the client's
    own), and what it carries when not."""
    texts, held = _texts(items)
    if not texts:
        return False, held
    want = _norm(text)
    if any(_contains(key, want) for key in _keys(texts)):
        return True, ""
    return False, f"input {_clip(' '.join(texts))}, which does not contain {_clip(text)}"


@dataclass(slots=True)
class _Server:
    """One server's wire and how it ended, on the run's clock."""

    k: int
    record: SessionRecord
    index: WireIndex
    #: when the server stopped being usable on its own (crash, exit, stdout closed); None: it never did
    gone_t: float | None
    #: when it was last alive (its end, else the client's end, else never known: infinity)
    last_t: float
    truncated: bool
    #: when the client started the server's process (``start.json``), on the run's clock; None: not known
    process_t: float | None = None


def _servers(records: Sequence[SessionRecord]) -> list[_Server]:
    out = []
    for k, record in enumerate(records):
        facts = record.meta.get("outside") or {}
        server = facts.get("server")
        if not isinstance(server, dict):
            continue
        index = WireIndex.build(record.wire)
        end = server.get("end") if isinstance(server.get("end"), dict) else None
        gone = [e.t for e in record.wire if e.dir == "note" and e.note == "server closed stdout"]
        if end and end.get("reason") in ("crash", "exit") and isinstance(end.get("t"), int | float):
            gone.append(float(end["t"]))
        last = end.get("t") if end else facts.get("client_ended_t")
        truncated = any(e.dir == "note" and e.note == "recording truncated" for e in record.wire)
        out.append(
            _Server(
                k,
                record,
                index,
                min(gone) if gone else None,
                float(last) if isinstance(last, int | float) else float("inf"),
                truncated,
                _process_t(server),
            )
        )
    return out


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _process_t(server: dict[str, Any]) -> float | None:
    """When the client started this server's process: before the recording started, by at most
    :data:`MAX_START_S` (a larger gap is not a process start: not believed)."""
    process_t, started_t = server.get("process_started_t"), server.get("started_t")
    if not (_is_number(process_t) and _is_number(started_t)):
        return None
    return float(process_t) if 0 <= started_t - process_t <= MAX_START_S else None


@dataclass(slots=True)
class _Start:
    """A ``turn/start`` the client sent, with how its turn went."""

    server: _Server
    pos: int
    t: float
    params: dict[str, Any]
    turn_id: str | None
    answer_t: float | None
    refused: bool  # answered with an error
    completed_t: float | None
    end_pos: int  # the end of the turn's own stretch of the wire (exclusive)


def _starts(servers: list[_Server]) -> list[_Start]:
    out: list[_Start] = []
    for server in servers:
        requests = sorted(
            (r for r in server.index.client_requests.values() if r.method == "turn/start"), key=lambda r: r.pos
        )
        for n, request in enumerate(requests):
            answer = request.answers[0] if request.answers else None
            result = answer[2].get("result") if answer else None
            turn = result.get("turn") if isinstance(result, dict) else None
            turn_id = turn.get("id") if isinstance(turn, dict) and isinstance(turn.get("id"), str) else None
            completions = server.index.turn_completions(turn_id) if turn_id else []
            next_pos = requests[n + 1].pos if n + 1 < len(requests) else len(server.index.entries)
            out.append(
                _Start(
                    server,
                    request.pos,
                    request.t,
                    request.params,
                    turn_id,
                    answer[1] if answer else None,
                    bool(answer and "error" in answer[2]),
                    completions[0][1].t if completions else None,
                    completions[0][0] if completions else next_pos,
                )
            )
    return sorted(out, key=lambda s: (s.t, s.server.k, s.pos))


def _same_input(a: _Start, b: _Start) -> bool:
    texts_a, _ = _texts(a.params.get("input"))
    texts_b, _ = _texts(b.params.get("input"))
    return bool(texts_a) and _keys(texts_a) == _keys(texts_b)


def counted_starts(starts: list[_Start], request_s: float) -> list[_Start]:
    """The turns the run started, in wire order: turn N of the plan is the N-th (docs/clients.md). Every
    ``turn/start`` counts but a retry and one folded into a running turn:

    - one the server refused (an error answer), or did not answer within the request timeout, followed by a
      ``turn/start`` with the same input (on that server or a new one) is that turn retried: the retry stands
      for it;
    - one the server answered with the id of a turn already started on that server was folded into it (the server
      started no turn)."""
    out: list[_Start] = []
    seen: set[tuple[int, str]] = set()
    for start in starts:
        if start.turn_id is not None and (start.server.k, start.turn_id) in seen:
            continue
        if out and _given_up(out[-1], request_s) and _same_input(out[-1], start):  # on this server or a new one
            out.pop()
        out.append(start)
        if start.turn_id is not None:
            seen.add((start.server.k, start.turn_id))
    return out


def _given_up(start: _Start, request_s: float) -> bool:
    """A turn/start the server refused, or left unanswered past the request timeout: the client may retry it."""
    return start.refused or start.answer_t is None or start.answer_t - start.t > request_s + SLACK_S


def match_turns(
    plan_turns: list[dict[str, Any]], counted: list[_Start], unsupported: set[int], claimed: dict[str, int]
) -> dict[int, _Start]:
    """plan turn → the run's turn it is: the next one in order. A turn the client reported ``unsupported`` may
    never have started: it takes the next turn only when that one carries its input and the result file does not
    name it another turn's (by its ``turn_id``)."""
    matched: dict[int, _Start] = {}
    cursor = 0
    for number, planned in ((_int(p.get("turn"), k + 1), p) for k, p in enumerate(plan_turns)):
        if cursor >= len(counted):
            break
        candidate = counted[cursor]
        if number in unsupported:
            owner = claimed.get(candidate.turn_id or "")
            ours = owner == number if owner is not None else input_matches(
                candidate.params.get("input"), str(planned.get("input", ""))
            )[0]
            if not ours:
                continue
        matched[number] = candidate
        cursor += 1
    return matched


def started_turns(records: Sequence[SessionRecord]) -> set[int]:
    """The plan turns the run started (matched as ``plan followed`` matches them), for the runner: a turn reported
    ``unsupported`` that never started shifts the scripts of the turns after it."""
    primary = records[0]
    facts = primary.meta.get("outside") or {}
    plan_turns = [t for t in facts.get("plan_turns") or () if isinstance(t, dict)]
    with collector_paused(), shared():
        counted = counted_starts(_starts(_servers(records)), primary.budgets.request_s)
        return set(match_turns(plan_turns, counted, unsupported_turns(facts), reported_turn_ids(facts)))


class _Judge:
    def __init__(self, records: Sequence[SessionRecord], facts: dict[str, Any]) -> None:
        self.records = records
        self.facts = facts
        self.servers = _servers(records)
        self.starts = _starts(self.servers)
        budgets = facts.get("budgets") or {}
        first = records[0].budgets
        self.turn_s = float(budgets.get("turn_timeout_ms", 60000)) / 1000
        self.interrupt_s = first.interrupt_s
        self.request_s = first.request_s
        self.startup_s = _int(budgets.get("startup_timeout_ms"), 30000) / 1000
        # The handshake requests that failed and the thread/resume requests, indexed by time (a long plan is judged
        # in n log n); the turns the run started, in order (turn N of the plan is the N-th).
        self.counted = counted_starts(self.starts, self.request_s)
        self.setup_failures = sorted(f for server in self.servers for f in self._setup_failures(server))
        self.resumes = sorted(
            r.t for sv in self.servers for r in sv.index.client_requests.values() if r.method == "thread/resume"
        )
        self.problems: list[str] = []
        self.at: list[int] = []  # positions on the first server's wire
        self.judged: list[str] = []  # actions sent as planned
        self.answered = 0  # approvals answered as planned
        self.not_due: list[str] = []
        self.excused: list[str] = []  # parts of the plan the client reported unsupported (not judged)
        self.parts = unsupported_parts(facts)  # turn → the (action|approval, N) it reported unsupported

    def fail(self, text: str, start: _Start | None = None, pos: int | None = None) -> None:
        self.problems.append(text)
        if start is not None and start.server.k == 0:
            self.at.append(start.pos if pos is None else pos)

    # --- when the server made a turn impossible ------------------------------------------------------------

    def _setup_failures(self, server: _Server) -> list[tuple[float, str]]:
        """The handshake requests the server refused, left unanswered past the request timeout, or took with it."""
        out = []
        for request in server.index.client_requests.values():
            if request.method not in HANDSHAKE:
                continue
            # The client's clock on initialize may run from the moment it started the process; the wire's only
            # from the moment the process was ready to read (an interpreter's imports on a loaded machine).
            sent, since = request.t, ""
            if request.method == "initialize" and server.process_t is not None and server.process_t < request.t:
                sent, since = server.process_t, " from the server process's start"
            if request.answers:
                _, answered_t, frame = request.answers[0]
                if "error" in frame or not isinstance(frame.get("result"), dict):
                    out.append((request.t, f"the server answered {request.method} with an error"))
                elif answered_t - sent > self.request_s + SLACK_S:  # the client may have given up on it
                    took = f"{answered_t - sent:.1f} s{since}"
                    out.append((request.t, f"the server answered {request.method} after the request timeout ({took})"))
            elif server.gone_t is not None and server.gone_t >= request.t:
                out.append((request.t, f"the server went before answering {request.method}"))
            elif server.last_t - sent >= self.request_s - SLACK_S:
                what = f"{request.method} was not answered within the request timeout"
                out.append((request.t, what + (f" (counted{since})" if since else "")))
        return out

    def _failed_setup(self, after: float) -> str | None:
        """The first handshake failure of a request sent after ``after``."""
        k = bisect.bisect_left(self.setup_failures, (after, ""))
        return self.setup_failures[k][1] if k < len(self.setup_failures) else None

    def _gone_after(self, after: float, server: _Server | None) -> str | None:
        for s in [server] if server is not None else self.servers:
            if s.gone_t is not None and s.gone_t >= after - SLACK_S:
                return f"server {s.k + 1} ended itself or closed its stdout"
        return None

    def excuse(self, ready: tuple[float, _Server | None] | str) -> str | None:
        """Why a turn could not be started from ``ready`` (when and on which server the session could go on, or
        why it could not); None: it was due."""
        if isinstance(ready, str):
            return ready
        t, server = ready
        return self._failed_setup(t) or self._gone_after(t, server)

    def after(self, start: _Start, number: int) -> tuple[float, _Server] | str:
        """Where the session stands once turn ``number`` (started by ``start``) ended: the next turn's ready point,
        or why there is none."""
        if start.answer_t is None:
            return f"turn {number}'s turn/start was never answered"
        if start.answer_t - start.t > self.request_s + SLACK_S:
            return f"turn {number}'s turn/start was answered after the request timeout"
        if start.refused:
            return start.answer_t, start.server
        deadline = start.t + self.turn_s + self.interrupt_s + SLACK_S
        if start.completed_t is None or start.completed_t > min(deadline, start.server.last_t):
            return f"turn {number} did not end within its budget"
        return start.completed_t, start.server

    # --- the plan ------------------------------------------------------------------------------------------

    def turns(self, plan_turns: list[dict[str, Any]], unsupported: set[int]) -> dict[int, _Start]:
        """Match the plan's turns to the run's turns in order (turn N is the N-th :func:`counted_starts`); judge
        the input each carried, and what was due and not sent."""
        matched = match_turns(plan_turns, self.counted, unsupported, reported_turn_ids(self.facts))
        ready: tuple[float, _Server | None] | str = (float("-inf"), None)
        for number, planned in ((_int(p.get("turn"), k + 1), p) for k, p in enumerate(plan_turns)):
            start = matched.get(number)
            if start is not None:
                ready = self.after(start, number)
                if number in unsupported:
                    continue
                ok, carried = input_matches(start.params.get("input"), str(planned.get("input", "")))
                if not ok:
                    self.fail(f"turn {number}'s turn/start did not carry its input: it had {carried}", start)
                continue
            if number in unsupported:
                continue  # not judged; the next turn is due as this one was
            why = self.excuse(ready)
            if why is not None:
                self.not_due.append(f"turn {number} ({why})")
                ready = why
                continue
            if self.counted:
                self.fail(f"turn {number} was due but never started ({len(self.counted)} turn(s) started in the run)")
            else:
                self.fail(f"turn {number} was due but never started ({self.handshake_story()})")
        return matched

    def actions(self, plan_turns: list[dict[str, Any]], matched: dict[int, _Start], unsupported: set[int]) -> None:
        previous_t = float("-inf")
        for k, planned in enumerate(plan_turns):
            number = _int(planned.get("turn"), k + 1)
            start = matched.get(number)
            if start is None:
                continue
            if number not in unsupported:
                parts = self.parts.get(number, set())
                for k, action in enumerate(_actions(planned), 1):
                    if ("action", k) in parts:
                        self.excused.append(f"turn {number} action {k} ({action.get('do')})")
                    else:
                        self._action(number, action, start, previous_t)
            previous_t = start.t

    def _action(self, number: int, action: dict[str, Any], start: _Start, previous_t: float) -> None:
        do = action.get("do")
        if do == "resume":
            k = bisect.bisect_right(self.resumes, previous_t)
            resumed = k < len(self.resumes) and self.resumes[k] < start.t
            if resumed:
                self.judged.append(f"turn {number} resume")
            else:
                self.fail(f"turn {number}: the plan resumes the thread before it, but no thread/resume was sent", start)
            return
        due_t = self._due(action, start)
        if due_t is None:
            return
        index = start.server.index
        at = f"{action.get('at')}" + (f" #{action.get('n')}" if action.get("at") != "delay" else "")
        if do == "cancel":
            sent = start.turn_id is not None and bool(index.interrupts(start.turn_id))
            missing = f"turn {number}: the plan cancels at {at} and it came, but no turn/interrupt was sent"
        elif do == "steer":
            steers = [
                r
                for r in index.client_requests.values()
                if r.method == "turn/steer"
                and start.pos < r.pos
                and r.params.get("expectedTurnId") in (None, start.turn_id)
            ]
            carried = [input_matches(r.params.get("input"), str(action.get("text", ""))) for r in steers]
            sent = any(ok for ok, _ in carried)
            missing = f"turn {number}: the plan steers at {at} and it came, but " + (
                f"the turn/steer sent had {carried[0][1]}" if carried else "no turn/steer was sent"
            )
        else:
            return
        if sent:
            self.judged.append(f"turn {number} {do}")
            return
        # Not sent: due only if the turn still ran once the client could have acted (the server's own end of the
        # turn, not one the client caused, counts).
        turn_end = min(t for t in (start.completed_t, start.server.gone_t, float("inf")) if t is not None)
        if turn_end > due_t + SLACK_S:
            self.fail(missing, start)

    def _due(self, action: dict[str, Any], start: _Start) -> float | None:
        """When the action came due on the wire (its trigger, plus ``delay_ms``); None: its trigger never came."""
        at, n = action.get("at"), max(1, _int(action.get("n"), 1))
        delay = max(0, _int(action.get("delay_ms"), 0)) / 1000
        if at == "delay":
            return start.t + delay
        entries = start.server.index.entries
        times = []
        for pos in range(start.pos + 1, start.end_pos):
            entry = entries[pos]
            frame = entry.frame if entry.dir == "s2c" and isinstance(entry.frame, dict) else None
            method = frame.get("method") if frame else None
            if frame is None or not isinstance(method, str):
                continue
            hit = {
                "started": method == "turn/started",
                "delta": method == "item/agentMessage/delta",
                "item_started": method == "item/started",
                "approval_pending": "id" in frame and _is_approval(method),
            }.get(str(at), False)
            if hit:
                times.append(entry.t)
        return times[n - 1] + delay if len(times) >= n else None

    def approvals(
        self, plan: dict[str, Any], plan_turns: list[dict[str, Any]], matched: dict[int, _Start], unsupported: set[int]
    ) -> None:
        rules = plan.get("approvals")
        if not isinstance(rules, dict):
            return
        order = [str(d) for d in rules.get("in_order") or ()]
        default = str(rules.get("default", "accept"))
        held: dict[int, set[int]] = {}
        for k, planned in enumerate(plan_turns):
            planned_number = _int(planned.get("turn"), k + 1)
            held[planned_number] = {
                _int(a.get("n"), 1)
                for a in _actions(planned)
                if a.get("do") == "cancel" and a.get("at") == "approval_pending"
            }
        requests = sorted(
            ((s, r) for s in self.servers for r in s.index.server_requests.values() if _is_approval(r.method)),
            key=lambda sr: (sr[1].t, sr[0].k, sr[1].pos),
        )
        stretches: dict[int, list[tuple[int, int, int]]] = {}  # server → (turn/start pos, end pos, plan turn)
        for n, start in matched.items():
            stretches.setdefault(start.server.k, []).append((start.pos, start.end_pos, n))
        for spans in stretches.values():
            spans.sort()
        in_turn: dict[int, int] = {}
        wrong = 0
        for i, (server, request) in enumerate(requests):
            spans = stretches.get(server.k, [])
            k = bisect.bisect_left(spans, (request.pos, 0, 0)) - 1
            number = spans[k][2] if k >= 0 and spans[k][0] < request.pos < spans[k][1] else None
            if number is not None:
                in_turn[number] = in_turn.get(number, 0) + 1
            if number is None or number in unsupported or in_turn[number] in held.get(number, set()):
                continue
            if ("approval", in_turn[number]) in self.parts.get(number, set()):
                self.excused.append(f"turn {number} approval {in_turn[number]}")
                continue
            if not request.answers:
                continue  # judged by protocol / server requests answered
            want = order[i] if i < len(order) else default
            pos, _, frame = request.answers[0]
            got = _decision(frame)
            if got == want:
                self.answered += 1
            elif wrong < _SHOWN:
                wrong += 1
                said = f"approval {i + 1} ({request.method}) answered {_clip(got)}, the plan says {want!r}"
                self.problems.append(said)
                if server.k == 0:
                    self.at.append(pos)

    def capabilities(self, plan: dict[str, Any]) -> None:
        wants_experimental = plan.get("experimental_api") is True
        opt_out = [str(m) for m in plan.get("opt_out_notifications") or ()]
        if not wants_experimental and not opt_out:
            return
        for server in self.servers:
            for request in server.index.client_requests.values():
                if request.method != "initialize":
                    continue
                caps = request.params.get("capabilities")
                caps = caps if isinstance(caps, dict) else {}
                if wants_experimental and caps.get("experimentalApi") is not True:
                    self.fail_at(server, request.pos, "initialize did not ask for experimentalApi, as the plan does")
                sent = caps.get("optOutNotificationMethods")
                missing = [m for m in opt_out if not isinstance(sent, list) or m not in sent]
                if missing:
                    self.fail_at(server, request.pos, f"initialize did not opt out of {', '.join(missing)}")

    def handshake_story(self) -> str:
        """What the wire shows of a run that started no turn: how far the last server's handshake went, and when
        the client gave up on it, on the clock a client's timeout runs on (from the process start)."""
        if not self.servers:
            return "no server the client started was recorded: client / server started says why"
        server = self.servers[-1]
        name = f"server {server.k + 1}"
        requests = sorted(server.index.client_requests.values(), key=lambda r: r.pos)
        init = next((r for r in requests if r.method == "initialize"), None)
        zero = server.process_t
        ended = server.last_t if server.last_t != float("inf") else None

        def since(t: float, ref: float, what: str) -> str:
            return f"{t - ref:.1f} s after {what}"

        start_ref = (zero, "its process started") if zero is not None else None
        if init is None:
            return f"the client sent no initialize to {name}: no turn/start reached a server"
        if not init.answers:
            ref, what = start_ref or (init.t, "initialize reached it")
            when = f" {since(ended, ref, what)}" if ended is not None else ""
            return (
                f"the client gave up on the handshake: it ended {name}{when} with initialize unanswered "
                f"(request timeout {self.request_s:g} s, start-up budget {self.startup_s:g} s)"
            )
        answered_t = init.answers[0][1]
        ref, what = start_ref or (init.t, "initialize reached it")
        answered = f"{name} answered initialize {since(answered_t, ref, what)}"
        setup = next((r for r in requests if r.method in HANDSHAKE[1:]), None)
        if setup is None:
            when = f" {since(ended, ref, what)}" if ended is not None else ""
            return (
                f"{answered}, and the client ended it{when} without a thread/start (nor resume or fork) after it "
                f"(request timeout {self.request_s:g} s, start-up budget {self.startup_s:g} s)"
            )
        if not setup.answers:
            when = f" {since(ended, setup.t, 'sending it')}" if ended is not None else ""
            return f"{answered}; the client ended it{when} with {setup.method} unanswered"
        return f"{answered} and {setup.method}, but no turn/start reached a server"

    def fail_at(self, server: _Server, pos: int, text: str) -> None:
        self.problems.append(text)
        if server.k == 0:
            self.at.append(pos)


def _actions(planned: dict[str, Any]) -> list[dict[str, Any]]:
    actions = planned.get("actions")
    return [a for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []


def _is_approval(method: str) -> bool:
    return method.endswith("/requestApproval") or method in ("execCommandApproval", "applyPatchApproval")


def _decision(frame: dict[str, Any]) -> str:
    """The decision an approval answer carries, as the plan names decisions (``error`` for an error answer)."""
    if "error" in frame:
        return "error"
    result = frame.get("result")
    decision = result.get("decision") if isinstance(result, dict) else None
    if isinstance(decision, dict) and len(decision) == 1 and next(iter(decision)) in _ACCEPT_FORMS:
        return "accept"
    return decision if isinstance(decision, str) else repr(decision)[:_CLIP]


def plan_numbers(facts: dict[str, Any]) -> set[int]:
    """The plan's turn numbers, as the record's facts hold them."""
    turns = facts.get("plan_turns")
    turns = turns if isinstance(turns, list) else []
    return {_int(t.get("turn"), k + 1) for k, t in enumerate(turns) if isinstance(t, dict)}


def reported_turn_ids(facts: dict[str, Any]) -> dict[str, int]:
    """turn id → the plan turn the client's result file says it is (for the turns that name their id)."""
    result = facts.get("result")
    reported = result.get("turns") if isinstance(result, dict) else None
    out: dict[str, int] = {}
    for t in reported if isinstance(reported, list) else []:
        if isinstance(t, dict) and isinstance(t.get("turn_id"), str) and isinstance(t.get("turn"), int):
            out.setdefault(t["turn_id"], t["turn"])
    return out


def unsupported_parts(facts: dict[str, Any]) -> dict[int, set[tuple[str, int]]]:
    """turn → the parts of its plan the client's result file reported ``unsupported``: (``action``, N) the N-th
    action of the plan turn, (``approval``, N) the decision for the N-th approval the turn asks."""
    result = facts.get("result")
    reported = result.get("turns") if isinstance(result, dict) else None
    out: dict[int, set[tuple[str, int]]] = {}
    for t in reported if isinstance(reported, list) else []:
        parts = t.get("unsupported") if isinstance(t, dict) else None
        for part in parts if isinstance(parts, list) else []:
            for kind in ("action", "approval"):
                if isinstance(part, dict) and isinstance(part.get(kind), int):
                    out.setdefault(_int(t.get("turn"), 0), set()).add((kind, part[kind]))
    return out


def unsupported_turns(facts: dict[str, Any]) -> set[int]:
    """The turns the client's result file reported ``unsupported``."""
    result = facts.get("result")
    reported = result.get("turns") if isinstance(result, dict) else None
    reported = reported if isinstance(reported, list) else []
    return {_int(t.get("turn"), 0) for t in reported if isinstance(t, dict) and t.get("status") == "unsupported"}


def _never_served(judge: _Judge, primary: SessionRecord) -> str | None:
    """Why no session ever began, when no server the client started answered ``initialize`` and the scenario does
    not foresee its server going (no ``expect.server_exit``): a server started with flags it refuses (exit 2), or
    one that cannot start. Nothing of the plan was judged, which must not read as a pass; None otherwise."""
    # An outside run's record keeps no [expect] server_exit (client_run judges the exit): the scenario's is in meta.
    foreseen = primary.expect.server_exit
    if foreseen is None:
        foreseen = primary.meta.get("foreseen_server_exit")
    if foreseen not in (None, 0):
        return None
    for server in judge.servers:
        answered = any(
            r.method == "initialize" and any("result" in frame for _, _, frame in r.answers)
            for r in server.index.client_requests.values()
        )
        if answered or server.gone_t is None:
            return None
    code = primary.server_exit
    tail = " ".join(primary.stderr_tail.strip().splitlines()[-1:])[:200]
    said = f" ({tail})" if tail else ""
    return f"no server the client started answered initialize (it ended by itself, exit {code}){said}"


def check(records: Sequence[SessionRecord]) -> Check:
    """The one ``plan followed`` check of an outside run (``records``: one per server, the first the primary)."""
    with collector_paused(), shared():  # linear in the session (contracts.heap); one wire index per server
        return _check(records)


def _check(records: Sequence[SessionRecord]) -> Check:
    primary = records[0]
    make = CLIENT.maker(primary)
    facts = primary.meta.get("outside") or {}
    plan_turns = [t for t in facts.get("plan_turns") or () if isinstance(t, dict)]
    plan = as_object(facts.get("plan"))
    if not plan_turns:
        return make(PLAN_FOLLOWED, "skip", "the record holds no plan")
    unsupported, numbers = unsupported_turns(facts), plan_numbers(facts)
    if numbers <= unsupported:
        return make(PLAN_FOLLOWED, "skip", "the client reported every turn unsupported: nothing of the plan is judged")
    judge = _Judge(records, facts)
    matched = judge.turns(plan_turns, unsupported)
    judge.actions(plan_turns, matched, unsupported)
    judge.approvals(plan, plan_turns, matched, unsupported)
    judge.capabilities(plan)
    if judge.problems:
        if any(s.truncated for s in judge.servers):
            why = "the recording was truncated: what the client sent after it is not known"
            return make(PLAN_FOLLOWED, "skip", why)
        return make(PLAN_FOLLOWED, "fail", _summary(judge.problems), at=wire_lines(judge.at))
    started = [n for n in sorted(matched) if n not in unsupported]
    if not started and not judge.judged and not judge.answered:
        why = f"nothing of the plan was due: {_summary(judge.not_due) or 'no turn'}"
        unplayed = _never_served(judge, primary)
        if unplayed is not None:  # nothing judged is not a pass: a server the scenario did not expect to go went
            return make(PLAN_FOLLOWED, "fail", f"nothing was played: {unplayed}; {why}")
        # the server made every turn impossible: nothing to judge
        return make(PLAN_FOLLOWED, "skip", why, applies=False)
    parts = [f"{len(started)} turn(s) started with their input in order"]
    if judge.judged:
        parts.append(f"{len(judge.judged)} action(s) sent at their trigger ({', '.join(judge.judged[:_SHOWN])})")
    if judge.answered:
        parts.append(f"{judge.answered} approval(s) answered as planned")
    if judge.not_due:
        parts.append(f"not due: {_summary(judge.not_due)}")
    if unsupported & numbers:
        parts.append(f"reported unsupported: turn(s) {', '.join(str(n) for n in sorted(unsupported & numbers))}")
    if judge.excused:
        parts.append(f"reported unsupported, not judged: {_summary(judge.excused)}")
    return make(PLAN_FOLLOWED, "pass", "; ".join(parts))
