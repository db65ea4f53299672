#!/usr/bin/env python3
"""Adapter: ``codex-app-server-client`` (PyPI; imports as ``codex_app_server_client``) follows the harness plan.

Runs under an interpreter that has the package (see :mod:`conformance.clients.pypi`); imports nothing of
codex-harness. It drives the client as its README shows: ``CodexAppServer(codex_bin=...)`` as an async
context manager, ``start_thread()``, ``thread.run(text, on_event=...)`` for each turn (the "policy control"
pattern: the callback returns ``EventAction.INTERRUPT`` to cancel), ``resume_thread()``; approvals through
``low_level.on_server_request(method, handler)`` ("Handle approval requests"); a steer, and a cancel that
comes later than the event that triggers it, through the low-level ``turn_steer`` / ``turn_interrupt``.
Timeouts: the client's own defaults (``run(timeout_s=300)``, 30 s requests, 10 s interrupt), none of ours.
The result file is written after every turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

from codex_app_server_client import CodexAppServer, EventAction
from codex_app_server_client.types.events import (
    AgentMessageDeltaEvent,
    ItemStartedEvent,
    TurnStartedEvent,
)
from codex_app_server_client.types.threads import TurnInterruptParams, TurnSteerParams

APPROVALS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")
STATUS = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}
_FIELDS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens")


def _load_plan() -> dict[str, Any]:
    with open(os.environ["CODEX_HARNESS_PLAN"], encoding="utf-8") as fh:
        return json.load(fh)


class Report:
    def __init__(self, path: str) -> None:
        self.path = path
        self.turns: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any]) -> None:
        self.turns.append(entry)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            client = "codex-app-server-client via conformance/clients/app_server_client_adapter.py"
            json.dump({"client": client, "turns": self.turns}, fh)
        os.replace(tmp, self.path)


class TurnUsage:
    """``TurnResult.usage`` is "Token usage snapshot (last thread/tokenUsage/updated)", a ``ThreadTokenUsage``
    whose ``total`` is the thread's running total: the turn's usage is what ``total`` grew by."""

    def __init__(self) -> None:
        self.before = dict.fromkeys(_FIELDS, 0)

    def buckets(self, usage: Any) -> dict[str, int] | None:
        if usage is None:
            return None
        raw = usage.model_dump(by_alias=True, mode="json") if hasattr(usage, "model_dump") else usage
        total_raw = raw.get("total") if isinstance(raw, dict) else None
        if not isinstance(total_raw, dict):
            return None
        total = {f: int(total_raw.get(f) or 0) for f in _FIELDS}
        grown = {f: total[f] - self.before[f] if total[f] >= self.before[f] else total[f] for f in _FIELDS}
        self.before = total
        cached, write = grown["cachedInputTokens"], grown["cacheWriteInputTokens"]
        return {
            "input": max(0, grown["inputTokens"] - cached - write),
            "cache_read": cached,
            "cache_write": write,
            "output": grown["outputTokens"],
            "reasoning": grown["reasoningOutputTokens"],
        }


class PlanDeclined(Exception):
    """Raised by the approval handler where the plan answers with a JSON-RPC error (the client sends one)."""


class Approvals:
    """The plan's decisions by ordinal (the session's i-th approval request), as an ``on_server_request``
    handler. The handler runs inside the client's reader task, so an approval the plan cancels while it is
    pending can only be held (the turn interrupted meanwhile) for the interrupt budget, then answered cancel."""

    def __init__(self, plan: dict[str, Any], interrupt: Any) -> None:
        self.plan = plan
        self.seen = 0
        self.turn_seen = 0
        self.held: set[int] = set()
        self.interrupt = interrupt  # (turn id) -> coroutine
        self.release = asyncio.Event()
        self.hold_s = plan["budgets"]["interrupt_budget_ms"] / 1000
        self.pending: asyncio.Future[Any] | None = None  # the interrupt sent while an approval is held

    def start_turn(self, actions: list[dict[str, Any]]) -> None:
        self.turn_seen = 0
        self.held = {a["n"] for a in actions if a["do"] == "cancel" and a["at"] == "approval_pending"}
        self.release.clear()

    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        order = self.plan["approvals"]["in_order"]
        decision = order[self.seen] if self.seen < len(order) else self.plan["approvals"]["default"]
        self.seen += 1
        self.turn_seen += 1
        if self.turn_seen in self.held:
            self.pending = asyncio.ensure_future(self.interrupt(params.get("turnId", "")))
            try:
                await asyncio.wait_for(self.release.wait(), self.hold_s)
            except TimeoutError:
                pass
            return {"decision": "cancel"}
        if decision == "error":
            raise PlanDeclined("the plan answers this approval with an error")
        return {"decision": decision}


async def play_turn(
    server: CodexAppServer, thread: Any, spec: dict[str, Any], approvals: Approvals, usage_of: TurnUsage
) -> dict[str, Any]:
    low = server.low_level
    actions = [a for a in spec["actions"] if a["do"] in ("cancel", "steer")]
    approvals.start_turn(actions)
    entry: dict[str, Any] = {"turn": spec["turn"]}
    tasks: list[asyncio.Future[Any]] = []
    turn_id = ""

    async def act(action: dict[str, Any], delay_ms: int) -> None:
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if action["do"] == "cancel":
            await low.turn_interrupt(TurnInterruptParams(thread_id=thread.id, turn_id=turn_id))
        else:
            params = TurnSteerParams(
                thread_id=thread.id,
                expected_turn_id=turn_id,
                input=[{"type": "text", "text": action.get("text", "")}],
            )
            await low.turn_steer(params)

    counts = {"started": 0, "delta": 0, "item_started": 0}
    stream_actions = [a for a in actions if a["at"] in counts]
    fired: set[int] = set()

    def on_event(method: str, event: Any) -> EventAction | None:
        nonlocal turn_id
        if isinstance(event, TurnStartedEvent):
            counts["started"] += 1
            turn_id = event.turn.id
            for a in actions:
                if a["at"] == "delay":
                    tasks.append(asyncio.ensure_future(act(a, a["delay_ms"])))
        elif isinstance(event, AgentMessageDeltaEvent):
            counts["delta"] += 1
        elif isinstance(event, ItemStartedEvent):
            counts["item_started"] += 1
        verdict = None
        for i, a in enumerate(stream_actions):
            if i not in fired and counts[a["at"]] >= a["n"]:
                fired.add(i)
                if a["do"] == "cancel" and not a["delay_ms"]:
                    verdict = EventAction.INTERRUPT  # the documented way to cancel from the event stream
                else:
                    tasks.append(asyncio.ensure_future(act(a, a["delay_ms"])))
        return verdict

    try:
        result = await thread.run(spec["input"], on_event=on_event)
        entry.update(
            turn_id=result.turn_id or None,
            status=STATUS.get(str(result.status), "failed"),
            final_text=result.final_response,
            usage=usage_of.buckets(result.usage),
            error=result.error.message if result.error else None,
        )
        if entry["turn_id"] is None:
            del entry["turn_id"]
        return entry
    except TimeoutError as exc:  # run(timeout_s=300): the client's own turn timeout
        entry.update(status="timeout", error=f"TimeoutError: {exc}")
        return entry
    except Exception as exc:  # a failed request, a broken transport
        entry.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
        return entry
    finally:
        approvals.release.set()
        for task in tasks:
            if not task.done():
                task.cancel()


async def amain() -> int:
    plan = _load_plan()
    report = Report(os.environ["CODEX_HARNESS_RESULT"])
    remaining = list(plan["turns"])
    usage_of = TurnUsage()
    server = CodexAppServer(
        codex_bin=os.environ["CODEX_BIN"],
        experimental_api=plan["experimental_api"],
        opt_out_notification_methods=list(plan["opt_out_notifications"]) or None,
    )
    thread_box: list[Any] = []

    async def interrupt(turn_id: str) -> None:
        await server.low_level.turn_interrupt(TurnInterruptParams(thread_id=thread_box[0].id, turn_id=turn_id))

    approvals = Approvals(plan, interrupt)
    for method in APPROVALS:
        server.low_level.on_server_request(method, approvals)
    try:
        async with server:
            thread_box.append(await server.start_thread())
            while remaining:
                spec = remaining[0]
                if any(a["do"] == "resume" for a in spec["actions"]):
                    thread_box[0] = await server.resume_thread(thread_box[0].id)
                report.add(await play_turn(server, thread_box[0], spec, approvals, usage_of))
                remaining.pop(0)
    except Exception as exc:
        traceback.print_exc()
        for spec in remaining:
            report.add({"turn": spec["turn"], "status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(amain()))
