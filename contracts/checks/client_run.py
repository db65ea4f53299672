"""An outside client judged from what the fake saw (``codex-harness run --client-cmd``).

The record's wire is one server's view (``fake-codex --record``); ``meta["outside"]`` holds the facts of
the run: the servers the client started and how each ended, the deadline, what was left running, the
result file. Per server:

- ``played as given``: the server played what the harness gave, every input of its play identity (the
  scenario's hash, the release; ``start.json``'s ``play``) the same: a client that bypassed the shim or passed
  ``--scenario`` or ``--release`` to it fails, the changed input and where it came from named;
- ``not answered after resolved``: no answer to a server request after its ``serverRequest/resolved``;
- ``interrupt -> turn/completed``: each ``turn/interrupt`` is followed by the turn's ``turn/completed``
  within the interrupt budget, or the client gave up and ended the server within budget (the interrupt's and the
  teardown's, and a request's when it sent one before ending it: a cleanup on a hung server);
- ``server ended``: the client closed the server's stdin or signalled it within the teardown budget after
  its last turn ended (``turn/completed``), or after the turn budget when the server went silent (counted from
  the server's last frame: a turn deadline and an inactivity timeout both pass; then the interrupt budget, and
  the request budget when the client sent a request once the server went silent; "ended late" past it); a
  server that ended itself (crash, exit) needs nothing. The client's first move counts,
  from every sign the recording holds: ``end.json`` and the wire's ``stdin closed`` / ``signal`` notes (all a
  server killed before it wrote ``end.json`` leaves).

Once per run (the record with ``primary``): ``server started`` (none: how the client ended, the end of its
stderr, and a ``codex`` it ran that was not the shim), ``exit status`` (a should: non-zero names the status and
the end of its stderr), ``deadline`` (``client/deadline``),
``nothing left running``, ``result file`` (absent: a skip, never a pass; invalid: a failure) and
``reported statuses agree with the wire``; over every server's record at once, ``plan followed``
(:mod:`contracts.checks.client_plan`: the turns, actions and approvals of the plan, as far as the servers let
the client).
"""

from __future__ import annotations

from typing import Any, TypeGuard

from contracts.checks.base import Check, Maker
from contracts.checks.registry import OUTSIDE_CLIENT, Contract, Rule
from contracts.checks.wire_index import WireIndex, id_key, shared
from contracts.jsonval import as_object
from contracts.record import SessionRecord, WireEntry

NAME = "client"
REFERENCE = "docs/clients.md"
#: The ids of its checks (other modules name a check by these).
PLAYED_AS_GIVEN = "played as given"
NOT_ANSWERED_AFTER_RESOLVED = "not answered after resolved"
INTERRUPT_TURN_COMPLETED = "interrupt -> turn/completed"
SERVER_ENDED = "server ended"
SERVER_STARTED = "server started"
EXIT_STATUS = "exit status"
DEADLINE = "deadline"
NOTHING_LEFT_RUNNING = "nothing left running"
SERVERS_DESCENDANTS_ENDED = "server's descendants ended"
RESULT_FILE = "result file"
REPORTED_STATUSES_AGREE = "reported statuses agree with the wire"
RECORDING = "recording"
#: ``plan followed`` is declared by :mod:`contracts.checks.client_plan`; ``recording`` is the runner's (a
#: recording fake-codex did not write); ``server N: …`` is a check of the N-th server the client started.
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    suite="outside",
    checks=(
        Rule(PLAYED_AS_GIVEN, citation="docs/clients.md (What is judged)"),
        # The real binary ignores an answer to a request it resolved: a recommendation.
        Rule(NOT_ANSWERED_AFTER_RESOLVED, level="should", citation="docs/protocol.md §3"),
        # Over a budget but ended is a should: a client still waiting at its deadline fails ``deadline`` (must).
        Rule(INTERRUPT_TURN_COMPLETED, level="should", citation="docs/client-rules.md §2"),
        Rule(SERVER_ENDED, level="should", citation="docs/client-rules.md §5"),
        Rule(SERVER_STARTED, citation="docs/clients.md (What is judged)"),
        # A client may exit non-zero on purpose (its library raised on a crashed server): the finding names the
        # status and the end of its stderr, a recommendation; a client that started no server fails above.
        Rule(EXIT_STATUS, level="should", citation="docs/clients.md (What is judged)"),
        Rule(DEADLINE, citation="docs/client-rules.md §5"),
        # What the client started (its servers, its helpers) left alive: must. What a server started itself (a
        # grandchild holding its stdout) left alive: should (the real binary's children die with it).
        Rule(NOTHING_LEFT_RUNNING, citation="docs/client-rules.md §5"),
        Rule(SERVERS_DESCENDANTS_ENDED, level="should", citation="docs/client-rules.md §5"),
        Rule(RESULT_FILE, citation="docs/clients.md (Your client in ten minutes)"),
        Rule(REPORTED_STATUSES_AGREE, citation="docs/client-rules.md §3"),
        Rule(RECORDING, citation="docs/clients.md (fake-codex --record DIR)"),
        OUTSIDE_CLIENT,
    ),
)
#: Scheduling room on every wire-judged bound (a process start, a pipe, a poll).
SLACK_S = 0.5
_SHOWN = 3
_WIRE_STATUS = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


def _summary(items: list[str]) -> str:
    return "; ".join(items[:_SHOWN]) + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def wire_turns(index: WireIndex) -> list[dict[str, Any]]:
    """The turns started on the wire, in order: start time, id, how and when they ended."""
    out = []
    for request in sorted(index.client_requests.values(), key=lambda r: r.pos):
        if request.method != "turn/start":
            continue
        answer = request.answers[0][2] if request.answers else {}
        result = answer.get("result") if isinstance(answer, dict) else None
        turn = result.get("turn") if isinstance(result, dict) else None
        turn_id = turn.get("id") if isinstance(turn, dict) else None
        completed = index.turn_completions(turn_id) if isinstance(turn_id, str) else []
        status = None
        if completed:
            frame = completed[0][1].frame or {}
            status = ((frame.get("params") or {}).get("turn") or {}).get("status")
        out.append(
            {
                "t": request.t,
                "pos": request.pos,
                "id": turn_id,
                "error": "error" in answer if isinstance(answer, dict) else False,
                "completed_t": completed[0][1].t if completed else None,
                "completed_pos": completed[0][0] if completed else None,
                "status": status,
            }
        )
    return out


def started_turns(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns of :func:`wire_turns` the server started, in order (the N-th is plan turn N, as
    ``plan followed`` counts them): not a ``turn/start`` it refused, nor one it folded into a running turn (answered
    with that turn's id)."""
    out, ids = [], set()
    for turn in turns:
        if turn["error"] or (turn["id"] is not None and turn["id"] in ids):
            continue
        out.append(turn)
        if turn["id"] is not None:
            ids.add(turn["id"])
    return out


def _client_moves(server: dict[str, Any], wire: list[WireEntry]) -> list[tuple[float, str]]:
    """Every sign the recording holds of the client ending the server, (t, what), earliest first: ``end.json``'s
    reason and its ``stdin_closed_t``, and the ``stdin closed`` / ``signal NAME`` notes of the wire (all there is
    when the process was killed before it could write ``end.json``)."""
    moves: list[tuple[float, str]] = []
    end = as_object(server.get("end"))
    if end.get("reason") in ("stdin_closed", "signal") and _number(end.get("t")):
        signal = str(end.get("signal") or "a signal")[:20]
        what = "closed its stdin" if end["reason"] == "stdin_closed" else f"sent {signal}"
        moves.append((float(end["t"]), what))
    if _number(end.get("stdin_closed_t")):
        moves.append((float(end["stdin_closed_t"]), "closed its stdin"))
    for entry in wire:
        if entry.dir != "note" or not entry.note:
            continue
        if entry.note == "stdin closed":
            moves.append((entry.t, "closed its stdin"))
        elif entry.note.startswith("signal "):
            moves.append((entry.t, f"sent {entry.note.removeprefix('signal ')[:20]}"))
    return sorted(moves)


def _cleanup_request(entry: WireEntry) -> bool:
    """A request of the client's other than the interrupt (whose budget is counted on its own)."""
    frame = entry.frame if entry.dir == "c2s" and isinstance(entry.frame, dict) else None
    method = frame.get("method") if frame else None
    return frame is not None and "id" in frame and isinstance(method, str) and method != "turn/interrupt"


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ended(server: dict[str, Any], facts: dict[str, Any], wire: list[WireEntry]) -> tuple[str, float | None, str]:
    """How the server ended (``client`` / ``itself`` / ``harness`` / ``sigkill``), when, and the client's move."""
    end = server.get("end")
    if isinstance(end, dict) and end.get("reason") not in ("stdin_closed", "signal"):
        return "itself", end.get("t") if _number(end.get("t")) else None, ""
    moves = _client_moves(server, wire)
    killed_at = facts.get("client_ended_t") if facts.get("deadline_hit") else None
    if _number(killed_at):
        # The harness killed the client at its deadline: a stdin the server then saw close (the client died), or a
        # signal it got from the harness's kill, is the harness's doing, not a move of the client's.
        moves = [m for m in moves if m[0] < killed_at]
        if not moves:
            return "harness", None, ""
    if moves:
        return "client", moves[0][0], moves[0][1]
    if server.get("killed_by_harness"):
        return "harness", None, ""
    return "sigkill", facts.get("client_ended_t"), ""


def _server_ended(make: Maker, record: SessionRecord, index: WireIndex, facts: dict[str, Any]) -> Check:
    server = facts["server"]
    budgets = facts.get("budgets") or {}
    teardown = record.budgets.teardown_s
    how, at, move = _ended(server, facts, record.wire)
    if how == "itself":
        reason = (server.get("end") or {}).get("reason")
        return make("server ended", "pass", f"the server ended by itself ({reason}); nothing to end")
    if how == "harness":
        return make(
            "server ended",
            "fail",
            "the client never closed the server's stdin nor signalled it; the harness killed it after the client "
            + ("hit its deadline" if facts.get("deadline_hit") else "exited"),
        )
    turns = wire_turns(index)
    if turns and turns[-1]["completed_t"] is not None:
        ref, allowed, what = turns[-1]["completed_t"], teardown, "the last turn/completed"
    elif turns:
        turn_timeout = float(budgets.get("turn_timeout_ms", 60000)) / 1000
        # The turn budget is how long the client bears a turn: a deadline from turn/start, or an inactivity timeout
        # from the server's last frame. The later of the two is judged, so a client of either kind passes.
        started = turns[-1]["t"]
        until = at if at is not None else float("inf")  # what came after the client's move did not move it
        heard = max((e.t for e in record.wire if e.dir == "s2c" and started <= e.t <= until), default=started)
        ref = heard + turn_timeout
        allowed = record.budgets.interrupt_s + teardown
        since = "turn/start" if heard == started else "the server's last frame"
        what = f"the last turn's deadline ({since} + turn_timeout {turn_timeout:g} s)"
        # A request the client sent once the server had gone silent (a cleanup on a hung server) is one it may
        # wait on for its request timeout before it ends the server, as the run deadline allows (docs/clients.md).
        cleanup = next((e for e in record.wire if e.t >= heard and e.t <= until and _cleanup_request(e)), None)
        if cleanup is not None:
            allowed += record.budgets.request_s
            method = str((cleanup.frame or {}).get("method"))[:40]
            what += f", then a {method} request (request timeout {record.budgets.request_s:g} s)"
    else:
        frames = [e.t for e in record.wire if e.dir != "note"]
        ref = frames[-1] if frames else float(server.get("started_t") or 0.0)
        allowed, what = teardown, "its last frame"
        asked = sorted(index.client_requests.values(), key=lambda r: r.pos)
        if asked and not asked[-1].answers:
            # The client waits for an answer that never comes (a live server that leaves its request unanswered):
            # its own request budget runs first; for initialize, the start-up budget (a process start is slow
            # under load).
            method, wait = asked[-1].method, record.budgets.request_s
            if method == "initialize":
                startup = float(budgets.get("startup_timeout_ms", 30000)) / 1000
                wait, budget_name = max(wait, startup), "start-up budget"
            else:
                budget_name = "request budget"
            ref = max(ref, asked[-1].t + wait)
            what = f"{method} unanswered (its {budget_name} {wait:g} s)"
    if at is None:
        why = "the server was killed (SIGKILL) at a time the wire does not show"
        return make("server ended", "skip", why, applies=False)
    late = at - ref
    verb = f"the client {move}" if how == "client" else "SIGKILLed (by the client's exit at the latest)"
    detail = f"{verb} {late:+.3f} s after {what}, budget {allowed:.3f} s"
    if how == "client" and server.get("end") is None and server.get("killed_by_harness"):
        detail += "; the server had not exited when the harness killed it (no end.json)"
    if late > allowed + SLACK_S:
        return make("server ended", "fail", f"ended late: {detail}")
    return make("server ended", "pass", detail)


def _answered_after_resolved(make: Maker, index: WireIndex) -> Check:
    resolved: dict[str, int] = {}
    for pos, entry in index.frames("s2c", "serverRequest/resolved"):
        params = (entry.frame or {}).get("params")
        if isinstance(params, dict) and "requestId" in params:
            resolved.setdefault(id_key(params["requestId"]), pos)
    late = [
        f"{r.method} id {r.id!r} answered after serverRequest/resolved"
        for key, r in index.server_requests.items()
        if key in resolved and any(pos > resolved[key] for pos, _, _ in r.answers)
    ]
    # A recommendation (level should), not a protocol rule: the real binary ignores an answer to a request it
    # resolved. It fails only under --strict.
    return make(
        "not answered after resolved",
        "fail" if late else "pass",
        _summary(late) or f"{len(resolved)} resolved request(s), none answered afterwards",
    )


def _interrupts(make: Maker, record: SessionRecord, index: WireIndex, facts: dict[str, Any]) -> Check | None:
    interrupts = [r for r in index.client_requests.values() if r.method == "turn/interrupt"]
    if not interrupts:
        return None
    how, end_t, _ = _ended(facts["server"], facts, record.wire)
    budget = record.budgets.interrupt_s
    bad: list[str] = []
    for request in interrupts:
        turn_id = request.params.get("turnId")
        completions = index.turn_completions(turn_id) if isinstance(turn_id, str) else []
        done = [e.t for pos, e in completions if pos > request.pos]
        if done and done[0] - request.t <= budget + SLACK_S:
            continue
        gave_up = how in ("client", "sigkill") and end_t is not None
        allowed = budget + record.budgets.teardown_s
        if gave_up and end_t is not None and any(request.t < e.t <= end_t and _cleanup_request(e) for e in record.wire):
            allowed += record.budgets.request_s  # one bounded request before it ended the server, as in server ended
        if gave_up and end_t is not None and end_t - request.t <= allowed + SLACK_S:
            continue
        what = f"{done[0] - request.t:.3f} s later" if done else "never"
        bad.append(f"interrupt at t={request.t:.3f}: turn/completed {what}, and the client did not end the server")
    return make(
        "interrupt -> turn/completed",
        "fail" if bad else "pass",
        _summary(bad) or f"{len(interrupts)} interrupt(s), each ended within {budget:.3f} s or given up on",
    )


def _played_as_given(make: Maker, server: dict[str, Any], facts: dict[str, Any]) -> Check:
    """Every input of the play the harness gave is the one the server recorded (a record from before
    ``play`` compares the scenario hash alone)."""
    expected = facts.get("expected_play")
    if not isinstance(expected, dict):
        expected = {"scenario_hash": facts.get("expected_hash")}
    play = server.get("play")
    if not isinstance(play, dict):
        play = {"scenario_hash": server.get("scenario_hash"), "release": server.get("profile")}
    sources = as_object(server.get("play_sources"))
    changed = []
    for key, want in expected.items():
        got = play.get(key)
        if got == want:
            continue
        source = sources.get("scenario" if key == "scenario_hash" else key)
        by = f" (set by {str(source)[:40]})" if isinstance(source, str) and source != "default" else ""
        if key == "scenario_hash":
            name = str(server.get("scenario"))[:80]
            changed.append(f"scenario {name!r} with hash {str(got)[:12]}{by}, not {str(want)[:12]}")
        else:
            changed.append(f"{key} {str(got)[:40]!r}{by}, not {str(want)[:40]!r}")
    if changed:
        return make("played as given", "fail", "the client changed what the server plays: " + "; ".join(changed))
    given = ", ".join(f"{k} {str(v)[:12]}" for k, v in expected.items())
    return make("played as given", "pass", f"the server played scenario {server.get('scenario')!r} as given ({given})")


def server_checks(record: SessionRecord, facts: dict[str, Any]) -> list[Check]:
    make = CONTRACT.maker(record)
    index = WireIndex.build(record.wire)
    server = facts["server"]
    checks = [
        _played_as_given(make, server, facts),
        _answered_after_resolved(make, index),
    ]
    interrupts = _interrupts(make, record, index, facts)
    if interrupts is not None:
        checks.append(interrupts)
    checks.append(_server_ended(make, record, index, facts))
    return checks


def _left_running(left: list[str], facts: dict[str, Any], tracked: str, make: Maker) -> list[Check]:
    """What outlived the client: its own processes (servers, helpers: must), and what a server started itself
    (``left_by_servers``: a grandchild holding the server's stdout; the real binary's die with it: should)."""
    theirs = facts.get("left_by_servers")
    theirs = {str(x) for x in theirs} if isinstance(theirs, list) else set()
    own = [x for x in left if x not in theirs]
    by_servers = [x for x in left if x in theirs]
    note = f"; {len(by_servers)} a server started itself, judged by server's descendants ended" if by_servers else ""
    checks = [
        make(
            "nothing left running",
            "fail" if own else "pass",
            f"alive after the client exited (killed by the harness): {_summary(own)}{tracked}"
            if own
            else f"no process the client started outlived it{note}{tracked}"
            if by_servers
            else f"no process of the run outlived the client{tracked}",
        )
    ]
    if by_servers:
        detail = (
            f"started by a server and alive after the client exited (killed by the harness): {_summary(by_servers)}"
            " — ending the server's process group, not the server alone, ends them"
        )
        checks.append(make("server's descendants ended", "fail", detail))
    else:
        checks.append(make("server's descendants ended", "pass", "nothing a server started outlived the client"))
    return checks


def _agrees(reported: str, turn: dict[str, Any] | None, interrupted: bool) -> bool:
    """A reported status the wire contradicts. ``failed``, ``timeout`` and ``unsupported`` are the client's own
    outcomes (it may lose a turn the server finished: terminal_status judges that against [expect])."""
    if reported in ("failed", "timeout", "unsupported"):
        return True
    if turn is None:
        return False
    wire = _WIRE_STATUS.get(str(turn["status"])) if turn["status"] else None
    if reported == "completed":
        return wire == "completed"
    return wire == "aborted" or interrupted  # aborted: the server interrupted it, or the client asked to


#: Lines of the client's stderr a finding quotes (the whole tail is in client-stderr.txt).
STDERR_LINES = 5
_STDERR_CLIP = 300


def stderr_end(facts: dict[str, Any], count: int = STDERR_LINES) -> list[str]:
    """The last ``count`` non-blank lines of the client's stderr tail (as the runner kept it: escaped), each
    clipped."""
    tail = facts.get("stderr_tail")
    if not isinstance(tail, str):
        return []
    lines = [line.rstrip() for line in tail.splitlines() if line.strip()]
    return [line if len(line) <= _STDERR_CLIP else line[: _STDERR_CLIP - 1] + "…" for line in lines[-count:]]


def client_end(facts: dict[str, Any]) -> str | None:
    """How the client process ended (``exited 1 after 0.412 s``), or None when the record does not say."""
    ended = facts.get("client_ended_t")
    after = f" after {ended:.3f} s" if _number(ended) else ""
    if facts.get("deadline_hit"):
        return f"was still running at its deadline{after} (killed by the harness)"
    code = facts.get("client_exit")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    if code < 0:
        return f"was killed by signal {-code}{after}"
    return f"exited {code}{after}"


def _with_stderr(text: str, facts: dict[str, Any]) -> str:
    """``text``, then the client's last stderr line first (a clipped line keeps it), then the lines before it."""
    lines = stderr_end(facts)
    if not lines:
        return f"{text}; its stderr was empty"
    before = f"; the lines before: {' | '.join(lines[:-1])}" if len(lines) > 1 else ""
    return f"{text}; its stderr ends: {lines[-1]}{before}"


def _no_server(facts: dict[str, Any]) -> str:
    """Why no server was started, as far as the run shows: how the client ended, the ``codex`` it ran instead of
    the shim (a client resolving its own bundled binary), what it asked the shim, the end of its stderr."""
    text = "the client never started a server through CODEX_BIN or PATH"
    end = client_end(facts)
    if end is not None:
        text = f"the client {end} without starting a server through CODEX_BIN or PATH"
    bypassed = [str(x) for x in facts.get("bypassed") or []]
    foreign = [x for x in dict.fromkeys(str(x) for x in facts.get("codex_not_shim") or []) if x not in bypassed]
    if bypassed:
        text += f"; it started a server around the codex it was given, not recorded: {_summary(bypassed)}"
    if foreign:
        text += f"; a codex that is not the shim ran in its process tree: {_summary(foreign)}"
    if bypassed or foreign:
        text += " (a client that resolves its own bundled @openai/codex ignores PATH and CODEX_BIN until its own path"
        text += " option is set)"
    asked = [str(x) for x in facts.get("shim_starts") or []]
    if asked:
        text += f"; the shim was run {len(asked)} time(s), no server recorded: {_summary(asked)}"
    elif "shim_starts" in facts:
        text += "; the shim was never run"
    return _with_stderr(text, facts) if "stderr_tail" in facts else text


#: What ``server started`` says of a server the client started through the shim that was never recorded.
UNRECORDED = "no server was recorded"


def _server_starts(facts: dict[str, Any]) -> list[str]:
    """The shim's starts as an ``app-server`` (its arguments as the shim noted them)."""
    return [str(x) for x in facts.get("shim_starts") or [] if "app-server" in str(x).split()]


def _unrecorded(facts: dict[str, Any]) -> str:
    """The client started the shim as a server, and it ended before it recorded anything: fake-codex (or the
    relay) had not started recording (a start-up slower than the client waited, on a loaded host). Not the
    client's failure, and nothing of that server can be judged."""
    starts = _server_starts(facts)
    end = client_end(facts)
    how = f"; the client {end}" if end else ""
    text = (
        f"the client started the shim as a server {len(starts)} time(s) ({_summary(starts)}), but {UNRECORDED}: "
        f"each ended before it recorded anything (killed while it started, later than the client waited, or it"
        f" failed to start){how}"
    )
    return _with_stderr(text, facts) if "stderr_tail" in facts else text


def _exit_status(make: Maker, facts: dict[str, Any], started: bool) -> Check:
    """Exit 0, or the status and the end of the client's stderr (a should: an adapter may exit 1 on purpose when
    its library raised). With no server started, ``server started`` already says it: not judged twice."""
    end = client_end(facts)
    if end is None:
        return make("exit status", "skip", "a recording alone does not show how the client ended", applies=False)
    if not started:
        return make("exit status", "skip", f"the client {end}: said by client / server started", applies=False)
    if facts.get("deadline_hit"):
        return make("exit status", "skip", f"the client {end}: judged by client / deadline", applies=False)
    if facts.get("client_exit") == 0:
        return make("exit status", "pass", f"the client {end}")
    return make("exit status", "fail", _with_stderr(f"the client {end}", facts))


def session_checks(record: SessionRecord, facts: dict[str, Any]) -> list[Check]:
    make = CONTRACT.maker(record)
    servers = facts.get("servers") or []
    bypassed = [str(x) for x in facts.get("bypassed") or []]
    if bypassed and not servers:
        started = make("server started", "fail", _no_server(facts))
    elif bypassed:
        # A server the harness did not start is neither sealed nor recorded: what the client did with it is unjudged.
        started = make(
            "server started",
            "fail",
            "the client started a server around the codex it was given (CODEX_BIN / PATH), not recorded: "
            + _summary(bypassed),
        )
    elif servers:
        started = make("server started", "pass", f"{len(servers)} server process(es) started through the shim")
    elif _server_starts(facts):
        started = make("server started", "skip", _unrecorded(facts))
    else:
        started = make("server started", "fail", _no_server(facts))
    checks = [started, _exit_status(make, facts, bool(servers))]
    deadline = facts.get("deadline_s")
    if deadline is None:
        why = "a recording alone does not show the client's deadline"
        checks.append(make("deadline", "skip", why, applies=False))
    elif facts.get("deadline_hit"):
        checks.append(make("deadline", "fail", f"the client was still running at its deadline of {deadline:g} s"))
    else:
        ended = facts.get("client_ended_t") or 0.0
        checks.append(make("deadline", "pass", f"the client exited after {ended:.3f} s, deadline {deadline:g} s"))
    left = facts.get("left_running")
    if left is None:
        why = "a recording alone does not show which processes outlived the client"
        checks.append(make("nothing left running", "skip", why, applies=False))
    else:
        # How the client's tree was tracked: a pass from an unconfined run says so (a process that scrubbed
        # the run marker and outran a /proc scan could have got away).
        how = facts.get("confinement")
        tracked = f" (tracked by {how})" if how and not how.startswith("not confined") else f" ({how})" if how else ""
        checks += _left_running([str(x) for x in left], facts, tracked, make)
    result = facts.get("result") or {}
    state = result.get("state", "absent")
    if state == "absent":
        checks.append(make("result file", "skip", "no result file: terminal status and usage are not judged"))
        return checks
    if state == "invalid":
        problems = [str(p) for p in result.get("problems", [])]
        checks.append(make("result file", "fail", f"invalid against result.schema.json: {_summary(problems)}"))
        return checks
    if state != "valid":  # the harness could not judge it (a full disk cut it): never the client's failure
        problems = [str(p) for p in result.get("problems", [])]
        checks.append(make("result file", "skip", f"not judged: {_summary(problems) or state}"))
        return checks
    checks.append(make("result file", "pass", f"valid, {len(result.get('turns', []))} turn(s) reported"))
    index = WireIndex.build(record.wire)
    seen = started_turns(wire_turns(index))
    wrong = []
    by_id = {t["id"]: t for t in seen if t["id"]}
    for reported in result.get("turns", []):
        k = int(reported["turn"]) - 1
        # The turn id the client reports names its turn; the plan's number is the wire's order only while the
        # client started every turn (one it reported unsupported may never have been).
        turn = by_id.get(reported.get("turn_id")) or (seen[k] if 0 <= k < len(seen) else None)
        interrupted = bool(turn and turn["id"] and index.interrupts(turn["id"]))
        if not _agrees(str(reported["status"]), turn, interrupted):
            says = "not started" if turn is None else (turn["status"] or "no turn/completed")
            wrong.append(f"turn {k + 1} reported {reported['status']}, the wire says {says}")
    checks.append(
        make(
            "reported statuses agree with the wire",
            "fail" if wrong else "pass",
            _summary(wrong) or "every reported status matches what the server sent",
        )
    )
    return checks


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    """Every client_run check one record's facts allow (``show`` and the runner both come here, then add
    :func:`contracts.checks.client_plan.check` over all the run's records)."""
    facts = record.meta.get("outside")
    if not isinstance(facts, dict):
        return [CONTRACT.maker(record)("outside client", "skip", "not a record of an outside client", applies=False)]
    with shared():  # both halves read the same index of the wire
        checks = server_checks(record, facts) if facts.get("server") else []
        if facts.get("primary", True):
            checks = session_checks(record, facts) + checks
    return checks
