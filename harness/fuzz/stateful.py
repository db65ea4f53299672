"""A stateful test over the session API: start, steer, cancel, answer approvals, crash, resume, wait, in any order.

:class:`SessionMachine` is a hypothesis ``RuleBasedStateMachine``. Each example runs one in-process fake
and one client session on a trio loop in a helper thread, under ``trio.testing.MockClock`` with
autojump off: time moves only in the ``wait`` rule (autojump on, for exactly that long), so every other
rule acts at a fixed virtual instant and the loop settles (every task blocked) before the next rule.

Invariants after every rule: no exception escaped the client, each turn has at most one Result, a
finished turn has exactly one, a cancelled turn has its Result within the interrupt budget plus the
teardown bound. At the end the session closes within its teardown bound, every turn has exactly one
Result, and the client-side contracts hold on the record (client frames schema-valid, no request after
close, no answer to an unknown id, nothing answered twice, the client trace closed).

Users run it as ``TestSession = SessionMachine.TestCase``.
"""

from __future__ import annotations

import math
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import trio
import trio.testing
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from contracts.checks import protocol, run_all, schema, trace_closure
from contracts.expect import Expect
from contracts.record import SessionRecord
from contracts.scenario import (
    DECISIONS,
    ClientPlan,
    CommandItem,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    Scenario,
    TurnScript,
    Usage,
)

T = TypeVar("T")
BUDGET_S = 0.5
TEARDOWN_S = 1.0
TURN_TIMEOUT_S = 30.0
SLACK_S = 0.01
#: Wall-clock bound of one operation (they take milliseconds; virtual time is frozen outside ``wait``).
OP_WALL_LIMIT_S = 30.0
#: Client-side checks the session must pass whatever the rules did (server-side faults are the rules' doing).
CLIENT_CHECKS: tuple[tuple[str, str], ...] = (
    (schema.NAME, schema.CLIENT_FRAMES_INVALID),
    (protocol.NAME, protocol.NO_REQUEST_AFTER_CLOSE),
    (protocol.NAME, protocol.NO_ANSWER_TO_UNKNOWN_ID),
    (protocol.NAME, protocol.SERVER_REQUESTS_ANSWERED_ONCE),
    (protocol.NAME, protocol.REQUEST_IDS_UNIQUE),
    (trace_closure.NAME, trace_closure.CLIENT_TRACE),
)


def machine_scenario() -> Scenario:
    """Turns with something to act on: a slow stream, a command approval that runs a while, a file change."""
    stream = MessageItem("one two three four five", ("one ", "two ", "three ", "four ", "five"), delay_ms=100)
    tool_turn = TurnScript(
        responses=(
            ModelResponse((stream, CommandItem("sleep 1", approval=True, duration_ms=500)), Usage(100, 40, 20, 5)),
            ModelResponse((FileChangeItem("hello.txt", "hello\n"),), Usage(120, 100, 10)),
            ModelResponse((MessageItem("Done.", ("Do", "ne."), delay_ms=50),), Usage(150, 120, 10)),
        )
    )
    return Scenario("stateful", "stateful session machine", (tool_turn,) * 6, ClientPlan())


@dataclass(slots=True)
class _TurnEntry:
    turn: Any
    scope: trio.CancelScope | None = None
    done: bool = False
    cancelled_at: float | None = None


@dataclass(slots=True)
class _Pending:
    request: Any
    answer: trio.Event = field(default_factory=trio.Event)
    decision: str = "accept"


class SessionHarness:
    """One in-process session on a trio loop in a helper thread; operations run there, called from here."""

    def __init__(self, scenario: Scenario, work_dir: Path) -> None:
        self.scenario, self.work_dir = scenario, work_dir
        self.clock = trio.testing.MockClock()  # autojump off: time moves only in wait()
        self.errors: list[str] = []
        self.turns: list[_TurnEntry] = []
        self.pending: list[_Pending] = []
        self.session: Any = None
        self.server: Any = None
        self.thread_id: str | None = None
        self.closed_in: float | None = None
        self.record: SessionRecord | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the session did not start")
        if self.errors:
            raise RuntimeError(f"the session did not start: {self.errors}")

    # --- the trio side ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            trio.run(self._main, clock=self.clock)
        except BaseException as exc:  # anything escaping the loop is a finding, reported by the invariants
            self.errors.append(f"loop: {exc!r}")
        finally:
            self._ready.set()

    async def _policy(self, request: Any) -> str:
        pending = _Pending(request)
        self.pending.append(pending)
        await pending.answer.wait()
        return pending.decision

    async def _main(self) -> None:
        from codex_client.session import SessionOptions, open_session
        from fake_server.inprocess import serve_in_process

        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        options = SessionOptions(
            interrupt_budget=BUDGET_S,
            teardown_timeout=TEARDOWN_S,
            turn_timeout=TURN_TIMEOUT_S,
            trace_dir=self.work_dir / "client-trace",
        )
        async with serve_in_process(self.scenario, trace_root=self.work_dir / "server-trace") as server:
            self.server = server
            try:
                async with open_session(server, options, policy=self._policy) as session:
                    self.session = session
                    self.thread_id = await session.start_thread(cwd="/RUN/workdir")
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        self._ready.set()
                        await self._stop.wait()
                        for entry in self.turns:
                            if not entry.done and entry.scope is not None:
                                entry.scope.cancel()
                        self.clock.autojump_threshold = 0  # cancelled turns interrupt within their budget
                        with trio.move_on_after(BUDGET_S + TEARDOWN_S + 1):
                            while any(not e.done for e in self.turns):
                                await trio.sleep(0.01)
                        nursery.cancel_scope.cancel()  # an operation still blocked is already reported
                    closing = trio.current_time()
                    self.clock.autojump_threshold = 0  # the teardown's own waits
            except Exception as exc:
                self.errors.append(f"session: {exc!r}")
            self.closed_in = trio.current_time() - closing if "closing" in locals() else None
            if self.session is not None:
                record = SessionRecord(self.scenario.name, "fake", Expect(server_trace="none"))
                self.session.fill_record(record)
                if record.client_trace is None and (self.work_dir / "client-trace").is_dir():
                    record.client_trace = self.work_dir / "client-trace"
                self.record = record

    def call(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run ``op`` on the loop, then let the loop settle (every task blocked) at the same virtual time.

        Time is frozen outside ``wait``, so an operation that waits on a timer would never return: a
        wall-clock bound turns that into a failure instead of a hung test.
        """
        done = threading.Event()
        box: dict[str, Any] = {}

        async def settled() -> None:
            try:
                box["value"] = await op()
                await trio.testing.wait_all_tasks_blocked()
            except BaseException as exc:  # handed to the calling thread
                box["error"] = exc
            finally:
                done.set()

        assert self._token is not None and self._nursery is not None
        nursery = self._nursery
        trio.from_thread.run_sync(lambda: nursery.start_soon(settled), trio_token=self._token)
        if not done.wait(timeout=OP_WALL_LIMIT_S):
            self.errors.append(f"an operation did not settle within {OP_WALL_LIMIT_S} s of wall time")
            raise AssertionError(self.errors[-1])
        if "error" in box:
            raise box["error"]
        return box["value"]

    # --- operations --------------------------------------------------------------------------------

    @property
    def active(self) -> _TurnEntry | None:
        return next((e for e in self.turns if not e.done), None)

    def start_turn(self, text: str) -> None:
        entry = _TurnEntry(self.session.turn(text))
        self.turns.append(entry)

        async def consume() -> None:
            with trio.CancelScope() as scope:
                entry.scope = scope
                try:
                    async with entry.turn as turn:
                        async for _ in turn:
                            pass
                except Exception as exc:
                    self.errors.append(f"turn {entry.turn.index}: {exc!r}")
            entry.done = True

        async def op() -> None:
            assert self._nursery is not None
            self._nursery.start_soon(consume)

        self.call(op)

    def steer(self, text: str) -> None:
        entry = self.active

        async def op() -> None:
            from codex_client.errors import ClientError
            from contracts.jsonrpc import RpcError

            if entry is None:
                return
            try:
                await entry.turn.steer(text)
            except (ClientError, RpcError):
                pass  # a turn that already ended, a server that is gone: refused, not broken

        self.call(op)

    def cancel(self) -> None:
        entry = self.active

        async def op() -> None:
            if entry is not None and entry.scope is not None:
                entry.cancelled_at = trio.current_time()
                entry.scope.cancel()

        self.call(op)

    def answer(self, decision: str) -> None:
        async def op() -> None:
            waiting = [p for p in self.pending if not p.answer.is_set()]
            if waiting:
                waiting[0].decision = decision
                waiting[0].answer.set()

        self.call(op)

    def crash(self) -> None:
        async def op() -> None:
            self.server.kill()

        self.call(op)

    def resume(self) -> None:
        async def op() -> None:
            from codex_client.errors import ClientError
            from contracts.jsonrpc import RpcError

            try:
                self.thread_id = await self.session.resume_thread(self.thread_id, cwd="/RUN/workdir")
            except (ClientError, RpcError):
                pass

        self.call(op)

    def wait(self, ms: int) -> None:
        async def op() -> None:
            self.clock.autojump_threshold = 0
            try:
                await trio.sleep(ms / 1000)
            finally:
                self.clock.autojump_threshold = math.inf

        self.call(op)

    def now(self) -> float:
        async def op() -> float:
            return trio.current_time()

        return self.call(op)

    def close(self) -> None:
        if self._token is not None and self._thread.is_alive():
            stop = self._stop
            assert stop is not None
            trio.from_thread.run_sync(stop.set, trio_token=self._token)
        self._thread.join(timeout=60)
        if self._thread.is_alive():
            self.errors.append("the session did not close")


class SessionMachine(RuleBasedStateMachine):
    """Start, steer, cancel, answer approvals, crash, resume and wait, in any order, on one session."""

    def __init__(self) -> None:
        super().__init__()
        self.work = tempfile.TemporaryDirectory(prefix="codex-harness-stateful-")
        self.harness = SessionHarness(machine_scenario(), Path(self.work.name))
        self.crashed = False

    def _alive(self) -> bool:
        return not self.crashed

    @precondition(lambda self: self.harness.active is None and len(self.harness.turns) < 4)
    @rule(text=st.sampled_from(("Run the tests", "Say hello")))
    def start(self, text: str) -> None:
        self.harness.start_turn(text)

    @precondition(lambda self: self.harness.active is not None)
    @rule()
    def steer(self) -> None:
        self.harness.steer("Also mention the weather.")

    @precondition(lambda self: self.harness.active is not None)
    @rule()
    def cancel(self) -> None:
        self.harness.cancel()

    @precondition(lambda self: any(not p.answer.is_set() for p in self.harness.pending))
    @rule(decision=st.sampled_from(tuple(d for d in DECISIONS if d != "error")))
    def answer(self, decision: str) -> None:
        self.harness.answer(decision)

    @precondition(lambda self: not self.crashed and self.harness.active is not None)
    @rule()
    def crash(self) -> None:
        """The server dies mid-turn (what follows is a dead session: every later turn fails fast)."""
        self.crashed = True
        self.harness.crash()

    @precondition(lambda self: self.harness.active is None and not self.crashed)
    @rule()
    def resume(self) -> None:
        self.harness.resume()

    @rule(ms=st.sampled_from((10, 150, 600, 2000)))
    def wait(self, ms: int) -> None:
        self.harness.wait(ms)

    @invariant()
    def nothing_escaped(self) -> None:
        assert not self.harness.errors, self.harness.errors

    @invariant()
    def one_result_per_finished_turn(self) -> None:
        seen = [r.index for r in self.harness.session.results]
        assert len(seen) == len(set(seen)), f"a turn got several Results: {seen}"
        for entry in self.harness.turns:
            if entry.done:
                assert entry.turn.result is not None, f"turn {entry.turn.index} ended without a Result"

    @invariant()
    def cancel_is_bounded(self) -> None:
        now = self.harness.now()
        for entry in self.harness.turns:
            if entry.cancelled_at is not None and now - entry.cancelled_at > BUDGET_S + TEARDOWN_S + SLACK_S:
                assert entry.turn.result is not None, (
                    f"turn {entry.turn.index}: no Result {now - entry.cancelled_at} s after cancel"
                )

    def teardown(self) -> None:
        harness = self.harness
        try:
            harness.close()
            assert not harness.errors, harness.errors
            for entry in harness.turns:
                assert entry.turn.result is not None, f"turn {entry.turn.index} has no Result after close"
            if harness.closed_in is not None:
                assert harness.closed_in <= TEARDOWN_S + BUDGET_S + SLACK_S, f"close took {harness.closed_in} s"
            if harness.record is not None:
                checks = run_all(harness.record, ("schema", "protocol", "trace_closure"))
                bad = [c for c in checks if c.status == "fail" and (c.contract, c.name) in CLIENT_CHECKS]
                assert not bad, [f"{c.contract}/{c.name}: {c.detail}" for c in bad]
        finally:
            self.work.cleanup()
