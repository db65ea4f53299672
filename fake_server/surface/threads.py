"""Thread methods beyond start/resume/turns, as the real binary answers them offline.

Views of a thread, as observed: a *live* one (loaded: ``thread/read``, ``thread/fork``) with its
environments and ``canAcceptDirectInput: true``; a *listed* one (``thread/list`` of a loaded thread)
with ``canAcceptDirectInput`` and ``forkedFromId`` null; a *stored* one (not loaded: archived, read
after an archive, ``thread/unarchive``) with ``environments`` null and status ``notLoaded``.
``thread/list`` shows a thread once its rollout has a turn (or it is a fork), newest first; ``archived: true`` shows
every archived thread. A stored thread with no turn has ``model`` null.
thread/start and thread/resume (:mod:`.core`) show the live view too (:func:`live_view`).
"""

from __future__ import annotations

import posixpath
import time
from typing import Any

from contracts.jsonval import as_object
from fake_server.ids import uuid_error
from fake_server.state import ThreadExtra, ThreadState
from fake_server.surface.call import Call
from fake_server.surface.errors import internal, invalid, invalid_params, not_supported
from fake_server.world import World

INCLUDE_TURNS_DEPRECATION = {
    "summary": "Full-history hydration is deprecated for paginated threads; omit `includeTurns` or set it to "
    "`false`, then page with `thread/turns/list` and `thread/items/list`.",
    "details": None,
}


# --- lookups ----------------------------------------------------------------------------------


def _check_id(thread_id: Any, what: str = "thread id") -> str:
    if not isinstance(thread_id, str):
        raise invalid(f"Invalid request: invalid type: {type(thread_id).__name__}, expected a string")
    if (err := uuid_error(thread_id)) is not None:
        raise invalid(f"invalid {what}: {err}")
    return thread_id


def _known(call: Call, thread_id: str) -> ThreadState | None:
    thread = call.world.threads.get(thread_id)
    if thread is None or call.state.extra(thread_id).deleted:
        return None
    return thread


def _stored(call: Call, thread_id: Any) -> tuple[ThreadState, ThreadExtra]:
    """A thread whose rollout can be found by id (else the real server's 'no rollout found')."""
    thread_id = _check_id(thread_id)
    thread = _known(call, thread_id)
    if thread is None or thread.ephemeral:
        raise invalid(f"no rollout found for thread id {thread_id}")
    return thread, call.state.extra(thread_id)


def loaded_thread(call: Call, thread_id: Any) -> tuple[ThreadState, ThreadExtra]:
    """A thread loaded in this server (else the real server's 'thread not found')."""
    thread_id = _check_id(thread_id)
    thread = _known(call, thread_id)
    extra = call.state.extra(thread_id)
    if thread is None or not extra.loaded or extra.archived:
        raise invalid(f"thread not found: {thread_id}")
    return thread, extra


def has_turns(thread: ThreadState) -> bool:
    return bool(thread.history)


def materialised(world: World, thread: ThreadState) -> bool:
    return has_turns(thread) or world.surface.extra(thread.thread_id).materialised


def resumable(world: World, thread: ThreadState) -> bool:
    """thread/resume finds a rollout: a turn ran, or the thread was named, forked or archived."""
    return not thread.ephemeral and (bool(thread.turns) or materialised(world, thread))


def load(world: World, thread: ThreadState) -> bool:
    """thread/resume of a thread this server had not loaded (archived then unarchived, or left by an earlier
    process of its home) loads it; True when it did. :func:`reloaded` then finishes the answer."""
    extra = world.surface.threads.get(thread.thread_id)
    if extra is not None and not extra.loaded and not extra.archived:
        extra.loaded = True
        return True
    return False


def reloaded(world: World, thread: ThreadState, result: dict[str, Any]) -> None:
    """Observed: the status change comes after the history deprecation notice, just before the answer,
    and the answer then carries ``serviceTier: "default"`` (read back from the rollout)."""
    world.box.notify("thread/status/changed", {"threadId": thread.thread_id, "status": thread.status})
    result["serviceTier"] = "default"


# --- views ------------------------------------------------------------------------------------


def live_view(world: World, thread: ThreadState) -> dict[str, Any]:
    """The thread as thread/start, thread/resume and thread/read show a loaded one, with what the surface
    methods changed (name, fork origin, status)."""
    body = world.shapes.thread(
        thread_id=thread.thread_id,
        cwd=thread.cwd,
        model=thread.model,
        created_s=thread.created_ms // 1000,
        path=thread.path,
        ephemeral=thread.ephemeral,
        originator=world.client.name,
        status=thread.status,
        preview=thread.preview,
        cli_version=world.profile.release,
    )
    if thread.model_provider is not None:
        body["modelProvider"] = thread.model_provider
    extra = world.surface.threads.get(thread.thread_id)
    if extra is None:
        return body
    body["name"] = extra.name
    body["forkedFromId"] = extra.forked_from
    if extra.git_info is not None:
        body["gitInfo"] = dict(extra.git_info)
    if not extra.loaded or extra.archived:
        body["status"] = {"type": "notLoaded"}
    return body


def _path(call: Call, thread: ThreadState, extra: ThreadExtra) -> str | None:
    if thread.path is None or not extra.archived:
        return thread.path
    return f"{call.codex_home}/archived_sessions/{posixpath.basename(thread.path)}"


def _stored_view(call: Call, thread: ThreadState, extra: ThreadExtra) -> dict[str, Any]:
    body = live_view(call.world, thread)
    body.update(environments=None, canAcceptDirectInput=None, status={"type": "notLoaded"})
    if not has_turns(thread) and not extra.model_written:
        # Observed: a thread with no turn is read back from its rollout without a model (a new process reading
        # it, thread/list with archived: true, thread/unarchive; tests/data/real/*/surface/observed.json), unless
        # something wrote a turn context there (probes/threads_fresh: a thread/revert).
        body["model"] = None
    body["path"] = _path(call, thread, extra)
    body["forkedFromId"] = None
    return body


def _listed_view(call: Call, thread: ThreadState, extra: ThreadExtra) -> dict[str, Any]:
    if not extra.loaded or extra.archived:
        return _stored_view(call, thread, extra)
    body = live_view(call.world, thread)
    body.update(canAcceptDirectInput=None, forkedFromId=None)
    return body


def _read_state(call: Call, thread: ThreadState, extra: ThreadExtra) -> dict[str, Any]:
    if has_turns(thread) and extra.forked_from is None:
        if extra.revision is None:
            extra.revision = call.world.ids.uuid4()
        first = thread.first_turn_id
        return {"firstUnread": {"type": "turn", "turnId": first}, "revision": extra.revision}
    return {"firstUnread": None, "revision": f"initial:{thread.thread_id}"}


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _listable(call: Call, thread: ThreadState, archived: bool) -> bool:
    """Observed: ``thread/list`` shows a thread with a turn (or a fork); ``archived: true`` every archived one,
    with a turn or not (archiving writes its rollout into ``archived_sessions``)."""
    extra = call.state.extra(thread.thread_id)
    if extra.deleted or thread.ephemeral or extra.archived != archived:
        return False
    return archived or has_turns(thread) or extra.forked_from is not None


# --- handlers ---------------------------------------------------------------------------------


def thread_list(call: Call) -> dict[str, Any]:
    archived = bool(call.params.get("archived"))
    threads = [t for t in call.world.threads.values() if _listable(call, t, archived)]
    threads.sort(key=lambda t: t.created_ms, reverse=True)
    data = [_listed_view(call, t, call.state.extra(t.thread_id)) for t in threads]
    states = {t.thread_id: _read_state(call, t, call.state.extra(t.thread_id)) for t in threads}
    cursor = _iso(min(t.created_ms for t in threads)) if threads else None
    return {"data": data, "readStates": states, "nextCursor": None, "backwardsCursor": cursor}


def thread_loaded_list(call: Call) -> dict[str, Any]:
    data = [
        tid
        for tid, t in call.world.threads.items()
        if not (e := call.state.extra(tid)).deleted and e.loaded and not e.archived and t is not None
    ]
    return {"data": data, "nextCursor": None}


def thread_read(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    thread = _known(call, thread_id)
    if thread is None:
        raise invalid(f"thread not loaded: {thread_id}")
    extra = call.state.extra(thread_id)
    live = extra.loaded and not extra.archived
    body = live_view(call.world, thread) if live else _stored_view(call, thread, extra)
    if call.params.get("includeTurns"):
        if not has_turns(thread) and not materialised(call.world, thread):
            # Observed: the attempt writes the rollout (a new process then reads and resumes the thread).
            extra.materialised = True
            raise not_supported("list_turns is not supported yet")
        call.before("deprecationNotice", INCLUDE_TURNS_DEPRECATION)
        body["turns"] = [{**turn, "itemsView": "full"} for turn in thread.history]
    read_state = _read_state(call, thread, extra) if materialised(call.world, thread) else None
    return {"thread": body, "readState": read_state}


def _cursor(thread_id: str, ordinal: int, kind: str) -> str:
    return (
        f'{{"requestedThreadId":"{thread_id}","rolloutOrdinal":{ordinal},'
        f'"includeAnchor":true,"scope":{{"kind":"{kind}"}}}}'
    )


def thread_turns_list(call: Call) -> dict[str, Any]:
    thread, extra = _stored(call, call.params.get("threadId"))
    if not has_turns(thread):
        # Observed (probes/threads_fresh, thread_store/observed.json): a thread never written answers "not
        # materialized"; one named, or read back by a later process, has an empty list; one written only by a
        # thread/read with its turns, in the same process, is "not supported yet".
        if not materialised(call.world, thread):
            raise invalid(
                f"thread {thread.thread_id} is not materialized yet; "
                "thread/turns/list is unavailable before first user message"
            )
        if not (extra.from_store or extra.name is not None):
            raise not_supported("list_turns is not supported yet")
        return {"data": [], "nextCursor": None, "backwardsCursor": None}
    data = [{**turn, "itemsView": "summary"} for turn in thread.history]
    return {"data": data, "nextCursor": None, "backwardsCursor": _cursor(thread.thread_id, 1, "turns")}


def thread_items_list(call: Call) -> dict[str, Any]:
    thread, _extra = _stored(call, call.params.get("threadId"))
    if not has_turns(thread):
        raise not_supported("thread/items/list is not supported yet")
    data = [
        {
            "turnId": turn["id"],
            "item": item,
            "startedAtMs": item.get("startedAtMs"),
            "completedAtMs": item.get("completedAtMs"),
        }
        for turn in thread.history
        for item in turn.get("items", [])
    ]
    ordinal = 4 * len(data)
    return {
        "data": data,
        "nextCursor": None,
        "backwardsCursor": _cursor(thread.thread_id, ordinal, "itemsByCreatedAtOrdinal"),
    }


def thread_name_set(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    thread = _known(call, thread_id)
    if thread is None or thread.ephemeral:
        raise invalid(f"no rollout found for thread id {thread_id}")
    extra = call.state.extra(thread_id)
    extra.name = call.params.get("name")
    extra.materialised = True
    call.after("thread/name/updated", {"threadId": thread_id, "threadName": extra.name})
    return {}


def thread_archive(call: Call) -> dict[str, Any]:
    thread, extra = _stored(call, call.params.get("threadId"))
    if extra.archived:
        raise invalid(f"no rollout found for thread id {thread.thread_id}")
    if extra.loaded:
        call.before("thread/status/changed", {"threadId": thread.thread_id, "status": {"type": "notLoaded"}})
    extra.archived, extra.loaded, extra.materialised = True, False, True
    call.after("thread/archived", {"threadId": thread.thread_id})
    return {}


def thread_unarchive(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    thread = _known(call, thread_id)
    extra = call.state.extra(thread_id)
    if thread is None or not extra.archived:
        raise invalid(f"no archived rollout found for thread id {thread_id}")
    extra.archived = False
    call.after("thread/unarchived", {"threadId": thread_id})
    return {"thread": _stored_view(call, thread, extra)}


def thread_unsubscribe(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    thread = _known(call, thread_id)
    extra = call.state.extra(thread_id)
    if thread is None or not extra.loaded or extra.archived:
        return {"status": "notLoaded"}
    return {"status": "unsubscribed"}


def thread_fork(call: Call) -> dict[str, Any]:
    source, source_extra = _stored(call, call.params.get("threadId"))
    world = call.world
    fork_id = world.ids.uuid7(world.now_ms)
    path = None
    if source.path is not None:
        path = posixpath.join(posixpath.dirname(source.path), f"{posixpath.basename(source.path)[:-42]}{fork_id}.jsonl")
    fork = ThreadState(
        thread_id=fork_id,
        cwd=source.cwd,
        created_ms=world.now_ms,
        ephemeral=bool(call.params.get("ephemeral")),
        path=path,
        approval_policy=source.approval_policy,
        sandbox=source.sandbox,
        model=source.model,
        reviewer=source.reviewer,
        preview=source.preview,
        turns=list(source.turns),
        history=[dict(turn) for turn in source.history],
        total=source.total,
    )
    world.threads[fork_id] = fork
    extra = call.state.extra(fork_id)
    extra.forked_from, extra.name, extra.materialised = source.thread_id, source_extra.name, True
    body = live_view(call.world, fork)
    if not call.params.get("excludeTurns"):
        call.before("deprecationNotice", world.shapes.full_history_deprecation())
        body["turns"] = [{**turn, "itemsView": "full"} for turn in fork.history]
    result = world.shapes.thread_session_result(
        body, model=fork.model, cwd=fork.cwd, approval_policy=fork.approval_policy, sandbox=fork.sandbox
    )
    if "approvalsReviewer" in result:
        result["approvalsReviewer"] = fork.reviewer
    if source.usage_frames:
        usage = dict(source.usage_frames[-1]["params"])
        call.after("thread/tokenUsage/updated", {**usage, "threadId": fork_id})
    call.after("thread/started", {"thread": {**body, "turns": []}})
    # The real server writes the fork its own trace bundle (started, configured, closed at shutdown).
    world.box.trace("thread_started", thread_id=fork_id, model=fork.model, cwd=fork.cwd)
    return result


def thread_delete(call: Call) -> dict[str, Any]:
    thread, extra = _stored(call, call.params.get("threadId"))
    if extra.loaded and not extra.archived:
        call.before("thread/status/changed", {"threadId": thread.thread_id, "status": {"type": "notLoaded"}})
    extra.deleted, extra.loaded = True, False
    call.after("thread/deleted", {"threadId": thread.thread_id})
    return {}


# --- goals ------------------------------------------------------------------------------------


def goal_get(call: Call) -> dict[str, Any]:
    _thread, extra = loaded_thread(call, call.params.get("threadId"))
    return {"goal": extra.goal}


def goal_set(call: Call) -> dict[str, Any]:
    thread, extra = loaded_thread(call, call.params.get("threadId"))
    now = call.now_s()
    previous = extra.goal or {}
    goal = {
        "threadId": thread.thread_id,
        "objective": call.params.get("objective", previous.get("objective", "")),
        "status": call.params.get("status") or previous.get("status") or "active",
        "tokenBudget": call.params.get("tokenBudget", previous.get("tokenBudget")),
        "tokensUsed": previous.get("tokensUsed", 0),
        "timeUsedSeconds": previous.get("timeUsedSeconds", 0),
        "createdAt": previous.get("createdAt", now),
        "updatedAt": now,
    }
    extra.goal = goal
    call.after("thread/goal/updated", {"threadId": thread.thread_id, "turnId": None, "goal": dict(goal)})
    return {"goal": dict(goal)}


def goal_clear(call: Call) -> dict[str, Any]:
    thread, extra = loaded_thread(call, call.params.get("threadId"))
    cleared = extra.goal is not None
    extra.goal = None
    if cleared:
        call.after("thread/goal/cleared", {"threadId": thread.thread_id})
    return {"cleared": cleared}


# --- metadata, attachments, sections -----------------------------------------------------------


def metadata_update(call: Call) -> dict[str, Any]:
    thread, extra = _stored(call, call.params.get("threadId"))
    if not any(k != "threadId" and v is not None for k, v in call.params.items()):
        raise invalid("thread metadata update must include at least one field")
    body = live_view(call.world, thread) if extra.loaded and not extra.archived else _stored_view(call, thread, extra)
    if isinstance(call.params.get("gitInfo"), dict):
        extra.git_info = {k: call.params["gitInfo"].get(k) for k in ("sha", "branch", "originUrl")}
        body["gitInfo"] = dict(extra.git_info)
    body["canAcceptDirectInput"] = None  # observed: the answer is read back from the store
    return {"thread": body}


def _attachment_key(call: Call, thread_id: str) -> tuple[str, str, str]:
    return (thread_id, str(call.params.get("attachmentType")), str(call.params.get("identityKey")))


def attachment_list(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    data = [a for (tid, _t, _k), a in call.state.attachments.items() if tid == thread_id]
    return {"data": data, "nextCursor": None}


def attachment_add(call: Call) -> dict[str, Any]:
    thread, _extra = _stored(call, call.params.get("threadId"))
    key = _attachment_key(call, thread.thread_id)
    existing = call.state.attachments.get(key)
    outcome = "updated" if existing is not None else "created"
    attachment = {
        "id": existing["id"] if existing else call.world.ids.uuid7(call.world.now_ms),
        "attachmentType": key[1],
        "identityKey": key[2],
        "payload": call.params.get("payload"),
        "createdAt": existing["createdAt"] if existing else call.now_s(),
    }
    call.state.attachments[key] = attachment
    call.after("thread/attachment/updated", _attachment_note(thread.thread_id, attachment, outcome))
    return {"outcome": outcome, "attachment": dict(attachment)}


def _attachment_note(thread_id: str, attachment: dict[str, Any], operation: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "attachmentType": attachment["attachmentType"],
        "identityKey": attachment["identityKey"],
        "attachmentId": attachment["id"],
        "operation": operation,
    }


def attachment_owner_list(call: Call) -> dict[str, Any]:
    kind, key = str(call.params.get("attachmentType")), str(call.params.get("identityKey"))
    owners = [
        {"threadId": tid, "archived": call.state.extra(tid).archived}
        for (tid, t, k) in call.state.attachments
        if (t, k) == (kind, key)
    ]
    return {"data": owners, "nextCursor": None}


def attachment_remove(call: Call) -> dict[str, Any]:
    thread_id = _check_id(call.params.get("threadId"))
    attachment = call.state.attachments.pop(_attachment_key(call, thread_id), None)
    if attachment is not None:
        call.after("thread/attachment/updated", _attachment_note(thread_id, attachment, "deleted"))
    return {}


def section_list(call: Call) -> dict[str, Any]:
    return {"data": [dict(s) for s in call.state.sections.values()], "nextCursor": None}


def section_create(call: Call) -> dict[str, Any]:
    section: dict[str, Any] = {
        "id": call.world.ids.uuid7(call.world.now_ms),
        "name": call.params.get("name"),
        "appearance": None,
    }
    if "appearance" in call.params:
        section["appearance"] = call.params["appearance"]
    call.state.sections[section["id"]] = section
    return {"section": dict(section)}


def _section(call: Call) -> dict[str, Any]:
    section_id = call.params.get("sectionId")
    section = call.state.sections.get(section_id) if isinstance(section_id, str) else None
    if section is None:
        raise invalid_params(f"thread section not found: {section_id}")
    return section


def section_update(call: Call) -> dict[str, Any]:
    section = _section(call)
    if "name" in call.params:
        section["name"] = call.params["name"]
    if "appearance" in call.params:
        section["appearance"] = call.params["appearance"]
    return {"section": dict(section)}


def section_delete(call: Call) -> dict[str, Any]:
    section = _section(call)
    del call.state.sections[section["id"]]
    return {}


def section_move(call: Call) -> dict[str, Any]:
    thread, extra = _stored(call, call.params.get("threadId"))
    section_id = call.params.get("sectionId")
    if section_id is not None:
        _section(call)
    extra.section = section_id
    call.after("thread/section/changed", {"threadId": thread.thread_id, "sectionId": section_id})
    return {}


# --- requests that need a loaded thread (and a model or a shell to go further) -----------------


def needs_loaded(call: Call) -> Any:
    """compact/start, shellCommand: 'thread not found' when not loaded, else ``{}``.

    On a loaded thread the real binary answers and then starts a turn of its own (a compaction
    through the model, the user's shell command); the fake answers the same and starts nothing
    (it never runs host commands; script more with ``[[methods]]``).
    """
    loaded_thread(call, call.params.get("threadId"))
    return {}


def review_start(call: Call) -> dict[str, Any]:
    """The review turn's answer as the real server writes it; the review itself (a model turn) is not played."""
    thread, _extra = loaded_thread(call, call.params.get("threadId"))
    target = as_object(call.params.get("target"))
    review = "current changes" if target.get("type") == "uncommittedChanges" else str(target.get("type", "review"))
    turn_id = call.world.ids.uuid7(call.world.now_ms)
    shapes = call.world.shapes
    item = {**shapes.user_message_item(turn_id, review, 0, None), "startedAtMs": None}
    turn = {**shapes.turn(turn_id), "rootTurnId": None, "items": [item]}
    return {"turn": turn, "reviewThreadId": thread.thread_id}


def mcp_tool_call(call: Call) -> Any:
    loaded_thread(call, call.params.get("threadId"))
    raise internal(f"unknown MCP server '{call.params.get('server')}'")


def inject_items(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    if not call.params.get("items"):
        raise invalid("items must not be empty")
    call.state.extra(call.params["threadId"]).model_written = True
    return {}


def revert(call: Call) -> dict[str, Any]:
    """Observed: the thread is reloaded from its rollout (notLoaded, then idle) before the turn is
    looked up; the answer carries the thread without turns and null cursors, then ``thread/reverted``."""
    thread, extra = loaded_thread(call, call.params.get("threadId"))
    extra.materialised = extra.model_written = True  # observed: even when the turn is not found
    before = call.params.get("beforeTurnId")
    for status in ("notLoaded", "idle"):
        call.before("thread/status/changed", {"threadId": thread.thread_id, "status": {"type": status}})
    if before not in thread.turns:
        raise invalid(f"turn not found: {before}")
    index = thread.turns.index(before)
    del thread.turns[index:]
    thread.history = [t for t in thread.history if t["id"] in thread.turns]
    call.after("thread/reverted", {"threadId": thread.thread_id})
    return {"thread": live_view(call.world, thread), "turnsBackwardsCursor": None, "itemsBackwardsCursor": None}


def approve_guardian_denied(call: Call) -> dict[str, Any]:
    loaded_thread(call, call.params.get("threadId"))
    event = call.params.get("event")
    if not isinstance(event, dict) or "id" not in event:
        raise invalid("invalid Guardian denial event: missing field `id`")
    return {}


HANDLERS = {
    "thread/list": thread_list,
    "thread/loaded/list": thread_loaded_list,
    "thread/read": thread_read,
    "thread/turns/list": thread_turns_list,
    "thread/items/list": thread_items_list,
    "thread/name/set": thread_name_set,
    "thread/archive": thread_archive,
    "thread/unarchive": thread_unarchive,
    "thread/unsubscribe": thread_unsubscribe,
    "thread/fork": thread_fork,
    "thread/delete": thread_delete,
    "thread/goal/get": goal_get,
    "thread/goal/set": goal_set,
    "thread/goal/clear": goal_clear,
    "thread/metadata/update": metadata_update,
    "thread/attachment/list": attachment_list,
    "thread/attachment/add": attachment_add,
    "thread/attachmentOwner/list": attachment_owner_list,
    "thread/attachment/remove": attachment_remove,
    "threadSection/list": section_list,
    "threadSection/create": section_create,
    "threadSection/update": section_update,
    "threadSection/delete": section_delete,
    "thread/section/move": section_move,
    "thread/compact/start": needs_loaded,
    "thread/shellCommand": needs_loaded,
    "review/start": review_start,
    "mcpServer/tool/call": mcp_tool_call,
    "thread/inject_items": inject_items,
    "thread/revert": revert,
    "thread/approveGuardianDeniedAction": approve_guardian_denied,
}
