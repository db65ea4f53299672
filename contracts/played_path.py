"""The truth of a turn follows the path the server played: an approval that never came decides nothing.

A scenario's ``[expect]`` describes its turns as the scenario's own settings play them: ``approval_cancel`` asks an
approval, the plan answers cancel, the turn is aborted. A client may legitimately configure its thread so the
server asks nothing (``approvalPolicy: "never"`` refuses the escalation; a workspace-write sandbox lets the patch
through; ``approvalsReviewer: "auto_review"`` lets a reviewer model decide), and the real binary then completes
the turn. Such a turn is judged by the path the server played: the expected Result status is the one its
``turn/completed`` says, and the declared usage, which counted the declared path's model calls, is not the
truth of that path (usage is judged from the wire).

The runner notes which turns script an approval (``meta["approval_turns"]``, from the scenario); a turn among
them whose stretch of the wire carries no approval request from the server is re-judged as above. A turn with
an approval request, one the client interrupted, or without a Result naming its turn id, or without a
``turn/completed``, keeps its truth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contracts.expect import Expect, ExpectTurn
from contracts.jsonval import as_object

#: Server requests that ask the client to approve (v2, and the v1 names still in the schema).
APPROVAL_METHODS = frozenset(
    {
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
    }
)
#: turn/completed's status -> the Result status a correct client reports for it
RESULT_OF = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


def _turn_facts(wire: list[Any]) -> tuple[set[str], dict[str, str], bool]:
    """The turn ids an approval request named or the client interrupted, each turn's turn/completed status, and
    whether any approval request named no turn (then no turn is re-judged). A turn the client interrupted may
    have ended before its approval point (a cancel, the client's own turn timeout): the approval not asked is
    then the client's doing, not its settings', and the turn keeps its truth."""
    asked: set[str] = set()
    ended: dict[str, str] = {}
    unnamed = False
    for entry in wire:
        frame = entry.frame
        if not isinstance(frame, dict):
            continue
        method = frame.get("method")
        params = as_object(frame.get("params"))
        if entry.dir == "c2s":
            if method == "turn/interrupt" and isinstance(params.get("turnId"), str):
                asked.add(params["turnId"])
            continue
        if entry.dir != "s2c":
            continue
        if method in APPROVAL_METHODS and "id" in frame:
            turn_id = params.get("turnId")
            if isinstance(turn_id, str):
                asked.add(turn_id)
            else:
                unnamed = True
        elif method == "turn/completed":
            turn = as_object(params.get("turn"))
            if isinstance(turn.get("id"), str) and isinstance(turn.get("status"), str):
                ended.setdefault(turn["id"], turn["status"])
    return asked, ended, unnamed


def played(expect: Expect, meta: dict[str, Any], wire: list[Any], results: list[Any]) -> tuple[Expect, list[str]]:
    """``expect`` with each scripted-approval turn the server played without asking re-judged by its own end;
    and a note per turn so re-judged (for the report)."""
    approval_turns = meta.get("approval_turns")
    if not isinstance(approval_turns, list) or not approval_turns or not expect.turns:
        return expect, []
    asked, ended, unnamed = _turn_facts(wire)
    if unnamed:
        return expect, []
    turn_ids = {r.index: r.turn_id for r in results if getattr(r, "turn_id", None)}
    turns = list(expect.turns)
    notes: list[str] = []
    for index in approval_turns:
        if not isinstance(index, int) or not 0 <= index < len(turns):
            continue
        turn_id = turn_ids.get(index)
        if turn_id is None or turn_id in asked or turn_id not in ended:
            continue
        server_status = ended[turn_id]
        status = RESULT_OF.get(server_status)
        declared = turns[index]
        if status is None or (declared.server_status == server_status and status in declared.statuses):
            continue
        turns[index] = ExpectTurn(status=status, usage=None, server_status=server_status)  # type: ignore[arg-type]
        notes.append(
            f"turn {index + 1}: the server asked no approval (the client's settings), so the turn is judged by "
            f"the path it played ({server_status}), not the declared {declared.status}"
        )
    if not notes:
        return expect, []
    return replace(expect, turns=tuple(turns)), notes
