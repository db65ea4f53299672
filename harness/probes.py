"""The scenario's client probe steps (``[[client.probe]]``): requests, raw lines and a stdin close that the
normal conversation never sends, so the server's answers to them are on the record (and can be recorded
from the real binary with ``codex-harness record``).

Every step is bounded: a request or a raw request line waits at most the plan's request timeout for its
answer, a stdin close at most the teardown budget for the exit, ``wait_ms`` at most
:data:`contracts.scenario.MAX_PROBE_WAIT_MS`. An error answer is what a probe is for, so it is not a
failure; a step the session can no longer take (the server is gone) ends the probes with a note.
"""

from __future__ import annotations

from typing import Any

import orjson
import trio

from contracts.jsonrpc import RpcError
from contracts.messages import NOTSET
from contracts.scenario import THREAD_PLACEHOLDER, ClientPlan, ClientProbe
from contracts.transport import TransportClosed
from harness.client.errors import ClientError, RequestTimeout

#: How often a raw request line's answer is looked for on the wire.
ANSWER_POLL_S = 0.005


def substitute(value: Any, thread_id: str | None) -> Any:
    """``value`` with every string equal to :data:`THREAD_PLACEHOLDER` replaced by ``thread_id``."""
    if isinstance(value, str):
        return thread_id if value == THREAD_PLACEHOLDER and thread_id is not None else value
    if isinstance(value, dict):
        return {k: substitute(v, thread_id) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, thread_id) for v in value]
    return value


def _thread_of(result: Any) -> str | None:
    thread = result.get("thread") if isinstance(result, dict) else None
    tid = thread.get("id") if isinstance(thread, dict) else None
    return tid if isinstance(tid, str) else None


def _request_id(line: str) -> Any:
    """The id of a raw line that is a request (has ``id`` and ``method``), else None."""
    try:
        frame = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(frame, dict) and "method" in frame and isinstance(frame.get("id"), str | int):
        return frame["id"]
    return None


def _answered(session: Any, request_id: Any, since: int) -> bool:
    for entry in session.wire[since:]:
        frame = entry.frame
        if entry.dir == "s2c" and isinstance(frame, dict) and "method" not in frame and frame.get("id") == request_id:
            return True
    return False


async def _raw(session: Any, probe: ClientProbe, timeout_s: float, thread_id: str | None) -> str | None:
    assert probe.raw is not None
    line = probe.raw.replace(THREAD_PLACEHOLDER, thread_id) if thread_id is not None else probe.raw
    since = len(session.wire)
    await session.send_raw(line.encode())
    request_id = _request_id(line)
    if request_id is None:
        return thread_id
    with trio.move_on_after(timeout_s) as waited:
        while not _answered(session, request_id, since):
            await trio.sleep(ANSWER_POLL_S)
    if waited.cancelled_caught:
        session.note(f"probe: no answer to raw request {request_id!r} within {timeout_s:g} s")
        return thread_id
    for entry in session.wire[since:]:  # a raw thread/start makes the thread the later steps name
        frame = entry.frame
        if entry.dir == "s2c" and isinstance(frame, dict) and frame.get("id") == request_id:
            return _thread_of(frame.get("result")) or thread_id
    return thread_id


async def _close_stdin(session: Any, timeout_s: float) -> None:
    transport = session.transport
    start = trio.current_time()
    await transport.close_input()
    session.note("stdin closed")
    with trio.move_on_after(timeout_s):
        code = await transport.wait_exit()
        session.note(f"exit status {code} after {trio.current_time() - start:.2f}s")
        return
    session.note(f"probe: no exit within {timeout_s:g} s of stdin closed")


async def run_probes(session: Any, plan: ClientPlan, at: str, thread_id: str | None) -> str | None:
    """Run the plan's probe steps for point ``at`` in order; returns the thread id later steps name."""
    request_s = plan.request_timeout_ms / 1000
    for probe in plan.probes_at(at):
        try:
            if probe.send is not None:
                params = NOTSET if probe.params is None else substitute(probe.params, thread_id)
                try:
                    result = await session.request(probe.send, params, timeout=request_s)
                except RpcError:
                    pass  # an error answer is on the wire: what the probe asked for
                except RequestTimeout:
                    session.note(f"probe: no answer to {probe.send} within {request_s:g} s")
                else:
                    thread_id = _thread_of(result) or thread_id
            elif probe.raw is not None:
                thread_id = await _raw(session, probe, request_s, thread_id)
            elif probe.close_stdin:
                await _close_stdin(session, plan.teardown_ms / 1000)
            if probe.wait_ms:
                await trio.sleep(probe.wait_ms / 1000)
        except (ClientError, TransportClosed) as exc:
            session.note(f"probe: {probe.kind} could not be taken: {exc}")
            break
    return thread_id
