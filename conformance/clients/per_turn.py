#!/usr/bin/env python3
"""The careful reference client (``careful.py``), but starting one server per turn, as clients that run a fresh
``codex app-server`` per task do: turn 1 on a new thread, every later turn in a new server that resumes it
(``thread/resume`` with ``excludeTurns``) from what the earlier one left in ``CODEX_HOME``. Each server is ended
(close stdin, the teardown budget, then signals) before the next starts. The approvals count across the run, as
the plan counts them. Usage: ``codex-harness run --client-cmd "python conformance/clients/per_turn.py"``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
if TYPE_CHECKING:  # the type checker reads the sibling as the package module it is
    from conformance.clients import careful
else:
    import careful


class PerTurnClient(careful.Client):
    def __init__(self, plan: dict[str, Any]) -> None:  # no server yet: start_server starts each
        self.plan, self.budgets = plan, plan["budgets"]
        self.server: careful.Server | None = None  # type: ignore[assignment]
        self.approvals_seen, self.alive = 0, False
        self.thread_id: str | None = None
        self.thread_total: dict[str, Any] | None = None  # the thread's usage total, as careful.Client keeps it
        self.protocol_error: str | None = None

    def start_server(self, plan: dict[str, Any], resume: bool) -> bool:
        """A new server, initialized, on the run's thread (started, or resumed). False when that failed."""
        self.server = careful.Server()
        self.alive = True
        capabilities: dict[str, Any] = {"experimentalApi": plan["experimental_api"]}
        if plan["opt_out_notifications"]:
            capabilities["optOutNotificationMethods"] = plan["opt_out_notifications"]
        info = {"name": "per_turn", "version": "1.0"}
        answer = self.call("initialize", {"clientInfo": info, "capabilities": capabilities}, self.startup_s())
        if answer is None or "result" not in answer:
            return False
        self.server.send({"method": "initialized"})
        if resume:
            answer = self.call("thread/resume", {"threadId": self.thread_id, "excludeTurns": True})
        else:
            answer = self.call("thread/start", {})
        thread = ((answer or {}).get("result") or {}).get("thread") or {}
        if not resume:
            self.thread_id = thread.get("id")
        return isinstance(thread.get("id"), str)

    def run_turn(self, number: int, spec: dict[str, Any]) -> dict[str, Any]:
        # The resume is this client's own, at every server's start: the plan's resume actions are done by it.
        spec = {**spec, "actions": [a for a in spec["actions"] if a.get("do") != "resume"]}
        return super().run_turn(number, spec)


def main() -> int:
    with open(os.environ["CODEX_HARNESS_PLAN"], encoding="utf-8") as fh:
        plan = json.load(fh)
    teardown_s = plan["budgets"]["teardown_ms"] / 1000
    client = PerTurnClient(plan)
    turns: list[dict[str, Any]] = []
    try:
        for n, spec in enumerate(plan["turns"]):
            if client.server is not None:
                client.server.end(teardown_s)
            started = client.start_server(plan, resume=n > 0 and client.thread_id is not None)
            if not started or client.thread_id is None:
                no_turn = {"turn": spec["turn"], "status": "failed", "error": "no thread", "final_text": ""}
                turns.append({**no_turn, "usage": careful.buckets([])})
                continue
            turns.append(client.run_turn(spec["turn"], spec))
    finally:
        if client.server is not None:
            client.server.end(teardown_s)
        with open(os.environ["CODEX_HARNESS_RESULT"], "w", encoding="utf-8") as fh:
            json.dump({"client": "per_turn 1.0", "turns": turns}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
