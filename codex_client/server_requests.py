"""Approval policies at work (trio driver side): each approval the core opened runs its policy in its own
background task, bounded by ``approval_timeout``; the decision goes back to the core, which says what to send.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import trio

from codex_client.approvals import DECISIONS, ERROR_DECISION
from codex_client.approvaltable import PendingApproval
from codex_client.driver import Driver
from codex_client.errors import ClientError
from contracts.messages import Message
from contracts.transport import TransportClosed


async def run_policy(driver: Driver, pending: PendingApproval, scope: trio.CancelScope) -> None:
    """Ask the policy (bounded; ``scope`` is cancelled when the request closes first) and answer."""
    decision: Any = None
    reason: str | None = None
    with scope:
        try:
            with trio.move_on_after(driver.options.approval_timeout) as deadline:
                decision = driver.policy(pending.request)
                if inspect.isawaitable(decision):
                    decision = await decision
            if deadline.cancelled_caught:
                decision, reason = "cancel", "approval policy past its deadline"
            elif not (isinstance(decision, dict) or decision in DECISIONS):
                decision, reason = ERROR_DECISION, f"approval policy returned an invalid decision: {decision!r}"
        except Exception as exc:
            decision, reason = ERROR_DECISION, f"approval policy failed: {exc!r}"
    if scope.cancelled_caught:
        return
    driver.drive(lambda conn: conn.answer_approval(pending, decision, reason, driver.now()))


async def send_answer(driver: Driver, answer: Message) -> None:
    """Write an answer the core decided on; one that cannot be written is moot (the failure shows elsewhere)."""
    if not driver.connection.alive:
        return
    with contextlib.suppress(TransportClosed, ClientError), trio.move_on_after(driver.options.request_timeout):
        await driver.send(answer)
