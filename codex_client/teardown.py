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
from typing import Any

import trio

from codex_client.driver import Driver
from contracts.record import TeardownStep
from contracts.transport import ProcessHandle


async def watch_exit(driver: Driver, process: ProcessHandle) -> None:
    code = await process.wait_exit()
    driver.connection.process_exited(code, driver.now())
    driver.exited.set()


async def run_teardown(driver: Driver) -> None:
    """Bounded, step by step: end a running turn, end our output, wait for the peer's end, wait for exit, kill."""
    connection = driver.connection
    active = connection.active
    if active is not None and active.result is None:
        turn = driver.turn_for(active)
        turn.request_cancel("aborted", "execution cancelled: session closed")
        await turn.wait_after_cancel()
    connection.begin_closing()
    start = driver.now()
    total = driver.options.teardown_timeout
    words, process = driver.stream.words, driver.process
    await step(driver, words.close_step, driver.stream.send_eof(), start + total * 0.1)
    if not connection.killed:
        driver.note(words.closed)
    reader_done, exited = driver.reader_done, driver.exited
    await step(driver, words.eof_step, reader_done.wait(), start + total * 0.45, done_already=reader_done.is_set())
    if process is not None:
        if not exited.is_set():
            process.stop_after_close()  # a listener serves on after its connection: stop it
        await step(driver, "wait_exit", exited.wait(), start + total * 0.9, done_already=exited.is_set())
        need_kill = not exited.is_set() or not reader_done.is_set() or process.group_alive()
        reason = "teardown: server did not exit" if not exited.is_set() else "teardown: process group still alive"
    else:
        need_kill = not reader_done.is_set()
        reason = "teardown: server did not close the connection"
    kill_start = driver.now()
    if need_kill:
        if not connection.killed:
            driver.kill(reason)
        else:
            driver.kill_server()  # the group may hold processes started after the first kill
        with trio.move_on_at(max(start + total, driver.now() + 0.05)) as scope:
            if process is not None:
                await exited.wait()
            await reader_done.wait()
        outcome = "timeout" if scope.cancelled_caught else "done"
    else:
        outcome = "skipped"
    driver.teardown.append(TeardownStep("kill", kill_start, driver.now(), outcome))
    driver.write_log(
        logging.INFO,
        "cleanup",
        phase="cleanup",
        latency=driver.now() - start,
        reaped=exited.is_set(),
        exit_status=connection.exit_code,
        stderr_bytes=process.stderr_bytes if process is not None else None,
        stderr_truncated=process.stderr_truncated if process is not None else None,
    )
    driver.drive(lambda conn: conn.close_trace(driver.now()))


async def step(driver: Driver, name: str, awaitable: Any, deadline: float, *, done_already: bool = False) -> None:
    started = driver.now()
    if done_already:
        awaitable.close()
        driver.teardown.append(TeardownStep(name, started, started, "done"))
        return
    outcome = "done"
    try:
        with trio.move_on_at(deadline) as scope:
            await awaitable
        if scope.cancelled_caught:
            outcome = "timeout"
    except Exception as exc:
        outcome = f"error: {exc}"
    driver.teardown.append(TeardownStep(name, started, driver.now(), outcome))
