"""The scenario's client probe steps (``[[client.probe]]``): requests, raw lines and a stdin close that the
normal conversation never sends, so the server's answers to them are on the record (and can be recorded
from the real binary with ``codex-harness record``).

Every step is bounded: a request or a raw request line waits at most the plan's request timeout for its
answer, a stdin close at most the teardown budget for the exit, ``wait_ms`` at most
:data:`contracts.probe_refs.MAX_PROBE_WAIT_MS` and all of them together at most
:data:`~contracts.probe_refs.MAX_PROBE_WAITS_MS` (a scenario built in Python skips the loader's check: the
waits past it are cut, with a note). A step's params and raw line stay within their caps once the
placeholders are put in: one that would grow past fails the session, naming the step, and is not sent.
An error answer is what a probe is for, so it is not a failure; a step the session can no longer take (the
server is gone) ends the probes with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import trio

from codex_client.errors import ClientError, RequestTimeout
from contracts import bounded_parse, probe_refs
from contracts.jsonrpc import RpcError
from contracts.messages import NOTSET
from contracts.scenario import ClientPlan, ClientProbe
from contracts.transport import TransportClosed

#: How often a raw request line's answer (or an awaited notification) is looked for on the wire.
ANSWER_POLL_S = 0.005
#: How often a request sent without waiting is looked for on the wire (the next step goes once it is there).
SENT_POLL_S = 0.0005


@dataclass(slots=True)
class ProbeState:
    """What the steps of one session share: its working directory and the answers so far."""

    cwd: str | None = None
    #: step index (as text) and id -> the answer's ``result`` (None: answered with an error, or not at all)
    answers: dict[str, Any] = field(default_factory=dict)
    failed: bool = False  # a step could not be resolved: no later step runs
    waited_ms: int = 0  # the steps' wait_ms so far (bounded by MAX_PROBE_WAITS_MS over the session)

    def resolver(self, thread_id: str | None) -> Any:
        def resolve(ref: str | probe_refs.AnswerRef) -> Any:
            if ref == "thread":
                if thread_id is None:
                    raise probe_refs.RefError("${thread}: the session has no thread yet")
                return thread_id
            if ref == "cwd":
                if self.cwd is None:
                    raise probe_refs.RefError("${cwd}: the target did not say its working directory")
                return self.cwd
            assert isinstance(ref, probe_refs.AnswerRef)
            if ref.step not in self.answers:
                raise probe_refs.RefError(f"step {ref.step} was not answered")
            answer = self.answers[ref.step]
            if answer is None:
                raise probe_refs.RefError(f"step {ref.step} was answered with an error or not at all")
            return probe_refs.lookup(answer, ref)

        return resolve


def substitute(value: Any, thread_id: str | None, state: ProbeState | None = None) -> Any:
    """``value`` with its placeholders resolved (contracts.probe_refs); RefError when one cannot be, TooLarge
    when the result would pass the params cap."""
    resolve = (state or ProbeState()).resolver(thread_id)
    return probe_refs.substitute(value, resolve, limit=probe_refs.MAX_PARAMS_BYTES)


def _thread_of(result: Any) -> str | None:
    thread = result.get("thread") if isinstance(result, dict) else None
    tid = thread.get("id") if isinstance(thread, dict) else None
    return tid if isinstance(tid, str) else None


def _request_id(line: str) -> Any:
    """The id of a raw line that is a request (has ``id`` and ``method``), else None."""
    try:
        frame = bounded_parse.loads_json(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(frame, dict) and "method" in frame and isinstance(frame.get("id"), str | int):
        return frame["id"]
    return None


def _frame_of(entry: Any, direction: str) -> dict[str, Any] | None:
    frame = entry.frame
    return frame if entry.dir == direction and isinstance(frame, dict) else None


async def _wait_for(
    session: Any,
    since: int,
    match: Callable[[Any], dict[str, Any] | None],
    timeout_s: float,
    poll_s: float,
    done: trio.Event | None = None,
) -> dict[str, Any] | None:
    """The first frame from wire position ``since`` on that ``match`` returns, polled until ``timeout_s``
    (or until ``done`` is set: nothing more will come); each entry is looked at once."""
    with trio.move_on_after(timeout_s):
        while True:
            wire = session.wire
            while since < len(wire):
                found = match(wire[since])
                since += 1
                if found is not None:
                    return found
            if done is not None and done.is_set():
                return None
            await trio.sleep(poll_s)
    return None


def _answer_to(request_id: Any) -> Callable[[Any], dict[str, Any] | None]:
    def match(entry: Any) -> dict[str, Any] | None:
        frame = _frame_of(entry, "s2c")
        return frame if frame is not None and "method" not in frame and frame.get("id") == request_id else None

    return match


async def _raw(session: Any, probe: ClientProbe, timeout_s: float, thread_id: str | None, state: ProbeState) -> Any:
    """Write the raw line; the answer's result when it is a request that was answered, else None."""
    assert probe.raw is not None
    # In a raw line a placeholder is its value's text (so `"${cwd}"` stays a string), the line within its cap.
    line = probe_refs.substitute_text(probe.raw, state.resolver(thread_id), limit=probe_refs.MAX_PROBE_LINE_BYTES)
    since = len(session.wire)
    await session.send_raw(line.encode())
    request_id = _request_id(line)
    if request_id is None:
        return None
    answer = await _wait_for(session, since, _answer_to(request_id), timeout_s, ANSWER_POLL_S)
    if answer is None:
        session.note(f"probe: no answer to raw request {request_id!r} within {timeout_s:g} s")
        return None
    return answer.get("result")


async def _quiet_call(session: Any, request: Any, timeout_s: float, done: trio.Event) -> None:
    try:
        await session.call(request, timeout_s)
    except RpcError:
        pass  # an error answer is on the wire: what the probe asked for
    except RequestTimeout:
        session.note(f"probe: no answer to {request.method} within {timeout_s:g} s")
    except (ClientError, TransportClosed) as exc:
        session.note(f"probe: {request.method} could not be taken: {exc}")
    finally:
        done.set()  # answered, or it never will be: whoever waits for it to be sent stops waiting


async def _request(session: Any, method: str, params: Any, timeout_s: float) -> Any:
    """The answer's result; None when the answer is an error (on the wire: what a probe asks for) or none came."""
    try:
        return await session.request(method, params, timeout=timeout_s)
    except RpcError:
        return None
    except RequestTimeout:
        session.note(f"probe: no answer to {method} within {timeout_s:g} s")
        return None


async def _send_without_waiting(
    session: Any, nursery: trio.Nursery, method: str, params: Any, timeout_s: float
) -> None:
    """Send the request in the background; return once it is on the wire (so the next step goes after it)."""
    request = session.connection.request(method, params)
    since = len(session.wire)
    done = trio.Event()
    nursery.start_soon(_quiet_call, session, request, timeout_s, done)

    def sent(entry: Any) -> dict[str, Any] | None:
        frame = _frame_of(entry, "c2s")
        return frame if frame is not None and frame.get("id") == request.id else None

    await _wait_for(session, since, sent, timeout_s, SENT_POLL_S, done)


#: Requests whose answer is followed by a thread/started from another task (the real server).
STARTS_A_THREAD: Final = frozenset({"thread/start", "thread/fork"})


async def _until(session: Any, method: str, since: int, timeout_s: float) -> None:
    def notified(entry: Any) -> dict[str, Any] | None:
        frame = _frame_of(entry, "s2c")
        return frame if frame is not None and frame.get("method") == method else None

    if await _wait_for(session, since, notified, timeout_s, ANSWER_POLL_S) is None:
        session.note(f"probe: no {method} within {timeout_s:g} s")


async def _close_stdin(session: Any, timeout_s: float) -> None:
    """End the session's output (stdin on stdio) and wait for the server's exit (for its end of the
    connection, when the transport has no process)."""
    closed = session.stream.words.closed
    start = trio.current_time()
    await session.stream.send_eof()
    session.note(closed)
    with trio.move_on_after(timeout_s):
        if session.process is None:
            await session.reader_done.wait()
            session.note(f"{session.stream.words.eof} after {trio.current_time() - start:.2f}s")
            return
        code = await session.process.wait_exit()
        session.note(f"exit status {code} after {trio.current_time() - start:.2f}s")
        return
    session.note(f"probe: no exit within {timeout_s:g} s of {closed}")


async def _wait(session: Any, wait_ms: int, state: ProbeState) -> None:
    """Sleep ``wait_ms``, within what is left of the session's total for waits."""
    allowed = max(0, min(wait_ms, probe_refs.MAX_PROBE_WAITS_MS - state.waited_ms))
    if allowed < wait_ms:
        limit = probe_refs.MAX_PROBE_WAITS_MS
        session.note(f"probe: wait_ms cut to {allowed}: the steps' waits add up to at most {limit} ms")
    state.waited_ms += allowed
    if allowed:
        await trio.sleep(allowed / 1000)


async def run_probes(
    session: Any, plan: ClientPlan, at: str, thread_id: str | None, state: ProbeState | None = None
) -> str | None:
    """Run the plan's probe steps for point ``at`` in order; returns the thread id later steps name.

    A placeholder that cannot be resolved when its step is due ends the probes and fails the session
    (a client error naming the step): sending the step without it would record something else."""
    state = state if state is not None else ProbeState()
    if state.failed:
        return thread_id
    if at == "thread" and plan.handshake and thread_id and plan.probes_at("thread"):
        # The real server writes thread/started after its thread/start answer, from another task: under load it can
        # land after the first probe's answer instead of before it. Waiting for it (bounded) records one order.
        await _until(session, "thread/started", 0, plan.request_timeout_ms / 1000)
    # The requests sent without waiting are answered into this nursery: the point ends when they are (bounded).
    async with trio.open_nursery() as nursery:
        return await _run_point(session, plan, at, thread_id, state, nursery)


async def _run_point(
    session: Any, plan: ClientPlan, at: str, thread_id: str | None, state: ProbeState, nursery: trio.Nursery
) -> str | None:
    request_s = plan.request_timeout_ms / 1000
    # By position, not by value: two identical steps (the same raw line twice) are two steps with two answers.
    for index, probe in enumerate(plan.probes):
        if probe.at != at:
            continue
        since = len(session.wire)
        answer: Any = None
        try:
            if probe.send is not None:
                params = NOTSET if probe.params is None else substitute(probe.params, thread_id, state)
                if probe.no_wait:
                    await _send_without_waiting(session, nursery, probe.send, params, request_s)
                else:
                    answer = await _request(session, probe.send, params, request_s)
            elif probe.raw is not None:
                answer = await _raw(session, probe, request_s, thread_id, state)
            elif probe.close_stdin:
                await _close_stdin(session, plan.teardown_ms / 1000)
            # a thread/start (sent, or a raw line answered with a thread) makes the thread later steps name as ${thread}
            if probe.send in (None, "thread/start") or probe.raw is not None:
                thread_id = _thread_of(answer) or thread_id
            state.answers[str(index)] = answer
            if probe.id is not None:
                state.answers[probe.id] = answer
            if probe.send in STARTS_A_THREAD and _thread_of(answer) and not probe.until:
                # thread/started is written after the answer, from another task: under load the next probe's
                # answer could land before it. Waiting for it (bounded) records one order on every run.
                await _until(session, "thread/started", since, request_s)
            if probe.until:
                await _until(session, probe.until, since, plan.turn_timeout_ms / 1000)
            if probe.wait_ms:
                await _wait(session, probe.wait_ms, state)
        except probe_refs.RefError as exc:
            message = f"probe step {index} ({probe.kind}{' ' + probe.send if probe.send else ''}): {exc}"
            session.note(f"probe: {message}")
            session.client_errors.append(f"scenario: {message}")
            state.failed = True
            break
        except (ClientError, TransportClosed) as exc:
            session.note(f"probe: {probe.kind} could not be taken: {exc}")
            break
    return thread_id

