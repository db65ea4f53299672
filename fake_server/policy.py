"""What a tool call does under the client's approval settings, as the release's ``policy.json`` says.

The release folder's ``policy.json`` (learned from a policy observation by :mod:`harness.learn.policy`) gives,
for each ``approvalPolicy`` × ``sandbox`` × ``approvalsReviewer``, the outcome of four kinds of tool call: a
plain command, a command asking for escalation (a scenario's ``approval = true`` command), a patch inside the
thread's work directory and one outside it. The outcome is ``ask`` (an approval request to the client),
``review`` (the approvals reviewer decides; the client sees ``item/autoApprovalReview/*``), ``run`` (nothing
asked) or ``reject`` (refused before it starts: no item; the model is told and called again).

The settings are the thread's: ``thread/start`` params, else the home's ``config.toml`` / ``-c`` (the setup),
else the scenario's ``[config]``; ``turn/start`` overrides change them for that turn and the ones after it (as
the real binary keeps them). A setting the table does not know (a release without ``policy.json``, a policy
it has no row for) leaves the scenario's own ``approval`` flags in charge, as before the table.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Literal

from contracts.scenario import CommandItem, FileChangeItem

Outcome = Literal["ask", "review", "run", "reject"]
POLICY_FILE = "policy.json"
#: ``sandboxPolicy.type`` of a ``turn/start`` override -> the ``sandbox`` mode of ``thread/start``
SANDBOX_TYPES = {"readOnly": "read-only", "workspaceWrite": "workspace-write", "dangerFullAccess": "danger-full-access"}
#: the legacy name the schema still accepts for the reviewer subagent
REVIEWER_ALIASES = {"guardian_subagent": "auto_review"}


@dataclass(slots=True)
class Settings:
    """A thread's approval settings as the client (or its home) set them."""

    approval_policy: Any = "on-request"  # a name, or {"granular": {...}}
    sandbox: str = "read-only"
    reviewer: str = "user"

    def key(self) -> str | None:
        policy = policy_key(self.approval_policy)
        if policy is None:
            return None
        return f"{policy} / {self.sandbox} / {REVIEWER_ALIASES.get(self.reviewer, self.reviewer)}"

    def override(self, params: dict[str, Any]) -> None:
        """``turn/start``'s overrides (``approvalPolicy``, ``sandboxPolicy``, ``approvalsReviewer``), kept."""
        if params.get("approvalPolicy") is not None:
            self.approval_policy = params["approvalPolicy"]
        sandbox = params.get("sandboxPolicy")
        if isinstance(sandbox, dict) and sandbox.get("type") in SANDBOX_TYPES:
            self.sandbox = SANDBOX_TYPES[sandbox["type"]]
        if isinstance(params.get("approvalsReviewer"), str):
            self.reviewer = params["approvalsReviewer"]


#: What the schema's GranularAskForApproval defaults (the real binary answers them filled in).
GRANULAR_DEFAULTS = {"request_permissions": False, "skill_approval": False}


def normalise(table: dict[str, Any] | None, policy: Any) -> Any:
    """The ``approvalPolicy`` as the release answers it: a name it takes for another (the table's ``aliases``: the
    releases observed answer ``on-failure`` from config.toml as ``on-request``), a granular form with its defaults."""
    aliases = table.get("aliases") if isinstance(table, dict) else None
    if isinstance(policy, str) and isinstance(aliases, dict) and isinstance(aliases.get(policy), str):
        return aliases[policy]
    if isinstance(policy, dict) and isinstance(policy.get("granular"), dict):
        return {"granular": {**GRANULAR_DEFAULTS, **policy["granular"]}}
    return policy


def policy_key(policy: Any) -> str | None:
    """The table's name for an ``approvalPolicy`` value (granular: by whether sandbox approvals are asked)."""
    if isinstance(policy, str):
        return policy
    if isinstance(policy, dict) and isinstance(policy.get("granular"), dict):
        asks = policy["granular"].get("sandbox_approval")
        return "granular" if asks else "granular-no-sandbox-approval"
    return None


def action(item: CommandItem | FileChangeItem, cwd: str) -> str:
    """The table's kind of tool call for a scripted item in a thread whose work directory is ``cwd``."""
    if isinstance(item, CommandItem):
        return "command_escalated" if item.approval else "command"
    path = posixpath.normpath(posixpath.join(cwd, item.path))
    root = posixpath.normpath(cwd)
    inside = path == root or path.startswith(root.rstrip("/") + "/")
    return "patch_inside" if inside else "patch_outside"


def outcome(table: dict[str, Any] | None, settings: Settings, item: CommandItem | FileChangeItem, cwd: str) -> Outcome:
    """What the release does with ``item`` under ``settings``; the scenario's own flag when the table cannot say."""
    legacy: Outcome = "ask" if item.approval else "run"
    key = settings.key()
    rows = table.get("outcomes") if isinstance(table, dict) else None
    row = rows.get(key) if isinstance(rows, dict) and key is not None else None
    found = row.get(action(item, cwd)) if isinstance(row, dict) else None
    if found not in ("ask", "review", "run", "reject"):
        return legacy
    if isinstance(item, FileChangeItem) and not item.approval and found in ("ask", "review"):
        return "run"  # the scenario says this patch needs no approval: kept (the real binary has no such patch)
    return found
