#!/usr/bin/env python3
"""Adapter: ``codex-python-sdk-unofficial`` (PyPI; imports as ``codex_agent_sdk``) follows the harness plan.

Runs under an interpreter that has the package (see :mod:`conformance.clients.pypi`); imports nothing of
codex-harness. It drives the SDK as its docs (README, docs/api.md) show for a long-lived thread:
``CodexSDKClient(options, app_server=AppServerConfig(codex_bin=...), approval_handler=...)``,
``start_thread()``, ``query(text)`` returning a ``TurnHandle`` whose events are iterated, ``handle.wait()``
for the ``TurnResult``, ``handle.interrupt()`` / ``handle.steer()`` at the plan's triggers,
``resume_thread()``. Approvals go through the documented async ``approval_handler``; one the plan cancels
while it is pending is left unhandled (the handler returns ``None``, as documented) and the turn interrupted;
one the plan answers with a JSON-RPC error is rejected through the low-level client's public
``reject_server_request``. Timeouts: the SDK's own defaults (``TimeoutPolicy``: none on requests and turns),
none of ours. The result file is written after every turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

from codex_agent_sdk import (
    AgentTextDeltaEvent,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRequestedEvent,
    AppServerConfig,
    CodexSDKClient,
    ItemStartedEvent,
    TokenUsageUpdatedEvent,
    TurnStartedEvent,
)

APPROVALS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")
STATUS = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}
DECISIONS = {
    "accept": ApprovalDecision.accept,
    "acceptForSession": ApprovalDecision.accept_for_session,
    "decline": ApprovalDecision.decline,
    "cancel": ApprovalDecision.cancel,
}
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
            client = "codex-python-sdk-unofficial via conformance/clients/unofficial_sdk_adapter.py"
            json.dump({"client": client, "turns": self.turns}, fh)
        os.replace(tmp, self.path)


def _wire(model: Any) -> dict[str, Any]:
    if model is None:
        return {}
    if hasattr(model, "model_dump"):
        return dict(model.model_dump(by_alias=True, mode="json"))
    return dict(model) if isinstance(model, dict) else {}


class TurnUsage:
    """``TurnResult.token_usage`` is the turn's latest ``ThreadTokenUsage`` (docs/api.md: "latest token usage");
    its ``total`` is the thread's running total, so the turn's usage is what ``total`` grew by."""

    def __init__(self) -> None:
        self.before = dict.fromkeys(_FIELDS, 0)

    def buckets(self, usage: Any) -> dict[str, int] | None:
        total_raw = _wire(usage).get("total")
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


class Approvals:
    """The plan's decisions by ordinal (the session's i-th approval request), as an ``approval_handler``."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.seen = 0
        self.turn_seen = 0
        self.held: set[int] = set()
        self.on_hold: Any = None  # called with the request left pending for the plan's cancel
        self.errors: set[Any] = set()  # request ids the plan answers with an error

    def start_turn(self, actions: list[dict[str, Any]]) -> None:
        self.turn_seen = 0
        self.held = {a["n"] for a in actions if a["do"] == "cancel" and a["at"] == "approval_pending"}

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision | None:
        if request.method not in APPROVALS:
            return None  # documented: unhandled, left to the event or server-request stream
        order = self.plan["approvals"]["in_order"]
        decision = order[self.seen] if self.seen < len(order) else self.plan["approvals"]["default"]
        self.seen += 1
        self.turn_seen += 1
        if self.turn_seen in self.held:
            if self.on_hold is not None:
                self.on_hold()
            return None  # the user cancels while it is pending: leave it open
        if decision == "error":
            self.errors.add(request.request_id)
            return None
        return DECISIONS[decision]()


async def play_turn(
    client: CodexSDKClient, spec: dict[str, Any], approvals: Approvals, usage_of: TurnUsage
) -> dict[str, Any]:
    actions = [a for a in spec["actions"] if a["do"] in ("cancel", "steer")]
    approvals.start_turn(actions)
    entry: dict[str, Any] = {"turn": spec["turn"]}
    tasks: list[asyncio.Task[Any]] = []
    handle: Any = None

    async def act(action: dict[str, Any], delay_ms: int) -> None:
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if action["do"] == "cancel":
            await handle.interrupt()
        else:
            await handle.steer(action.get("text", ""))

    def fire(action: dict[str, Any], delay_ms: int) -> None:
        tasks.append(asyncio.ensure_future(act(action, delay_ms)))

    held = [a for a in actions if a["at"] == "approval_pending"]
    approvals.on_hold = (lambda: fire(held[0], held[0]["delay_ms"])) if held else None
    try:
        handle = await client.query(spec["input"])
        entry["turn_id"] = handle.turn_id
        for a in actions:
            if a["at"] == "delay":
                fire(a, a["delay_ms"])
        counts = {"started": 0, "delta": 0, "item_started": 0}
        stream_actions = [a for a in actions if a["at"] in counts]
        fired: set[int] = set()
        low = await client._get_client()  # the AppServerClient the high-level client drives
        async for event in handle:
            if isinstance(event, TurnStartedEvent):
                counts["started"] += 1
            elif isinstance(event, AgentTextDeltaEvent):
                counts["delta"] += 1
            elif isinstance(event, ItemStartedEvent):
                counts["item_started"] += 1
            elif isinstance(event, ApprovalRequestedEvent) and event.request.request_id in approvals.errors:
                await low.reject_server_request(event.request.request_id, -32000, "declined by the plan (error)")
            elif isinstance(event, TokenUsageUpdatedEvent):
                pass
            for i, a in enumerate(stream_actions):
                if i not in fired and counts[a["at"]] >= a["n"]:
                    fired.add(i)
                    fire(a, a["delay_ms"])
        result = await handle.wait()
        entry.update(
            status=STATUS.get(str(result.status), "failed"),
            final_text=result.assistant_text or "",
            usage=usage_of.buckets(result.token_usage),
            error=repr(result.error)[:500] if result.error else None,
        )
        return entry
    except Exception as exc:  # the SDK raises on a broken transport or a failed request
        entry.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
        return entry
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()


async def amain() -> int:
    plan = _load_plan()
    report = Report(os.environ["CODEX_HARNESS_RESULT"])
    approvals = Approvals(plan)
    config = AppServerConfig(
        codex_bin=os.environ["CODEX_BIN"],
        experimental_api=plan["experimental_api"],
        opt_out_notification_methods=tuple(plan["opt_out_notifications"]),
    )
    remaining = list(plan["turns"])
    usage_of = TurnUsage()
    try:
        async with CodexSDKClient(app_server=config, approval_handler=approvals) as client:
            thread_id = await client.start_thread()
            while remaining:
                spec = remaining[0]
                if any(a["do"] == "resume" for a in spec["actions"]):
                    thread_id = await client.resume_thread(thread_id)
                report.add(await play_turn(client, spec, approvals, usage_of))
                remaining.pop(0)
    except Exception as exc:
        traceback.print_exc()
        for spec in remaining:
            report.add({"turn": spec["turn"], "status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(amain()))
