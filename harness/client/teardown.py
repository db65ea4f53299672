"""The session's exit watcher and its bounded teardown: end a running turn, close stdin, wait for stdout EOF,
wait for the exit, kill; each step recorded as a :class:`~contracts.record.TeardownStep`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from contracts.record import TeardownStep
from harness.client.tracemarks import close_trace

if TYPE_CHECKING:
    from harness.client.session import Session


async def watch_exit(session: Session) -> None:
    code = await session.transport.wait_exit()
    session.exit_code = code
    session.note(f"exit {code}")
    session._exited.set()


async def run_teardown(session: Session) -> None:
    """Bounded, step by step: end a running turn, close stdin, wait for stdout EOF, wait for exit, kill."""
    opts = session.options
    turn = session._active
    if turn is not None and turn.result is None:
        turn.request_cancel("aborted", "execution cancelled: session closed")
        await turn._wait_after_cancel()
    session._closing = True
    start = session.now()
    total = opts.teardown_timeout
    stdin_close = step(session, "close_stdin", session.transport.close_input(), start + total * 0.1)
    await stdin_close
    if not session.killed:
        session.note("stdin closed")
    await step(
        session,
        "wait_stdout_eof",
        session._reader_done.wait(),
        start + total * 0.45,
        done_already=session._reader_done.is_set(),
    )
    await step(session, "wait_exit", session._exited.wait(), start + total * 0.9, done_already=session._exited.is_set())
    group_alive = getattr(session.transport, "group_alive", None)
    need_kill = (
        not session._exited.is_set() or not session._reader_done.is_set() or (callable(group_alive) and group_alive())
    )
    kill_start = session.now()
    if need_kill:
        if not session.killed:
            session.kill(
                "teardown: server did not exit"
                if not session._exited.is_set()
                else "teardown: process group still alive"
            )
        else:
            session.transport.kill()  # the group may hold processes started after the first kill
        with trio.move_on_at(max(start + total, session.now() + 0.05)) as scope:
            await session._exited.wait()
            await session._reader_done.wait()
        outcome = "timeout" if scope.cancelled_caught else "done"
    else:
        outcome = "skipped"
    session.teardown.append(TeardownStep("kill", kill_start, session.now(), outcome))
    session._log(
        logging.INFO,
        "cleanup",
        phase="cleanup",
        latency=session.now() - start,
        reaped=session._exited.is_set(),
        exit_status=session.exit_code,
        stderr_bytes=getattr(session.transport, "stderr_bytes", None),
        stderr_truncated=getattr(session.transport, "stderr_truncated", None),
    )
    close_trace(session)


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
