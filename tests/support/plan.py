"""Play a scenario's ``[client]`` part against the engine on a virtual clock, with plain JSON frames.

A minimal, deterministic stand-in for a client, independent of the client under development: it
lets the fake check itself (every built-in scenario's frames validate, each fault shows on the wire,
the server side of ``[expect]`` holds). It answers approvals as the plan says, cancels (interrupt,
then kill when the budget runs out) and steers at the plan's triggers, resumes when asked: the plan's one
interpreter (:mod:`contracts.triggers`) says what to do when, on the virtual clock's milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.scenario import ClientAction, Scenario
from contracts.triggers import APPROVAL_METHODS, ActionSchedule, frame_moment, resumes
from contracts.wire import DEFAULT_MAX_LINE
from support.virtual import Frame, VirtualServer


@dataclass(slots=True)
class PlanRun:
    server: VirtualServer
    #: ``turn.status`` of each turn's turn/completed, "none" when none came
    server_statuses: list[str] = field(default_factory=list)
    killed: bool = False
    failed_at: str | None = None  # the request whose error ended the session, if any
    requests: dict[Any, str] = field(default_factory=dict)  # client request id -> method

    def request_method(self, response_id: Any) -> str | None:
        return self.requests.get(response_id)


class _Client:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.plan = scenario.client
        self.server = VirtualServer(scenario)
        self.run = PlanRun(self.server)
        self.pos = 0
        self.next_id = 0
        self.approvals_seen = 0
        self.timed_out = False
        self.lost = False

    def request(self, method: str, params: dict[str, Any]) -> int:
        rid = self.next_id
        self.next_id += 1
        self.run.requests[rid] = method
        self.server.send({"id": rid, "method": method, "params": params})
        return rid

    def new_frames(self, within_ms: int) -> list[Frame]:
        """Frames sent since the last call, advancing virtual time (up to ``within_ms``) until some arrive.

        Reading stops for good at a line over the client's cap (``lost``), as a client's reader does.
        """
        server = self.server
        if self.lost:
            return []
        if len(server.out) == self.pos:
            server.run_until_state(lambda: len(server.out) > self.pos or not self._alive(), within_ms=within_ms)
        frames: list[Frame] = []
        for output in server.out[self.pos :]:
            self.pos += 1
            if output.frame is not None:
                frames.append(output.frame)
            elif len(output.raw) > DEFAULT_MAX_LINE:
                self.lost = True
                break
        return frames

    def lost_frame(self) -> bool:
        return self.lost

    def _alive(self) -> bool:
        return self.server.exit_code is None and not self.server.stdout_closed and not self.lost

    def wait_response(self, rid: int, within_ms: int) -> Frame | None:
        deadline = self.server.now_ms + within_ms
        while self.server.now_ms <= deadline:
            for frame in self.new_frames(deadline - self.server.now_ms):
                self.on_side_frame(frame)
                if "method" not in frame and frame.get("id") == rid:
                    return frame
            if not self._alive() or self.server.now_ms >= deadline:
                return None
        return None

    def on_side_frame(self, frame: Frame) -> None:
        """Answer server requests that arrive outside a turn's loop."""
        if "method" in frame and "id" in frame and frame["method"] not in APPROVAL_METHODS:
            self.server.send({"id": frame["id"], "error": {"code": -32601, "message": "unsupported request"}})

    def kill(self) -> None:
        self.run.killed = True
        if self.server.exit_code is None:
            self.server.exit_code = -9
            self.server.crashed = True

    def play(self) -> PlanRun:
        plan = self.plan
        caps: dict[str, Any] = {}
        if plan.experimental_api:
            caps["experimentalApi"] = True
        if plan.opt_out:
            caps["optOutNotificationMethods"] = list(plan.opt_out)
        init: dict[str, Any] = {"clientInfo": {"name": "plan_driver", "version": "0.0.1"}}
        if caps:
            init["capabilities"] = caps
        answer = self.wait_response(self.request("initialize", init), plan.request_timeout_ms)
        if answer is None or "error" in answer:
            return self.finish("initialize")
        self.server.send({"method": "initialized"})
        answer = self.wait_response(self.request("thread/start", {"cwd": "/RUN/workdir"}), plan.request_timeout_ms)
        if answer is None or "error" in answer:
            return self.finish("thread/start")
        thread_id = answer["result"]["thread"]["id"]
        for number, script in enumerate(self.scenario.turns, start=1):
            actions = plan.actions_for(number)
            if resumes(actions):
                self.wait_response(self.request("thread/resume", {"threadId": thread_id}), plan.request_timeout_ms)
            status = self.play_turn(thread_id, script.input, actions)
            self.run.server_statuses.append(status)
            if not self._alive() or self.run.killed:
                break
        return self.finish(None)

    def finish(self, failed_at: str | None) -> PlanRun:
        self.run.failed_at = failed_at
        missing = len(self.scenario.turns) - len(self.run.server_statuses)
        self.run.server_statuses.extend(["none"] * max(0, missing))
        if self.server.exit_code is None:
            # Teardown as a client does it: close stdin, wait the bound, then kill the group.
            self.server.close_input()
            self.server.settle(self.plan.teardown_ms)
            if self.server.exit_code is None:
                self.kill()
        return self.run

    def play_turn(self, thread_id: str, text: str, actions: tuple[ClientAction, ...]) -> str:
        plan = self.plan
        rid = self.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]})
        turn_id: str | None = None
        schedule: ActionSchedule[ClientAction] = ActionSchedule(actions, per_second=1000)  # virtual milliseconds
        started_at = self.server.now_ms
        deadline = started_at + plan.turn_timeout_ms
        interrupt_deadline: int | None = None

        interrupt_ids: list[int] = []

        def fire(action: ClientAction) -> None:
            nonlocal interrupt_deadline
            if action.do == "cancel" and turn_id is not None:
                interrupt_ids.append(self.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}))
                interrupt_deadline = self.server.now_ms + plan.interrupt_budget_ms
            elif action.do == "steer" and turn_id is not None:
                self.request(
                    "turn/steer",
                    {
                        "threadId": thread_id,
                        "input": [{"type": "text", "text": action.text}],
                        "expectedTurnId": turn_id,
                    },
                )

        while True:
            wake = schedule.next_wake()
            limit = min(deadline, interrupt_deadline or deadline, deadline if wake is None else int(wake))
            if self.server.now_ms >= limit:
                due = schedule.wake(self.server.now_ms)
                for action in due:
                    fire(action)
                if due:
                    continue
                if interrupt_deadline is not None and self.server.now_ms >= interrupt_deadline:
                    self.kill()  # interrupt budget spent: SIGKILL the group at once
                    return "none"
                # The turn deadline cancels like a cancel does: interrupt within the budget, else kill.
                self.timed_out = True
                deadline = self.server.now_ms + plan.interrupt_budget_ms
                if turn_id is None:
                    self.kill()
                    return "none"
                fire(ClientAction(0, "cancel"))
                continue
            for frame in self.new_frames(limit - self.server.now_ms):
                method = frame.get("method")
                params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
                if method is None:
                    if frame.get("id") in interrupt_ids and "error" in frame:
                        self.kill()  # "turn interrupt failed": SIGKILL the group
                        return "none"
                    if frame.get("id") == rid and "result" in frame and turn_id is None:
                        turn_id = frame["result"]["turn"]["id"]
                        for action in schedule.start(started_at):
                            fire(action)
                    continue
                if method == "turn/started" and turn_id is None:
                    turn_id = params["turn"]["id"]
                moment = frame_moment(frame, turn_id)
                if moment == "approval_pending":
                    if not schedule.holds_approval(schedule.count(moment) + 1):  # a cancel waits for it pending
                        self.answer_approval(frame)
                if moment is not None:
                    for action in schedule.observe(moment, now=self.server.now_ms):
                        fire(action)
                elif method in APPROVAL_METHODS and "id" in frame:
                    self.answer_approval(frame)  # another turn's request (none in practice): answered as planned
                elif "id" in frame:
                    self.on_side_frame(frame)
                elif method == "turn/completed" and params.get("turn", {}).get("id") == turn_id:
                    return str(params["turn"]["status"])
            if self.lost_frame():
                self.kill()  # a line over the cap ends reading like a process exit; cleanup kills
                return "none"
            if not self._alive():
                return "none"

    def answer_approval(self, frame: Frame) -> None:
        decision = self.plan.decision(self.approvals_seen)
        self.approvals_seen += 1
        if decision == "error":
            self.server.send({"id": frame["id"], "error": {"code": -32000, "message": "client refused to answer"}})
        else:
            self.server.send({"id": frame["id"], "result": {"decision": decision}})


def play(scenario: Scenario) -> PlanRun:
    """Run ``scenario``'s client plan against the engine; deterministic, no real time."""
    return _Client(scenario).play()
