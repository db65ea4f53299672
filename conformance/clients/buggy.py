#!/usr/bin/env python3
"""A buggy outside client: careful.py with one switch per bug class outside clients were found with.

With no flag it is the careful reference client (it imports and runs it) and passes every built-in scenario.
Each flag plants one bug, and each fails a check of the scenario that catches it (``conformance`` keeps a
test per flag: tests/process/test_buggy_client.py). Usage: ``codex-harness run --client-cmd "python
conformance/clients/buggy.py --line-cap-64k"``.

=================================  ==========================================================================
``--line-cap-64k``                 a 64 KiB line cap: a legal 1 MiB frame ends the session
``--die-on-garbage``               one line that is not JSON ends the session, silently
``--drop-cancel-at-started``       a cancel the plan asks at ``started`` is never sent
``--leak-late-deltas``             deltas are not matched to their turn: late ones land in the next turn's text
``--empty-result-unknown-request`` an unknown server request gets an empty result, not a JSON-RPC error
``--reasoning-in-output``          reasoning tokens are added to output a second time
``--no-turn-timeout``              no turn timeout: a silent server is waited on forever
``--wait-after-eof``               the server's stdout closing is not noticed: the turn timeout is waited out
``--no-request-timeout``           no request timeout: an unanswered request (initialize, thread/start, turn/start,
                                   turn/interrupt) is waited on forever
``--unbounded-line-read``          once the first bytes of a line arrive, the rest is waited for without bound
                                   (``select`` for readable, then a blocking ``readline``)
``--completion-after-interrupt``   after its turn/interrupt, the turn's end is awaited only once the interrupt is
                                   answered (a waiter registered late), without bound: a turn/completed that came
                                   first is missed
``--completion-per-interrupt``     one turn/completed is awaited per turn/interrupt sent, without bound: a second
                                   interrupt waits for a second end that never comes
=================================  ==========================================================================
"""

from __future__ import annotations

import json
import queue
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

if TYPE_CHECKING:  # the type checker reads the sibling as the package module it is
    from conformance.clients import careful
else:
    import careful  # the reference client, next to this file

#: "Forever", as a wait the queue accepts (an infinite timeout is refused); the harness's deadline comes first.
NEVER_S = 24 * 3600.0
FLAGS = (
    "--line-cap-64k",
    "--die-on-garbage",
    "--drop-cancel-at-started",
    "--leak-late-deltas",
    "--empty-result-unknown-request",
    "--reasoning-in-output",
    "--no-turn-timeout",
    "--wait-after-eof",
    "--no-request-timeout",
    "--unbounded-line-read",
    "--completion-after-interrupt",
    "--completion-per-interrupt",
)


def _reader_64k_or_dying(self: careful.Server, cap: int, die_on_garbage: bool) -> None:
    """careful.Server._read with a smaller cap and, optionally, no tolerance for a bad line."""
    assert self.proc.stdout is not None
    while line := self.proc.stdout.readline(cap + 1):
        if len(line) > cap:
            break
        try:
            message = json.loads(line)
        except ValueError:
            if die_on_garbage:
                break  # the bug: one bad line ends the session, and nothing says so
            continue
        if isinstance(message, dict):
            self.inbox.put(message)
    self.inbox.put(None)


def plant(flags: set[str]) -> None:
    """Patch the careful client with the bugs ``flags`` name."""
    if "--line-cap-64k" in flags or "--die-on-garbage" in flags:
        cap = 64 * 1024 if "--line-cap-64k" in flags else careful.MAX_LINE
        die = "--die-on-garbage" in flags
        careful.Server._read = lambda self: _reader_64k_or_dying(self, cap, die)  # type: ignore[method-assign]
    if "--drop-cancel-at-started" in flags:
        run_turn = careful.Client.run_turn

        def without_started_cancel(self: careful.Client, number: int, spec: dict[str, Any]) -> dict[str, Any]:
            kept = [a for a in spec["actions"] if not (a["do"] == "cancel" and a["at"] == "started")]
            return run_turn(self, number, {**spec, "actions": kept})

        careful.Client.run_turn = without_started_cancel  # type: ignore[method-assign]
    if "--leak-late-deltas" in flags:
        _leak_late_deltas()
    if "--empty-result-unknown-request" in flags:
        answer = careful.Client.answer

        def empty_result(self: careful.Client, message: dict[str, Any], held: set[int]) -> None:
            if message["method"] in careful.APPROVALS:
                answer(self, message, held)
            else:
                self.server.send({"id": message["id"], "result": {}})

        careful.Client.answer = empty_result  # type: ignore[method-assign]
    if "--reasoning-in-output" in flags:
        buckets = careful.buckets

        def double_counted(updates: list[dict[str, Any]], before: dict[str, Any] | None = None) -> dict[str, int]:
            out = buckets(updates, before)
            return {**out, "output": out["output"] + out["reasoning"]}

        careful.buckets = double_counted
    if "--no-turn-timeout" in flags or "--wait-after-eof" in flags:
        _wait_longer(forever="--no-turn-timeout" in flags, past_eof="--wait-after-eof" in flags)
    if "--unbounded-line-read" in flags:
        careful.Server._read = _read_chunks  # type: ignore[method-assign]
    interrupts = {f for f in flags if f in ("--no-request-timeout", "--completion-after-interrupt")}
    if interrupts or "--unbounded-line-read" in flags or "--completion-per-interrupt" in flags:
        _unbounded_waits(
            requests="--no-request-timeout" in flags,
            lines="--unbounded-line-read" in flags,
            completion_after_answer="--completion-after-interrupt" in flags,
            completion_per_interrupt="--completion-per-interrupt" in flags,
        )


def _leak_late_deltas() -> None:
    """The text of a turn is every delta read while it runs, whichever turn the delta names."""
    read: dict[str, list[str]] = {"text": []}
    pump, run_turn, result = careful.Client.pump, careful.Client.run_turn, careful.Client.result

    def pump_all(self: careful.Client, deadline: float, on_message: Any) -> bool:
        def seen(message: dict[str, Any]) -> bool:
            if message.get("method") == "item/agentMessage/delta":
                read["text"].append((message.get("params") or {}).get("delta", ""))
            return bool(on_message(message))

        return bool(pump(self, deadline, seen))

    def fresh_turn(self: careful.Client, number: int, spec: dict[str, Any]) -> dict[str, Any]:
        read["text"] = []
        return run_turn(self, number, spec)

    def leaky_result(
        self: careful.Client, number: int, status: str, state: dict[str, Any], turn_id: str, error: str | None
    ) -> dict:
        out = result(self, number, status, state, turn_id, error)
        return {**out, "final_text": "".join(read["text"])}

    careful.Client.pump = pump_all  # type: ignore[method-assign]
    careful.Client.run_turn = fresh_turn  # type: ignore[method-assign]
    careful.Client.result = leaky_result  # type: ignore[method-assign]


def _wait_longer(*, forever: bool, past_eof: bool) -> None:
    """``forever``: the turn deadline is never reached; ``past_eof``: EOF on the server's stdout is not seen."""
    pump = careful.Client.pump

    def patient(self: careful.Client, deadline: float, on_message: Any) -> bool:
        if past_eof:
            # The bug: the end of the stream is taken for silence, and waited on until the deadline.
            original_get = self.server.inbox.get

            def get(block: bool = True, timeout: float | None = None) -> Any:
                message = original_get(block, timeout=timeout)
                if message is None:
                    self.server.inbox.put(None)  # keep the marker for later readers
                    careful.time.sleep(max(0.0, deadline - careful.time.monotonic()))
                    raise queue.Empty
                return message

            self.server.inbox.get = get  # type: ignore[method-assign]
            try:
                return bool(pump(self, deadline, on_message))
            finally:
                self.server.inbox.get = original_get  # type: ignore[method-assign]
        return bool(pump(self, careful.time.monotonic() + NEVER_S if forever else deadline, on_message))

    careful.Client.pump = patient  # type: ignore[method-assign]


def _read_chunks(self: careful.Server) -> None:
    """careful.Server._read in chunks, keeping what it holds of a line not yet ended (``self.partial``)."""
    assert self.proc.stdout is not None
    fd, held = self.proc.stdout.fileno(), b""
    self.partial = b""  # type: ignore[attr-defined]
    while chunk := careful.os.read(fd, 65536):
        *lines, held = (held + chunk).split(b"\n")
        self.partial = held  # type: ignore[attr-defined]
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.inbox.put(message)
    self.inbox.put(None)


def _unbounded_waits(
    *, requests: bool, lines: bool, completion_after_answer: bool, completion_per_interrupt: bool
) -> None:
    """Waits that lose their bound: the client's deadline is replaced by "forever" while the bug's condition holds."""
    pump, call, request = careful.Client.pump, careful.Client.call, careful.Server.request
    run_turn = careful.Client.run_turn

    def tracked(self: careful.Server, method: str, params: dict[str, Any]) -> int:
        rid = request(self, method, params)
        if method == "turn/interrupt":
            self.interrupts_out = {*getattr(self, "interrupts_out", set()), rid}  # type: ignore[attr-defined]
            self.interrupts_sent = getattr(self, "interrupts_sent", 0) + 1  # type: ignore[attr-defined]
        return rid

    def unbounded_call(self: careful.Client, method: str, params: dict[str, Any], at_least_s: float = 0.0) -> Any:
        return call(self, method, params, NEVER_S)  # the bug: the request timeout is never applied

    def stuck(self: careful.Client) -> bool:
        """Whether the bug holds the client past its deadline now."""
        server: Any = self.server
        out: set[Any] = getattr(server, "interrupts_out", set())
        partial: bytes = getattr(server, "partial", b"")
        if lines and partial:
            return True  # blocked in readline on a line that never ends
        if requests and out:
            return True  # awaiting the interrupt's answer
        return bool(completion_after_answer and getattr(server, "awaiting_end", False))

    def patient(self: careful.Client, deadline: float, on_message: Any) -> bool:
        server: Any = self.server

        def seen(message: dict[str, Any]) -> bool:
            out: set[Any] = getattr(server, "interrupts_out", set())
            answered = "id" in message and "method" not in message and message["id"] in out
            if answered:
                out.discard(message["id"])
            if message.get("method") == "turn/completed":
                if completion_after_answer and out:
                    server.awaiting_end = True
                    return False  # the bug: the waiter for the turn's end is registered after the answer
                server.awaiting_end = False
            return bool(on_message(message))

        while True:
            done = bool(pump(self, deadline, seen))
            if done or not self.alive or not stuck(self):
                return done
            deadline = careful.time.monotonic() + NEVER_S

    def per_interrupt(self: careful.Client, number: int, spec: dict[str, Any]) -> dict[str, Any]:
        server: Any = self.server
        server.interrupts_sent = 0
        out = run_turn(self, number, spec)
        turn_id = out.get("turn_id")
        for _ in range(server.interrupts_sent - 1):
            # The bug: each interrupt is taken to end the turn once more.
            pump(
                self,
                careful.time.monotonic() + NEVER_S,
                lambda m: (
                    m.get("method") == "turn/completed"
                    and ((m.get("params") or {}).get("turn") or {}).get("id") == turn_id
                ),
            )
        return out

    careful.Server.request = tracked  # type: ignore[method-assign]
    careful.Client.pump = patient  # type: ignore[method-assign]
    if requests:
        careful.Client.call = unbounded_call  # type: ignore[method-assign]
    if completion_per_interrupt:
        careful.Client.run_turn = per_interrupt  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a not in FLAGS]
    if unknown:
        print(f"buggy.py: unknown flag(s) {' '.join(unknown)}; flags: {' '.join(FLAGS)}", file=sys.stderr)
        return 2
    plant(set(argv))
    return careful.main([])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
