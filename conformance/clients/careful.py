#!/usr/bin/env python3
"""A careful outside client, standard library only: the reference for ``run --client-cmd``.

It follows the plan (``CODEX_HARNESS_PLAN``): answers each approval with the plan's decision, interrupts
and steers at the plan's triggers, resumes the thread where the plan says. What the plan means (which
frame is which trigger, when an action is due, which decision an approval gets, which one a cancel holds)
is the project's one interpreter, ``contracts/triggers.py`` (sans-IO, standard library only too): an adapter
in Python may import it the same way; one in another language follows docs/clients.md. It gives up on a silent server
after the turn timeout (interrupt, then the interrupt budget), always ends the server it started (close
stdin, wait the teardown budget, SIGTERM, SIGKILL, then the server's whole process group) and writes
what it saw per turn to ``CODEX_HARNESS_RESULT``. The server's first answer (``initialize``) gets
:data:`STARTUP_S` rather than the request timeout: a process start is slow on a loaded machine (an
interpreter's imports, the npm wrapper of the real binary), and that is not the request being late.
Usage: ``codex-harness run --client-cmd "python conformance/clients/careful.py"``; its thread's settings, as a
client chooses them, with ``--approval-policy never|on-request|untrusted``, ``--sandbox read-only|workspace-write|
danger-full-access`` and ``--approvals-reviewer user|auto_review`` (sent in ``thread/start``; none: the server's
own).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# The interpreter of the tree this file ships in (a clone, or the installed package's site-packages), so the
# rules are this client's own version whatever else the Python running it has installed.
_TREE = Path(__file__).resolve().parents[2]
if (_TREE / "contracts" / "triggers.py").is_file():
    sys.path.insert(0, str(_TREE))
from contracts import triggers  # noqa: E402

MAX_LINE = 32 * 1024 * 1024  # a longer line ends the session, as on EOF (bounded input)
APPROVALS = triggers.APPROVAL_METHODS
#: How long the server's first answer may take: its process starting, not a request of the protocol being late.
STARTUP_S = 60.0
WIRE_USAGE = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens")


class Server:
    """``$CODEX_BIN app-server`` in its own process group, lines in on a reader thread."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [os.environ["CODEX_BIN"], "app-server", "--listen", "stdio://"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.answers: dict[int, dict[str, Any]] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE:
                break  # never buffer an oversized line: the session ends here
            try:
                message = json.loads(line)
            except ValueError:
                continue  # garbage and invalid UTF-8 are skipped, never fatal
            if isinstance(message, dict):
                self.inbox.put(message)
        self.inbox.put(None)

    def send(self, frame: dict[str, Any]) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def end(self, teardown_s: float) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=teardown_s)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what the server left in its group (a grandchild)
        except (ProcessLookupError, PermissionError):
            pass


class Client:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.budgets = plan["budgets"]
        self.server = Server()
        self.approvals_seen = 0
        self.alive = True  # the server is still usable
        self.thread_id: str | None = None
        self.protocol_error: str | None = None  # an unknown server request fails the running turn

    def decision(self) -> str:
        """The plan's decision for the approval just counted (``approvals_seen`` is 1-based)."""
        rules = self.plan["approvals"]
        return triggers.decision(self.approvals_seen - 1, rules["in_order"], rules["default"])

    def pump(self, deadline: float, on_message: Any) -> bool:
        """Handle messages until ``on_message`` returns True (True) or the deadline / EOF (False)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                message = self.server.inbox.get(timeout=left)
            except queue.Empty:
                return False
            if message is None:
                self.alive = False
                return False
            if "id" in message and "method" not in message:
                self.server.answers[message["id"]] = message
            if on_message(message):
                return True

    def call(self, method: str, params: dict[str, Any], at_least_s: float = 0.0) -> dict[str, Any] | None:
        rid = self.server.request(method, params)
        deadline = time.monotonic() + max(self.budgets["request_timeout_ms"] / 1000, at_least_s)
        self.pump(deadline, lambda m: m.get("id") == rid and "method" not in m)
        return self.server.answers.get(rid)

    def answer(self, message: dict[str, Any], held: set[int]) -> None:
        method = message["method"]
        if method not in APPROVALS:
            self.server.send({"id": message["id"], "error": {"code": -32601, "message": f"unsupported {method}"}})
            self.protocol_error = f"unknown server request {method}"
            return
        self.approvals_seen += 1
        if self.approvals_seen in held:
            return  # the plan cancels while this approval is pending: the interrupt answers it
        decision = self.decision()
        if decision == "error":
            self.server.send({"id": message["id"], "error": {"code": -32000, "message": "the plan answers an error"}})
        else:
            self.server.send({"id": message["id"], "result": {"decision": decision}})

    def run_turn(self, number: int, spec: dict[str, Any]) -> dict[str, Any]:
        if not self.alive:
            return {"turn": number, "status": "failed", "error": "the server is gone"}
        planned = [triggers.Action.from_json(a) for a in spec["actions"]]
        if triggers.resumes(planned):
            answer = self.call("thread/resume", {"threadId": self.thread_id, "excludeTurns": True})
            thread = ((answer or {}).get("result") or {}).get("thread") or {}
            self.thread_id = thread.get("id") or self.thread_id
        self.protocol_error = None
        text_input = [{"type": "text", "text": spec["input"]}]
        answer = self.call("turn/start", {"threadId": self.thread_id, "input": text_input})
        turn = ((answer or {}).get("result") or {}).get("turn") or {}
        turn_id = turn.get("id")
        if turn_id is None:
            return {"turn": number, "status": "failed", "error": f"turn/start failed: {answer}"}
        actions = [a for a in planned if a.do in ("cancel", "steer")]
        schedule = triggers.ActionSchedule(actions)  # what to do when (times: time.monotonic())
        held = {self.approvals_seen + n for n in triggers.held_approvals(actions)}  # by the session's count
        state: dict[str, Any] = {"usage": [], "text": [], "completed": None, "interrupted_at": None}

        def act(action: triggers.Action) -> None:
            if action.do == "cancel" and state["interrupted_at"] is None:
                state["interrupted_at"] = time.monotonic()
                self.server.request("turn/interrupt", {"threadId": self.thread_id, "turnId": turn_id})
            elif action.do == "steer":
                steer_input = [{"type": "text", "text": action.text}]
                params = {"threadId": self.thread_id, "input": steer_input, "expectedTurnId": turn_id}
                self.server.request("turn/steer", params)

        def on_message(m: dict[str, Any]) -> bool:
            method = m.get("method")
            params = m.get("params") or {}
            moment = triggers.frame_moment(m, turn_id)
            if method and "id" in m:
                self.answer(m, held)
            elif method == "item/agentMessage/delta" and params.get("turnId") == turn_id:
                state["text"].append(params.get("delta", ""))
            elif method == "thread/tokenUsage/updated" and params.get("turnId") == turn_id:
                state["usage"].append(params.get("tokenUsage") or {})
            elif method == "turn/completed" and (params.get("turn") or {}).get("id") == turn_id:
                state["completed"] = params["turn"]
                return True
            if moment is None:
                return False
            wake = schedule.next_wake()
            due = schedule.observe(moment, now=time.monotonic())
            for action in due:
                act(action)
            # A new deadline (a delayed action, the interrupt budget): wait again.
            return bool(due) or schedule.next_wake() != wake

        started = time.monotonic()
        for action in schedule.start(started):
            act(action)

        turn_deadline = started + self.budgets["turn_timeout_ms"] / 1000
        budget = self.budgets["interrupt_budget_ms"] / 1000
        while state["completed"] is None and self.alive:
            wake = schedule.next_wake()
            waits = [turn_deadline] + ([] if wake is None else [wake])
            if state["interrupted_at"] is not None:
                waits.append(state["interrupted_at"] + budget)
            self.pump(min(waits), on_message)
            if state["completed"] is not None:
                break
            now = time.monotonic()
            for action in schedule.wake(now):
                act(action)
            if state["interrupted_at"] is not None and now >= state["interrupted_at"] + budget:
                self.alive = False  # the interrupt went unanswered: give up on this server
                return self.result(number, "aborted", state, turn_id, "interrupt not honoured within budget")
            if now >= turn_deadline and state["interrupted_at"] is None:
                act(triggers.Action("cancel"))
                if not self.pump(time.monotonic() + budget, on_message):
                    self.alive = False
                return self.result(number, "timeout", state, turn_id, "turn timeout")
        if state["completed"] is None:
            return self.result(number, "failed", state, turn_id, "the server ended the stream")
        status = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}
        wire = state["completed"].get("status")
        error = (state["completed"].get("error") or {}).get("message") if wire == "failed" else None
        if self.protocol_error is not None:
            return self.result(number, "failed", state, turn_id, self.protocol_error)
        return self.result(number, status.get(wire, "failed"), state, turn_id, error)

    def result(self, number: int, status: str, state: dict[str, Any], turn_id: str, error: str | None) -> dict:
        return {
            "turn": number,
            "status": status,
            "usage": buckets(state["usage"]),
            "final_text": "".join(state["text"]),
            "error": error,
            "turn_id": turn_id,
        }


def buckets(updates: list[dict[str, Any]]) -> dict[str, int]:
    """The turn's usage: the first ``last``, then the growth of ``total`` (a drop is a reset)."""
    counted = {k: 0 for k in WIRE_USAGE}
    previous: dict[str, int] | None = None
    for update in updates:
        last, total = update.get("last") or {}, update.get("total") or {}
        for k in WIRE_USAGE:
            now = int(total.get(k) or 0)
            if previous is None:
                counted[k] += int(last.get(k) or 0)
            else:
                counted[k] += now - previous[k] if now >= previous[k] else now
        previous = {k: int(total.get(k) or 0) for k in WIRE_USAGE}
    cached, write = counted["cachedInputTokens"], counted["cacheWriteInputTokens"]
    return {
        "input": max(0, counted["inputTokens"] - cached - write),
        "cache_read": cached,
        "cache_write": write,
        "output": counted["outputTokens"],
        "reasoning": counted["reasoningOutputTokens"],
    }


def thread_settings(argv: list[str]) -> dict[str, Any]:
    """The ``thread/start`` params the command line sets (the client's own configuration of its thread)."""
    parser = argparse.ArgumentParser(prog="careful.py", description="the careful outside client")
    parser.add_argument("--approval-policy", dest="approvalPolicy")
    parser.add_argument("--sandbox", dest="sandbox")
    parser.add_argument("--approvals-reviewer", dest="approvalsReviewer")
    return {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    settings = thread_settings(sys.argv[1:] if argv is None else argv)
    with open(os.environ["CODEX_HARNESS_PLAN"], encoding="utf-8") as fh:
        plan = json.load(fh)
    client = Client(plan)
    turns: list[dict[str, Any]] = []
    try:
        capabilities: dict[str, Any] = {"experimentalApi": plan["experimental_api"]}
        if plan["opt_out_notifications"]:
            capabilities["optOutNotificationMethods"] = plan["opt_out_notifications"]
        info = {"name": "careful", "version": "1.0"}
        answer = client.call("initialize", {"clientInfo": info, "capabilities": capabilities}, STARTUP_S)
        if answer is not None and "result" in answer:
            client.server.send({"method": "initialized"})
            started = client.call("thread/start", settings)
            client.thread_id = (((started or {}).get("result") or {}).get("thread") or {}).get("id")
        for spec in plan["turns"]:
            if client.thread_id is None:
                # Never started: it used nothing, and it has no text (both known, so both reported).
                no_turn = {"turn": spec["turn"], "status": "failed", "error": "no thread", "final_text": ""}
                turns.append({**no_turn, "usage": buckets([])})
                continue
            turns.append(client.run_turn(spec["turn"], spec))
    finally:
        client.server.end(plan["budgets"]["teardown_ms"] / 1000)
        with open(os.environ["CODEX_HARNESS_RESULT"], "w", encoding="utf-8") as fh:
            json.dump({"client": "careful 1.0", "turns": turns}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
