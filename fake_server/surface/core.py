"""The handshake and the turn core: ``initialize``, thread/start, thread/resume, turn/start, turn/steer, turn/interrupt.

These handlers answer through the world's outbox themselves, at the moment the real server does (a turn's
answer comes between its state changes; an interrupt is answered when the turn ends), and refuse with
:class:`~fake_server.surface.errors.RequestError`. Turns run as programs (:mod:`fake_server.turns`).
Their params are checked here as serde would (:func:`check_params`), before the engine's gates.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable
from typing import Any

from fake_server import home_config, policy, turns
from fake_server.faults import strike
from fake_server.ids import uuid_error
from fake_server.policy import Settings
from fake_server.serde_words import json_type
from fake_server.state import ThreadState, TurnRun
from fake_server.surface import static
from fake_server.surface.call import Call
from fake_server.surface.errors import invalid
from fake_server.surface.threads import live_view, load, reloaded, resumable
from fake_server.world import World

STARTUP_INTERRUPT_MS = 5


# --- the handshake ------------------------------------------------------------------------------


def initialize(call: Call) -> None:
    world, box = call.world, call.world.box
    if world.client.initialized:
        raise invalid("Already initialized")
    strike(box, "initialize")
    if box.silent or box.stdout_closed or box.refuse_overloaded(call.request.id):
        return
    info = call.params["clientInfo"]
    caps = call.params.get("capabilities") or {}
    world.client.name = info["name"]
    world.client.experimental = bool(caps.get("experimentalApi"))
    opt_out = caps.get("optOutNotificationMethods") or []
    box.opt_out = frozenset(m for m in opt_out if isinstance(m, str))
    world.client.initialized = True
    shapes, host = world.shapes, world.host
    result = shapes.initialize_result(info["name"], info["version"], host.codex_home, world.profile.release)
    box.respond(call.request.id, result)
    box.notify("configWarning", shapes.config_warning())
    box.notify("remoteControl/status/changed", shapes.remote_control_status(host.hostname, host.installation_id))


# --- threads --------------------------------------------------------------------------------------


def _resolve_cwd(world: World, cwd: str | None) -> str:
    if not cwd:
        return world.host.cwd
    return posixpath.normpath(posixpath.join(world.host.cwd, cwd))


def thread_start(call: Call) -> None:
    world, params = call.world, call.params
    config = world.scenario.config
    now_ms = world.now_ms
    thread_id = world.ids.uuid7(now_ms)
    cwd = _resolve_cwd(world, params.get("cwd"))
    ephemeral = bool(params.get("ephemeral"))
    stamp = time.strftime("%Y/%m/%d", time.gmtime(now_ms / 1000))
    fname = time.strftime("rollout-%Y-%m-%dT%H-%M-%S", time.gmtime(now_ms / 1000))
    path = None if ephemeral else f"{world.host.codex_home}/sessions/{stamp}/{fname}-{thread_id}.jsonl"
    thread = ThreadState(
        thread_id=thread_id,
        cwd=cwd,
        created_ms=now_ms,
        ephemeral=ephemeral,
        path=path,
        approval_policy=policy.normalise(
            world.profile.policy(),
            params.get("approvalPolicy") or configured(world, "approval_policy", config.approval_policy),
        ),
        sandbox=params.get("sandbox") or configured(world, "sandbox_mode", config.sandbox),
        model=params.get("model") or configured_model(world),
        reviewer=params.get("approvalsReviewer") or configured(world, "approvals_reviewer", "user"),
    )
    if world.setup is not None:
        thread.model_provider = world.setup.provider
    world.threads[thread_id] = thread
    body = live_view(world, thread)
    result = world.shapes.thread_session_result(
        body, model=thread.model, cwd=cwd, approval_policy=thread.approval_policy, sandbox=thread.sandbox
    )
    if thread.model_provider is not None and "modelProvider" in result:
        result["modelProvider"] = thread.model_provider
    if "approvalsReviewer" in result:
        result["approvalsReviewer"] = thread.reviewer
    world.box.respond(call.request.id, result)
    world.box.notify("thread/started", {"thread": body})
    world.box.trace("thread_started", thread_id=thread_id, model=thread.model, cwd=cwd)


def configured(world: World, key: str, default: Any) -> Any:
    """An approval setting from the home's ``config.toml`` / ``-c`` (the setup), else ``default`` (the scenario's)."""
    if world.setup is None:
        return default
    value = world.setup.effective.get(key)
    return default if value is None else value


def configured_model(world: World) -> str:
    """A new thread's model: the home's setup's (else the release's default model), or the scenario's in process."""
    if world.setup is None:
        return world.scenario.config.model
    return (
        world.setup.model
        or home_config.default_model(static.answer(world.profile, "model/list", cwd="", codex_home=""))
        or ""
    )


def thread_resume(call: Call) -> None:
    world, box = call.world, call.world.box
    thread_id = call.params["threadId"]
    if (err := uuid_error(thread_id)) is not None:
        raise invalid(f"invalid session id: {err}")
    thread = world.threads.get(thread_id)
    # The real server resumes from the rollout file, which exists once a turn has run (or it was named...).
    if thread is None or not resumable(world, thread):
        raise invalid(f"no rollout found for thread id {thread_id}")
    if (extra := world.surface.threads.get(thread_id)) is not None and extra.archived:
        raise invalid(f"session {thread_id} is archived. Run `codex unarchive {thread_id}` to unarchive it first.")
    loaded = load(world, thread)  # a thread unloaded by thread/archive, or kept by another process, comes back
    body = live_view(world, thread)
    if not call.params.get("excludeTurns"):
        # Observed: full history (finished turns and the running one, items so far), with a nudge first.
        box.notify("deprecationNotice", world.shapes.full_history_deprecation())
        run = thread.active
        live = [turns.history_turn(box, run)] if run is not None and not run.ended else []
        body["turns"] = [*thread.history, *live]
    result = world.shapes.resume_result(
        body,
        model=thread.model,
        cwd=thread.cwd,
        approval_policy=thread.approval_policy,
        sandbox=thread.sandbox,
        thread_id=thread.thread_id,
        turns=len(thread.turns),
    )
    if thread.model_provider is not None and "modelProvider" in result:
        result["modelProvider"] = thread.model_provider
    if "approvalsReviewer" in result:
        result["approvalsReviewer"] = thread.reviewer
    if loaded:
        reloaded(world, thread, result)
    box.respond(call.request.id, result)
    if thread.usage_frames and (loaded or not call.params.get("excludeTurns")):
        # Observed: the usage restored from the rollout, as its last turn reported it, when the resume loads the
        # thread or answers its turns (not for a loaded thread resumed with excludeTurns).
        box.notify("thread/tokenUsage/updated", {**thread.usage_frames[-1]["params"], "threadId": thread.thread_id})
    box.notify("thread/goal/cleared", {"threadId": thread.thread_id})


# --- turns ----------------------------------------------------------------------------------------


def _thread(world: World, thread_id: str) -> ThreadState:
    if (err := uuid_error(thread_id)) is not None:
        raise invalid(f"invalid thread id: {err}")
    thread = world.threads.get(thread_id)
    if thread is None:
        raise invalid(f"thread not found: {thread_id}")
    return thread


def input_text(items: list[dict[str, Any]]) -> str:
    return "\n".join(str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("type") == "text")


def turn_start(call: Call) -> None:
    world, box, shapes = call.world, call.world.box, call.world.shapes
    thread = _thread(world, call.params["threadId"])
    text = input_text(call.params["input"])
    if thread.model not in shapes.known_models:
        box.notify("warning", shapes.model_warning(thread.thread_id, thread.model))
    if thread.active is not None and not thread.active.ended:
        run = thread.active
        box.respond(call.request.id, {"turn": shapes.turn(run.turn_id)})
        turns.fold_input(box, thread, run, text)
        return
    if thread.model not in shapes.known_models:
        # Traced once per turn that starts (input folded into a running turn is not a new one).
        box.trace("protocol_event", thread_id=thread.thread_id, event_type="warning")
    settings = Settings(thread.approval_policy, thread.sandbox, thread.reviewer)
    settings.override(call.params)  # kept for the turns after this one, as the real binary keeps them
    settings.approval_policy = policy.normalise(world.profile.policy(), settings.approval_policy)
    thread.approval_policy, thread.sandbox, thread.reviewer = (
        settings.approval_policy,
        settings.sandbox,
        settings.reviewer,
    )
    index = world.next_turn_index()
    run = TurnRun(
        thread_id=thread.thread_id,
        turn_id=world.ids.uuid7(world.now_ms),
        index=index,
        script=world.scenario.turn(index),
        started_ms=world.now_ms,
        max_retries=world.scenario.config.stream_max_retries,
        experimental=world.client.experimental,
        profile=world.profile,
        auto_review=world.scenario.config.auto_review,
    )
    turns.start_turn(box, thread, run, call.request.id, text)


def turn_steer(call: Call) -> None:
    thread = _thread(call.world, call.params["threadId"])
    run = thread.active
    if run is None or run.ended:
        raise invalid("no active turn to steer")
    expected = call.params["expectedTurnId"]
    if expected != run.turn_id:
        raise invalid(f"expected active turn id `{expected}` but found `{run.turn_id}`")
    call.world.box.respond(call.request.id, {"turnId": run.turn_id})
    turns.fold_input(call.world.box, thread, run, input_text(call.params["input"]))


def turn_interrupt(call: Call) -> None:
    box = call.world.box
    thread = _thread(call.world, call.params["threadId"])
    run = thread.active
    turn_id = call.params["turnId"]
    if turn_id == "":
        # A "startup interrupt": acknowledged at once; observed to abort a running turn all the same.
        box.respond(call.request.id, {})
        if run is not None and not run.ended:
            # The abort lands a few ms later, after requests sent right behind it (observed).
            active = run

            def abort() -> None:
                if not active.ended:
                    turns.interrupt(box, thread, active, None)

            box.after(STARTUP_INTERRUPT_MS, abort)
        return
    if run is None or run.ended:
        raise invalid("no active turn to interrupt")
    if turn_id != run.turn_id:
        raise invalid(f"expected active turn id {turn_id} but found {run.turn_id}")
    if turns.join_interrupt(run, call.request.id):
        return  # an earlier interrupt is landing: this one is answered with it
    turns.interrupt(box, thread, run, call.request.id)


HANDLERS: dict[str, Callable[[Call], None]] = {
    "initialize": initialize,
    "thread/start": thread_start,
    "thread/resume": thread_resume,
    "turn/start": turn_start,
    "turn/steer": turn_steer,
    "turn/interrupt": turn_interrupt,
}


# --- params checking (serde's first complaint, in declaration order) ---------------------------

_USER_INPUT_TYPES = ("text", "image", "localImage", "audio", "localAudio", "skill", "mention")
_REQUIRED: dict[str, tuple[tuple[str, type | None], ...]] = {
    "initialize": (("clientInfo", dict),),
    "thread/start": (),
    "thread/resume": (("threadId", str),),
    "turn/start": (("threadId", str), ("input", list)),
    "turn/steer": (("threadId", str), ("input", list), ("expectedTurnId", str)),
    "turn/interrupt": (("threadId", str), ("turnId", str)),
}
_OPTIONAL_STRINGS = ("cwd", "model", "approvalPolicy", "sandbox")
_EXPECTED: dict[type, str] = {str: "a string", list: "a sequence", dict: "struct"}


def check_params(method: str, params: Any) -> dict[str, Any]:
    """The params of a method of :data:`HANDLERS`, refused as serde refuses them (its first complaint)."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid(f"Invalid request: invalid type: {json_type(params)}, expected struct")
    for name, kind in _REQUIRED[method]:
        if name not in params:
            raise invalid(f"Invalid request: missing field `{name}`")
        if kind is not None and not isinstance(params[name], kind):
            raise invalid(f"Invalid request: invalid type: {json_type(params[name])}, expected {_EXPECTED[kind]}")
    for name in _OPTIONAL_STRINGS:
        value = params.get(name)
        if name == "approvalPolicy" and isinstance(value, dict) and isinstance(value.get("granular"), dict):
            continue  # the granular form of the schema's AskForApproval
        if value is not None and not isinstance(value, str):
            raise invalid(f"Invalid request: invalid type: {json_type(value)}, expected a string")
    if method == "initialize":
        info = params["clientInfo"]
        for name in ("name", "version"):
            if name not in info:
                raise invalid(f"Invalid request: missing field `{name}`")
            if not isinstance(info[name], str):
                raise invalid(f"Invalid request: invalid type: {json_type(info[name])}, expected a string")
        caps = params.get("capabilities")
        if caps is not None and not isinstance(caps, dict):
            raise invalid(f"Invalid request: invalid type: {json_type(caps)}, expected struct")
    if method in ("turn/start", "turn/steer"):
        for entry in params["input"]:
            if not isinstance(entry, dict):
                raise invalid(f"Invalid request: invalid type: {json_type(entry)}, expected internally tagged enum")
            kind = entry.get("type")
            if kind not in _USER_INPUT_TYPES:
                if kind is None:
                    raise invalid("Invalid request: missing field `type`")
                listed = ", ".join(f"`{t}`" for t in _USER_INPUT_TYPES)
                raise invalid(f"Invalid request: unknown variant `{kind}`, expected one of {listed}")
            if kind == "text" and not isinstance(entry.get("text"), str):
                raise invalid("Invalid request: missing field `text`")
    return params
