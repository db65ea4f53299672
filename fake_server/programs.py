"""Driving turn programs: run a turn's generator until it waits, schedule what it waits for, stop it.

A program (:mod:`fake_server.turns`) yields :class:`~fake_server.state.Sleep` (resume on a timer),
:class:`~fake_server.state.NextAnswer` (resume with the next approval answer or tool end) or
:class:`~fake_server.state.Park` (never on its own). Interrupts and steers stop it from outside.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

from fake_server.outbox import Outbox
from fake_server.state import NextAnswer, Park, Program, Sleep, TurnRun


def resume(box: Outbox, run: TurnRun, value: Any = None) -> None:
    """Run the turn's program until it waits; schedule what it waits for."""
    program = run.program
    while program is not None and run.program is program:
        if box.silent:
            return
        try:
            wait = program.send(value)
        except StopIteration:
            if run.program is program:
                run.program = None
            return
        except Exception:
            box.stderr("ERROR fake-codex: turn program failed\n" + traceback.format_exc())
            if run.program is program:
                run.program = None
            return
        value = None
        if isinstance(wait, Sleep):
            if wait.ms <= 0:
                continue
            run.timer = box.after(wait.ms, functools.partial(_wake, box, run, program))
            return
        if isinstance(wait, NextAnswer):
            if run.answers:
                value = run.answers.popleft()
                continue
            run.waiting_answer = True
            return
        if isinstance(wait, Park):
            return


def _wake(box: Outbox, run: TurnRun, program: Program) -> None:
    if run.program is program:
        run.timer = None
        resume(box, run)


def deliver(box: Outbox, run: TurnRun, event: Any) -> None:
    """Queue an answer or tool end for the program; resume it if it is waiting for one."""
    run.answers.append(event)
    if run.waiting_answer:
        run.waiting_answer = False
        resume(box, run, run.answers.popleft())


def stop(box: Outbox, run: TurnRun) -> None:
    """Close the program and cancel its timers (interrupt, steer): open items stay open."""
    box.cancel_timer(run.timer)
    run.timer = None
    for token in run.tool_timers:
        box.cancel_timer(token)
    run.tool_timers.clear()
    run.waiting_answer = False
    program, run.program = run.program, None
    if program is not None:
        program.close()
