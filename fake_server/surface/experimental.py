"""Methods only the experimental schema has (behind ``experimentalApi``), as the real binary answers them offline.

Recorded with the smallest params the schema allows (probes/experimental.jsonl): most refuse empty
input with the real message, the rest answer with empty lists. Methods that would reach the network
(realtime, remote control, Bedrock/GCP, user verification, model sampling) were not probed; they get
the smallest schema-valid answer like every method no table holds.
"""

from __future__ import annotations

from typing import Any

from fake_server.surface.call import Call
from fake_server.surface.errors import invalid, invalid_params
from fake_server.surface.threads import loaded_thread


def _empty_list(call: Call) -> dict[str, Any]:
    return {"data": [], "nextCursor": None}


def _nothing(call: Call) -> dict[str, Any]:
    return {}


def diagnostics(call: Call) -> dict[str, Any]:
    live = sum(1 for e in call.world.threads if call.state.extra(e).loaded)
    return {
        "process": {"id": 4242, "residentMemoryBytes": 100 * 1024 * 1024, "physicalFootprintBytes": None},
        "gauges": [
            {"name": "app.requests.in_flight", "value": 1},
            {"name": "core.threads.live", "value": live},
        ],
    }


def elicitation(delta: int) -> Any:
    def handler(call: Call) -> dict[str, Any]:
        thread, _extra = loaded_thread(call, call.params.get("threadId"))
        count = max(0, call.state.elicitations.get(thread.thread_id, 0) + delta)
        call.state.elicitations[thread.thread_id] = count
        return {"count": count, "paused": count > 0}

    return handler


def queue_input(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    if not call.params.get("input"):
        raise invalid("only user input can be added to the user-message queue")
    raise invalid("queue is empty")


def queue_delete(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    return {"deleted": False}


def queue_reorder(call: Call) -> dict[str, Any]:
    thread, _extra = loaded_thread(call, call.params.get("threadId"))
    call.after("thread/queue/changed", {"threadId": thread.thread_id})
    return {}


def queue_start(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    raise invalid("queue is empty")


def loaded_nothing(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    return {}


def loaded_empty_list(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    return _empty_list(call)


def memory_read(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    return {"summary": None}


def terminal_terminate(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    process = call.params.get("processId")
    if not (isinstance(process, str) and process.isdigit()):
        raise invalid("invalid background terminal process id: cannot parse integer from empty string")
    raise invalid(f"no background terminal with process id {process}")


def project_missing(call: Call) -> Any:
    raise invalid_params(f"project not found: {call.params.get('projectId', '')}")


def project_key(call: Call) -> Any:
    if not call.params.get("idempotencyKey"):
        raise invalid_params("idempotencyKey must not be empty")
    raise invalid_params("projects are not available offline")


def search_term(call: Call) -> Any:
    if not call.params.get("searchTerm"):
        name = "thread/searchOccurrences" if call.method == "thread/searchOccurrences" else "thread/search"
        raise invalid(f"{name} requires a non-empty searchTerm")
    if call.method == "thread/searchOccurrences":
        return {"data": [], "nextCursor": None}
    return {"data": [], "nextCursor": None}


def read_state_update(call: Call) -> Any:
    thread, _extra = loaded_thread(call, call.params.get("threadId"))
    current = {"firstUnread": None, "revision": f"initial:{thread.thread_id}"}
    if call.params.get("expectedRevision") != current["revision"]:
        raise invalid("read state changed", {"reason": "readStateConflict", "readState": current})
    return {"readState": current}


def items_read(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    ids = call.params.get("itemIds") or []
    if not 1 <= len(ids) <= 100:
        raise invalid("itemIds must contain 1 to 100 IDs")
    raise invalid(f"turn not found: {call.params.get('turnId')}")


def approved_plan(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    if not str(call.params.get("markdown", "")).strip():
        raise invalid("The approved plan is empty.")
    return {}


def turn_settings(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    raise invalid("turn settings updates require the step_model_switching feature")


def timeline(call: Call) -> Any:
    thread, _extra = loaded_thread(call, call.params.get("threadId"))
    raise invalid(f"invalid paginated history lineage for {thread.thread_id}: missing source rollout")


def realtime_list(call: Call) -> dict[str, Any]:
    return {"data": [], "nextCursor": None, "snapshotEnd": 0, "projectedThroughItemIndex": 0, "coverage": "ready"}


def remote_disable(call: Call) -> Any:
    raise invalid("remote control requires ChatGPT authentication")


def remote_status(call: Call) -> dict[str, Any]:
    host = call.world.host
    return {
        "status": "disabled",
        "serverName": host.hostname,
        "installationId": host.installation_id,
        "environmentId": None,
    }


def collaboration_modes(call: Call) -> dict[str, Any]:
    return {
        "data": [
            {"name": "Plan", "mode": "plan", "model": None, "reasoning_effort": "medium"},
            {"name": "Default", "mode": "default", "model": None, "reasoning_effort": None},
        ]
    }


def mock_method(call: Call) -> dict[str, Any]:
    return {"echoed": call.params.get("value")}


def environment_info(call: Call) -> Any:
    raise invalid(f"unknown environment id `{call.params.get('environmentId', '')}`")


def environment_status(call: Call) -> dict[str, Any]:
    return {"status": "unknown", "error": f"unknown environment id `{call.params.get('environmentId', '')}`"}


def account_sessions(call: Call) -> dict[str, Any]:
    return {"activeSessionId": None, "sessions": []}


def process_spawn(call: Call) -> Any:
    if not call.params.get("command"):
        raise invalid("command must not be empty")
    # The fake never runs host commands: a spawn is refused like a missing program.
    raise invalid("process/spawn is scripted in the fake: override it with [[methods]]")


def process_write(call: Call) -> Any:
    if call.params.get("deltaBase64") is None and not call.params.get("closeStdin"):
        raise invalid_params("process/writeStdin requires deltaBase64 or closeStdin")
    return process_kill(call)


def process_kill(call: Call) -> Any:
    raise invalid(f'no active process for process handle "{call.params.get("processHandle", "")}"')


def process_resize(call: Call) -> Any:
    size = call.params.get("size") or {}
    if not (isinstance(size, dict) and size.get("rows", 0) > 0 and size.get("cols", 0) > 0):
        raise invalid_params("process size rows and cols must be greater than 0")
    return process_kill(call)


def search_session_start(call: Call) -> Any:
    session = call.params.get("sessionId")
    if not session:
        raise invalid("sessionId must not be empty")
    call.state.search_sessions[session] = [r for r in call.params.get("roots") or [] if isinstance(r, str)]
    return {}


def search_session_update(call: Call) -> Any:
    session = call.params.get("sessionId")
    if session not in call.state.search_sessions:
        raise invalid(f"fuzzy file search session not found: {session or ''}")
    return {}


def search_session_stop(call: Call) -> dict[str, Any]:
    session = call.params.get("sessionId")
    if session is not None:  # None names no session (an empty id is refused at the start)
        call.state.search_sessions.pop(session, None)
    return {}


HANDLERS = {
    "server/diagnostics": diagnostics,
    "thread/sample/cancel": _nothing,
    "thread/increment_elicitation": elicitation(+1),
    "thread/decrement_elicitation": elicitation(-1),
    "thread/queue/add": queue_input,
    "thread/queue/list": loaded_empty_list,
    "thread/queue/update": queue_input,
    "thread/queue/delete": queue_delete,
    "thread/queue/reorder": queue_reorder,
    "thread/queue/start": queue_start,
    "thread/settings/update": loaded_nothing,
    "thread/memoryMode/set": loaded_nothing,
    "thread/memory/read": memory_read,
    "memory/status": lambda call: {"v2ConsolidatedThreads": 0, "v2Ready": True},
    "memory/reset": _nothing,
    "rollout/compress": _nothing,
    "thread/backgroundTerminals/clean": loaded_nothing,
    "thread/backgroundTerminals/list": loaded_empty_list,
    "thread/backgroundTerminals/terminate": terminal_terminate,
    "project/list": _empty_list,
    "project/read": project_missing,
    "project/create": project_key,
    "project/import": project_key,
    "project/update": project_missing,
    "project/move": project_missing,
    "project/delete": project_missing,
    "thread/search": search_term,
    "thread/search/stream": search_term,
    "thread/search/cancel": _nothing,
    "thread/search/stream/cancel": _nothing,
    "thread/searchOccurrences": search_term,
    "thread/readState/update": read_state_update,
    "thread/items/read": items_read,
    "thread/prepareApprovedPlan": approved_plan,
    "plugin/search": _empty_list,
    "turn/settings/update": turn_settings,
    "thread/timeline/list": timeline,
    "thread/realtime/list": realtime_list,
    "remoteControl/disable": remote_disable,
    "remoteControl/status/read": remote_status,
    "collaborationMode/list": collaboration_modes,
    "mock/experimentalMethod": mock_method,
    "environment/info": environment_info,
    "environment/status": environment_status,
    "mcpServer/event/stream/stop": _nothing,
    "accountSession/list": account_sessions,
    "process/spawn": process_spawn,
    "process/writeStdin": process_write,
    "process/kill": process_kill,
    "process/resizePty": process_resize,
    "fuzzyFileSearch/sessionStart": search_session_start,
    "fuzzyFileSearch/sessionUpdate": search_session_update,
    "fuzzyFileSearch/sessionStop": search_session_stop,
}
