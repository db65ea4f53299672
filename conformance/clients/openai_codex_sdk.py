#!/usr/bin/env python3
"""Adapter: the official Python SDK (``openai-codex`` on PyPI) follows the harness plan.

Runs under an interpreter that has ``openai_codex`` (see :mod:`conformance.clients.sdk`); imports nothing
of codex-harness. It drives the SDK the way its documentation shows: ``Codex(CodexConfig(codex_bin=...))``,
``thread_start()``, ``thread.turn(text)`` and ``TurnHandle.run()`` / ``.stream()``, ``interrupt()`` and
``steer()`` at the plan's triggers, ``thread_resume()``; approvals through the low-level client's approval
handler (the high-level API has none). It adds no timeout of its own: how the SDK copes with a silent or
broken server is what is judged. It writes ``CODEX_HARNESS_RESULT`` after every turn, so a run cut at the
deadline still reports the turns that ended.

What the SDK cannot express is reported as ``unsupported``: an approval answered with a JSON-RPC error
(its handler's return value is always sent as a result) and ``optOutNotificationMethods``.

Its thread's settings, as a user of the SDK chooses them, in the SDK's own words: ``--approval-mode
auto_review|deny_all`` (``thread_start(approval_mode=...)``; the SDK's default is ``auto_review``: approvalPolicy
on-request with the auto reviewer; ``deny_all`` is approvalPolicy never) and ``--sandbox
read-only|workspace-write|full-access`` (``thread_start(sandbox=...)``; none: the server's own); with ``--per-turn``
they are given to every ``thread.turn(...)`` instead (``turn/start`` overrides of a thread started with the defaults).
``--config KEY=VALUE`` (repeatable) is the SDK's ``CodexConfig(config_overrides=...)``: a ``-c`` on the server's
command line (``sandbox_mode="workspace-write"``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from typing import Any

from openai_codex import ApprovalMode, Codex, CodexConfig, Sandbox

APPROVALS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")
STATUS = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


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
            json.dump(
                {
                    "client": "openai-codex (Python SDK) via conformance/clients/openai_codex_sdk.py",
                    "turns": self.turns,
                },
                fh,
            )
        os.replace(tmp, self.path)


_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
)


class TurnUsage:
    """The turn's usage from what the SDK documents: ``TurnResult.usage`` is the turn's last ``ThreadTokenUsage``
    (README: "token usage"; its ``total`` is the thread's running total, its ``last`` the last model request
    only). A caller's turn is what the thread's ``total`` grew by since the previous turn; ``last`` alone drops
    every model request of a tool round trip but the final one."""

    def __init__(self) -> None:
        self.before: dict[str, int] = dict.fromkeys(_FIELDS, 0)

    def buckets(self, usage: Any) -> dict[str, int] | None:
        if usage is None:
            return None
        total = {f: getattr(usage.total, f, 0) or 0 for f in _FIELDS}
        # a field that went down is a counter reset: its new value is the turn's
        grown = {f: total[f] - self.before[f] if total[f] >= self.before[f] else total[f] for f in _FIELDS}
        self.before = total
        cached, write = grown["cached_input_tokens"], grown["cache_write_input_tokens"]
        return {
            "input": max(0, grown["input_tokens"] - cached - write),
            "cache_read": cached,
            "cache_write": write,
            "output": grown["output_tokens"],
            "reasoning": grown["reasoning_output_tokens"],
        }


class Approvals:
    """The plan's decisions by ordinal; a planned cancel while pending holds the answer (from the reader thread)."""

    def __init__(self, plan: dict[str, Any], budgets: dict[str, int]) -> None:
        self.plan = plan
        self.seen = 0
        self.turn_seen = 0
        self.held: set[int] = set()
        self.interrupt: Any = None  # turn id -> None: the low-level client's turn/interrupt
        self.unsupported: str | None = None
        self.release = threading.Event()
        # The SDK cannot leave a request pending without blocking its only reader: hold it for the interrupt
        # budget (the server resolves it meanwhile), then answer cancel.
        self.hold_s = budgets["interrupt_budget_ms"] / 1000

    def start_turn(self, actions: list[dict[str, Any]]) -> None:
        """Before turn/start: the reader thread may get the turn's first approval before thread.turn() returns."""
        self.turn_seen = 0
        self.held = {a["n"] for a in actions if a["do"] == "cancel" and a["at"] == "approval_pending"}
        self.release.clear()

    def __call__(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method not in APPROVALS:
            return {}  # the SDK's own default for requests it does not know
        order = self.plan["approvals"]["in_order"]
        decision = order[self.seen] if self.seen < len(order) else self.plan["approvals"]["default"]
        self.seen += 1
        self.turn_seen += 1
        if self.turn_seen in self.held:
            # The user cancels while this approval is pending: interrupt from another thread, keep it open.
            turn_id = (params or {}).get("turnId")
            threading.Thread(target=self.interrupt, args=(turn_id,), daemon=True).start()
            self.release.wait(self.hold_s)
            return {"decision": "cancel"}
        if decision == "error":
            self.unsupported = "the SDK's approval handler cannot answer with a JSON-RPC error"
            return {"decision": "decline"}
        return {"decision": decision}


def play_turn(
    thread: Any,
    number: int,
    spec: dict[str, Any],
    approvals: Approvals,
    usage_of: TurnUsage,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    actions = [a for a in spec["actions"] if a["do"] in ("cancel", "steer")]
    approvals.start_turn(actions)
    handle = thread.turn(spec["input"], **(overrides or {}))
    entry: dict[str, Any] = {"turn": number, "turn_id": handle.id}

    def act(action: dict[str, Any]) -> None:
        if action["do"] == "cancel":
            try:
                handle.interrupt()
            except Exception:
                # The SDK raises the server's refusal (-32600 no active turn: the cancel lost the race with the
                # turn's end, or a second cancel came after the first ended it); a user's cancel that came too
                # late does not fail the turn: its turn/completed, already on its way, says how it ended.
                pass
        else:
            handle.steer(action.get("text", ""))

    timers = []
    for a in actions:
        if a["at"] == "delay":
            timer = threading.Timer(a["delay_ms"] / 1000, act, (a,))
            timer.daemon = True
            timer.start()
            timers.append(timer)
    stream_actions = [a for a in actions if a["at"] in ("started", "delta", "item_started")]
    usage = None  # the turn's last usage event: reported even when the SDK raises afterwards
    try:
        if not stream_actions:
            result = handle.run()  # the high-level path: the SDK collects the turn
            entry.update(status=STATUS.get(result.status.value, "failed"), final_text=result.final_response)
            entry["usage"] = usage_of.buckets(result.usage)
            entry["error"] = result.error.message if result.error else None
            return entry
        counts = {"started": 0, "delta": 0, "item_started": 0}
        keys = {"turn/started": "started", "item/agentMessage/delta": "delta", "item/started": "item_started"}
        fired: set[int] = set()
        text: list[str] = []
        status = None
        for event in handle.stream():
            key = keys.get(event.method)
            if key:
                counts[key] += 1
            if event.method == "item/agentMessage/delta":
                text.append(event.payload.delta)
            elif event.method == "thread/tokenUsage/updated":
                usage = event.payload.token_usage
            elif event.method == "turn/completed":
                status = event.payload.turn.status.value
            for i, a in enumerate(stream_actions):
                if i not in fired and counts[a["at"]] >= a["n"]:
                    fired.add(i)
                    if a["delay_ms"]:
                        threading.Timer(a["delay_ms"] / 1000, act, (a,)).start()
                    else:
                        act(a)
        entry.update(status=STATUS.get(str(status), "failed"), final_text="".join(text), usage=usage_of.buckets(usage))
        return entry
    except Exception as exc:  # the SDK raises on a failed turn and on a broken transport
        entry.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
        if usage is not None:
            # What the turn used so far is known (and the next turn's share is what the total grows by after it).
            entry["usage"] = usage_of.buckets(usage)
        return entry
    finally:
        approvals.release.set()
        for timer in timers:
            timer.cancel()


def thread_settings(argv: list[str]) -> tuple[dict[str, Any], bool, tuple[str, ...]]:
    """The ``thread_start`` (or, per turn, ``thread.turn``) keywords the command line sets, whether per turn, and the
    server's ``-c`` overrides."""
    parser = argparse.ArgumentParser(prog="openai_codex_sdk.py", description="the official SDK's adapter")
    parser.add_argument("--approval-mode", dest="approval_mode", choices=[m.value for m in ApprovalMode])
    parser.add_argument("--sandbox", dest="sandbox", choices=[m.value for m in Sandbox])
    parser.add_argument("--per-turn", action="store_true", help="give them to every turn, not to the thread")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a -c of the server")
    args = parser.parse_args(argv)
    settings: dict[str, Any] = {}
    if args.approval_mode is not None:
        settings["approval_mode"] = ApprovalMode(args.approval_mode)
    if args.sandbox is not None:
        settings["sandbox"] = Sandbox(args.sandbox)
    return settings, args.per_turn, tuple(args.config)


def main(argv: list[str] | None = None) -> int:
    settings, per_turn, config_overrides = thread_settings(sys.argv[1:] if argv is None else argv)
    overrides = settings if per_turn else None
    if per_turn:
        settings = {}
    plan = _load_plan()
    report = Report(os.environ["CODEX_HARNESS_RESULT"])
    approvals = Approvals(plan, plan["budgets"])
    config = CodexConfig(
        codex_bin=os.environ["CODEX_BIN"],
        experimental_api=plan["experimental_api"],
        config_overrides=config_overrides,
    )
    remaining = list(plan["turns"])
    usage_of = TurnUsage()
    try:
        with Codex(config) as codex:
            codex._client._approval_handler = approvals  # the low-level client's hook (no public one)
            thread = codex.thread_start(**settings)
            approvals.interrupt = lambda turn_id: codex._client.turn_interrupt(thread.id, turn_id)
            while remaining:
                spec = remaining[0]
                if any(a["do"] == "resume" for a in spec["actions"]):
                    thread = codex.thread_resume(thread.id, **settings)
                approvals.unsupported = None
                entry = play_turn(thread, spec["turn"], spec, approvals, usage_of, overrides)
                why = approvals.unsupported or (
                    "the SDK has no optOutNotificationMethods option" if plan["opt_out_notifications"] else None
                )
                if why:
                    entry.update(status="unsupported", error=why)
                report.add(entry)
                remaining.pop(0)
    except Exception as exc:
        traceback.print_exc()
        for spec in remaining:
            report.add({"turn": spec["turn"], "status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
