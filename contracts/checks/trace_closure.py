"""The client's trace bundle, and the server's when the target writes one, pass the closure checker,
or give exactly the verdict ``[expect]`` declares (``unclosed`` after a crash, ``violation`` for the
pre-fix unclosed-tool bug, which passes only when the checker finds it).

A session whose server wrote more than one bundle (a fork gets its own) gets one more check, ``other
threads' server traces``: each of those bundles must give the verdict ``[expect]`` declares for the server
(``closed`` when that is ``violation``: the pre-fix bug leaves the tool of the turn it struck open, and a
fork runs no turn of the scenario). Sessions with one bundle have no such check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts import transport
from contracts.checks.base import Check, Maker, Status
from contracts.checks.registry import Contract, Rule
from contracts.record import SessionRecord
from contracts.trace import TraceVerdict, check_bundle

NAME = "trace_closure"
REFERENCE = "docs/trace.md §2"
#: The server's bundles judge the target (the fake's fidelity, a release's trace bug), not an outside client.
_SERVER_BUNDLE = (
    "the server's own trace bundle (the fake's, or the real binary's) says nothing of an outside client (kept in "
    "the recording); "
    "how the client ended the server is judged by client / server ended"
)
#: The ids of its checks (other modules name a check by these).
CLIENT_TRACE = "client trace"
SERVER_TRACE = "server trace"
OTHER_THREADS_SERVER_TRACES = "other threads' server traces"
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    checks=(
        Rule(CLIENT_TRACE, outside="an outside client's own trace bundle is not judged"),
        Rule(SERVER_TRACE, outside=_SERVER_BUNDLE),
        Rule(OTHER_THREADS_SERVER_TRACES, outside=_SERVER_BUNDLE),
    ),
)


def _checker() -> Any:
    return check_bundle


def _verdict(result: TraceVerdict) -> tuple[str, list[str]]:
    problems = [p.describe() for p in result.problems]
    if result.error:
        line = f" (line {result.error_line})" if result.error_line else ""
        problems.insert(0, f"{result.error}{line}")
    return str(result.verdict), problems


def _judge(make: Maker, name: str, bundle: Path | None, expected: str, checker: Any, absent: Status) -> Check:
    if expected == "none":
        if bundle is None:
            return make(name, "pass", "no bundle, as [expect] declares")
        return make(name, "skip", "[expect] declares no bundle; one was written and is not judged", applies=False)
    if bundle is None:
        return make(name, absent, "no trace bundle was recorded")
    if checker is None:
        return make(name, "skip", "the trace-closure checker (contracts.trace.check_bundle) is not available")
    try:
        verdict, problems = _verdict(checker(bundle))
    except Exception as exc:  # an unreadable bundle is a verdict, not a crash of the report
        verdict, problems = "invalid", [repr(exc)]
    shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    detail = f"verdict {verdict}, [expect] declares {expected}" + (f": {shown}" if shown else "")
    return make(name, "pass" if verdict == expected else "fail", detail)


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    checker = _checker()
    client = _judge(make, "client trace", record.client_trace, record.expect.client_trace, checker, "fail")
    # A target that writes no server trace (it was not asked to) is not the client's fault.
    server = _judge(make, "server trace", record.server_trace, record.expect.server_trace, checker, "skip")
    server = _outlived_connection(make, record, server)
    server = _bug_not_struck(make, record, server)
    if server.status == "skip" and record.server_trace is None and record.expect.server_trace != "none":
        server = make("server trace", "skip", f"the {record.target} target wrote no server trace bundle", applies=False)
    others = _others(make, record, checker)
    return [client, server] + ([others] if others is not None else [])


#: Transports where a thread outlives the connection that started it.
SOCKET_TRANSPORTS = transport.SOCKETS

#: Items that are no tool call (a message, reasoning, a plan): a turn aborted with only these has none to leave open.
_NOT_TOOL_ITEMS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction"})


def _aborted_with_tools(record: SessionRecord) -> int:
    """Turns the server's wire ended ``interrupted`` (an interrupt, an approval answered cancel) after one of
    their tool calls started (an ``item/started`` of a tool item): where the known bug can strike."""
    with_tools: set[str] = set()
    count = 0
    for entry in record.wire:
        frame = entry.frame
        if entry.dir != "s2c" or not isinstance(frame, dict):
            continue
        params = frame.get("params")
        if not isinstance(params, dict):
            continue
        method = frame.get("method")
        if method == "item/started":
            item = params.get("item")
            kind = item.get("type") if isinstance(item, dict) else None
            turn_id = params.get("turnId")
            if isinstance(turn_id, str) and isinstance(kind, str) and kind not in _NOT_TOOL_ITEMS:
                with_tools.add(turn_id)
        elif method == "turn/completed":
            turn = params.get("turn")
            if isinstance(turn, dict) and turn.get("status") == "interrupted" and turn.get("id") in with_tools:
                count += 1
    return count


def _bug_not_struck(make: Maker, record: SessionRecord, server: Check) -> Check:
    """``violation`` is declared for the known bug of an aborted turn's open tool call: it strikes only where a
    turn is aborted with a tool call started. A release that took another course (an older one ran the command the
    scenario expects it to ask for, so the turn it would have aborted completed) and closed its trace did
    nothing wrong: that passes, saying why."""
    if record.expect.server_trace != "violation" or server.status != "fail":
        return server
    if not server.detail.startswith("verdict closed") or _aborted_with_tools(record):
        return server
    return make(
        "server trace",
        "pass",
        f"{server.detail}; no turn was aborted with a tool call started on the wire, so the known bug [expect] "
        "declares (an aborted turn's open tool call) had nothing to strike",
    )




def _outlived_connection(make: Maker, record: SessionRecord, server: Check) -> Check:
    """Over a websocket the server's thread is not the connection's: the real binary keeps it running when the
    connection closes and leaves its trace unclosed when stopped with SIGTERM (docs/transports.md). An ``unclosed``
    verdict
    where ``closed`` is expected (or ``violation``, the unclosed tool, which the open thread then hides) is not
    judged, with why; anything else still is."""
    transport = record.meta.get("transport")
    expected = record.expect.server_trace
    if transport not in SOCKET_TRANSPORTS or server.status != "fail" or expected not in ("closed", "violation"):
        return server
    if not server.detail.startswith("verdict unclosed"):
        return server
    why = (
        f"over {transport} the thread outlives the connection: the server was stopped with the thread still "
        f"running, so its trace is unclosed (docs/transports.md); {server.detail}"
    )
    return make("server trace", "skip", why)


def _others(make: Maker, record: SessionRecord, checker: Any) -> Check | None:
    """One check over the bundles of the session's other threads (None: there are none)."""
    if not record.other_server_traces or record.expect.server_trace == "none":
        return None
    name = "other threads' server traces"
    expected = "closed" if record.expect.server_trace == "violation" else record.expect.server_trace
    judged = [_judge(make, name, bundle, expected, checker, "skip") for bundle in record.other_server_traces]
    failed = [
        f"{bundle.name}: {check.detail}"
        for bundle, check in zip(record.other_server_traces, judged, strict=True)
        if check.status != "pass"
    ]
    left_out = record.meta.get("other_server_traces_left_out")
    more = f" ({left_out} more not judged)" if isinstance(left_out, int) and left_out > 0 else ""
    if failed:
        shown = "; ".join(failed[:3]) + (f" (+{len(failed) - 3} more)" if len(failed) > 3 else "")
        return make(name, "fail", f"{len(failed)} of {len(judged)} bundle(s) off{more}: {shown}")
    return make(name, "pass", f"{len(judged)} bundle(s), verdict {expected} each{more}")
