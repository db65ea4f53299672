"""The turn supervisor (trio driver side): hard deadline, semantic inactivity and cancellation of one turn, and
the interrupt procedure (``turn/interrupt`` and ``turn/completed`` within ONE budget, else the group is killed).

It works through the session's driver API (:class:`~codex_client.driver.Driver`: ``call``, ``finish_turn``,
``kill_turn``, ``connection``).
"""

from __future__ import annotations

import logging
import math

import trio

from codex_client.driver import Driver
from codex_client.errors import ClientError
from codex_client.turn import Turn
from codex_client.turnphase import Phase
from contracts.jsonrpc import RpcError
from contracts.messages import JsonId, Request


async def supervise(driver: Driver, turn: Turn) -> None:
    """Deadline, inactivity and cancellation of one turn; runs the interrupt procedure."""
    core = turn.core
    connection = driver.connection
    idle_after = driver.options.inactivity_timeout
    hard = core.started_at + core.timeout if core.timeout is not None else math.inf
    try:
        while core.result is None:
            if core.phase is Phase.CANCELLING:
                await interrupt(driver, turn)
                return
            now = driver.now()
            if now >= hard:
                turn.request_cancel("timeout", f"timed out after {core.timeout:g}s")
                continue
            idle = math.inf
            if idle_after is not None and not connection.approvals.waiting_on(core):
                idle = core.last_activity + idle_after
                if now >= idle:
                    turn.request_cancel(
                        "timeout",
                        f"semantic inactivity timeout after {idle_after:g}s "
                        f"(thread {connection.thread_id}, turn {core.turn_id}){driver.stderr_suffix()}",
                    )
                    continue
            turn.wake = trio.Event()
            with trio.move_on_at(min(hard, idle)):
                await turn.wake.wait()
    except Exception as exc:  # a client bug must still end the turn
        connection.client_error(f"turn supervisor: {exc!r}")
        driver.kill_turn(core, f"client error: {exc!r}")


async def interrupt(driver: Driver, turn: Turn) -> None:
    """Send turn/interrupt and wait for turn/completed within ONE budget; kill the group on failure."""
    core = turn.core
    connection = driver.connection
    if core.result is not None:
        return
    if core.state.completed:
        driver.finish_turn(core)
        return
    if not connection.alive:
        driver.finish_turn(core, failure=f"server gone: {connection.failure or connection.kill_reason}")
        return
    if core.turn_id is None or connection.thread_id is None:
        driver.kill_turn(core, "cancelled before the turn had an id")
        return
    budget = driver.options.interrupt_budget
    # its trace mark; the consumer sees InterruptSent
    request = driver.drive(lambda conn: conn.interrupt(core, driver.now()))
    answered = False  # stays False when the budget runs out while the answer is awaited
    with turn.interrupt_shield(), trio.move_on_after(budget) as budget_scope:
        if not await _send_interrupt(driver, turn, request):
            return  # answered with an error or not at all: the turn is already handled
        answered = True
        await turn.finished.wait()
    if core.result is None or not core.completed_by_server:
        if not answered:
            _answered(driver, turn, request.id, "timeout", "no answer within the budget")
        if core.result is None:
            driver.write_log(
                logging.WARNING,
                "turn interrupt completion timed out",
                thread_id=connection.thread_id,
                turn_id=core.turn_id,
                timeout=budget,
            )
            driver.kill_turn(core, f"turn interrupt completion timed out after {budget:g}s")
        return
    if not answered and budget_scope.cancelled_caught:
        _answered(driver, turn, request.id, "no answer", "turn/completed came, the answer did not")


async def _send_interrupt(driver: Driver, turn: Turn, request: Request) -> bool:
    """Send the interrupt and wait for its answer: True when answered, False when the turn was handled here
    (an error answer, the session's failure); the budget's expiry cancels the wait."""
    core = turn.core
    try:
        await driver.call(request, driver.options.interrupt_budget)
    except RpcError as exc:
        _answered(driver, turn, request.id, "error", exc.message)
        driver.write_log(
            logging.WARNING,
            "turn interrupt failed",
            thread_id=driver.connection.thread_id,
            turn_id=core.turn_id,
            error=exc.message,
        )
        if core.result is None:
            driver.kill_turn(core, f"turn interrupt failed: {exc.message}")
        return False
    except ClientError as exc:  # timeout, exit, kill, lost frame: the session's typed failure
        _answered(driver, turn, request.id, "no answer", str(exc))
        if core.result is None:
            driver.kill_turn(core, f"turn interrupt: {exc}")
        return False
    _answered(driver, turn, request.id, "ok", None)
    return True


def _answered(driver: Driver, turn: Turn, request_id: JsonId, outcome: str, error: str | None) -> None:
    driver.drive(lambda conn: conn.interrupt_answered(turn.core, request_id, outcome, error, driver.now()))
    turn.wake_consumer()  # the turn may have ended: no longer the one handle() wakes
