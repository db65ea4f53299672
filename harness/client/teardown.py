"""The session's exit watcher and its bounded teardown (trio driver side): end a running turn, end our output,
wait for the peer's end of stream, wait for the exit, kill; each step recorded as a
:class:`~contracts.record.TeardownStep`.

The steps follow the transport (:mod:`contracts.transport`): the stream names its two ends (on stdio
``close_stdin`` and ``wait_stdout_eof``), and a transport without a process has no ``wait_exit`` and ends
in dropping the connection instead of a kill. A running turn is interrupted first on every transport:
ending a connection does not end a turn (a websocket server carries the turn on after a close frame).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from contracts.record import TeardownStep
from contracts.transport import ProcessHandle

if TYPE_CHECKING:
    from harness.client.session import Session


async def watch_exit(session: Session, process: ProcessHandle) -> None:
    code = await process.wait_exit()
    session.connection.exit_code = code
    session.note(f"exit {code}")
    session.exited.set()


async def run_teardown(session: Session) -> None:
    """Bounded, step by step: end a running turn, end our output, wait for the peer's end, wait for exit, kill."""
    active = session.connection.active
    if active is not None and active.result is None:
        turn = session.turn_for(active)
        turn.request_cancel("aborted", "execution cancelled: session closed")
        await turn.wait_after_cancel()
    session.connection.closing = True
    start = session.now()
    total = session.options.teardown_timeout
    words, process = session.stream.words, session.process
    await step(session, words.close_step, session.stream.send_eof(), start + total * 0.1)
    if not session.killed:
        session.note(words.closed)
    reader_done, exited = session.reader_done, session.exited
    await step(session, words.eof_step, reader_done.wait(), start + total * 0.45, done_already=reader_done.is_set())
    if process is not None:
        stop = getattr(process, "stop_after_close", None)  # a listener serves on after its connection: stop it
        if callable(stop) and not exited.is_set():
            stop()
        await step(session, "wait_exit", exited.wait(), start + total * 0.9, done_already=exited.is_set())
        group_alive = getattr(process, "group_alive", None)
        need_kill = not exited.is_set() or not reader_done.is_set() or (callable(group_alive) and group_alive())
        reason = "teardown: server did not exit" if not exited.is_set() else "teardown: process group still alive"
    else:
        need_kill = not reader_done.is_set()
        reason = "teardown: server did not close the connection"
    kill_start = session.now()
    if need_kill:
        if not session.killed:
            session.kill(reason)
        else:
            session.kill_server()  # the group may hold processes started after the first kill
        with trio.move_on_at(max(start + total, session.now() + 0.05)) as scope:
            if process is not None:
                await exited.wait()
            await reader_done.wait()
        outcome = "timeout" if scope.cancelled_caught else "done"
    else:
        outcome = "skipped"
    session.teardown.append(TeardownStep("kill", kill_start, session.now(), outcome))
    session.write_log(
        logging.INFO,
        "cleanup",
        phase="cleanup",
        latency=session.now() - start,
        reaped=exited.is_set(),
        exit_status=session.exit_code,
        stderr_bytes=getattr(process, "stderr_bytes", None),
        stderr_truncated=getattr(process, "stderr_truncated", None),
    )
    session.connection.close_trace(session.now())


async def step(session: Session, name: str, awaitable: Any, deadline: float, *, done_already: bool = False) -> None:
    started = session.now()
    if done_already:
        awaitable.close()
        session.teardown.append(TeardownStep(name, started, started, "done"))
        return
    outcome = "done"
    try:
        with trio.move_on_at(deadline) as scope:
            await awaitable
        if scope.cancelled_caught:
            outcome = "timeout"
    except Exception as exc:
        outcome = f"error: {exc}"
    session.teardown.append(TeardownStep(name, started, session.now(), outcome))
