"""Frame payloads with the exact field sets codex-cli 0.171.0 writes (copied from real transcripts).

Pure functions: values in, JSON-ready dicts out. Keeping every real key (also the ``null`` ones)
matters because clients and the validator see absent and ``null`` as different things.
"""

from __future__ import annotations

import shlex
from http import HTTPStatus
from typing import Any, Final

import orjson

CLI_VERSION: Final = "0.171.0"
CONTEXT_WINDOW: Final = 258400  # the fallback for a model without metadata
HIGH_DEMAND: Final = "We\u2019re currently experiencing high demand, which may cause temporary errors."
BUBBLEWRAP_WARNING: Final = (
    "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox "
    "prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the "
    "bundled bubblewrap in the meantime."
)
FULL_HISTORY_DEPRECATION: Final = {
    "summary": "Full-history hydration is deprecated for paginated threads; use `excludeTurns: true`, then page "
    "with `thread/turns/list` and `thread/items/list`.",
    "details": None,
}
KNOWN_MODELS: Final = frozenset({"gpt-5.5", "gpt-6.2-sol", "gpt-6.2-astra"})

SANDBOXES: Final = {
    "read-only": {"type": "readOnly", "networkAccess": False},
    "workspace-write": {
        "type": "workspaceWrite",
        "writableRoots": [],
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    },
    "danger-full-access": {"type": "dangerFullAccess"},
}


def user_agent(name: str, version: str, release: str = CLI_VERSION) -> str:
    return f"{name}/{release} (Linux; x86_64) fake-codex ({name}; {version})"


def initialize_result(name: str, version: str, codex_home: str, release: str = CLI_VERSION) -> dict[str, Any]:
    """``release``: the codex-cli version the fake plays (fake_server.profiles), as the userAgent names it."""
    return {
        "userAgent": user_agent(name, version, release),
        "codexHome": codex_home,
        "platformFamily": "unix",
        "platformOs": "linux",
    }


def config_warning() -> dict[str, Any]:
    return {"summary": BUBBLEWRAP_WARNING, "details": None}


def remote_control_status(hostname: str, installation_id: str) -> dict[str, Any]:
    return {"status": "disabled", "serverName": hostname, "installationId": installation_id, "environmentId": None}


def model_warning(thread_id: str, model: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "message": f"Model metadata for `{model}` not found. Defaulting to fallback metadata; "
        "this can degrade performance and cause issues.",
    }


def rate_limits() -> dict[str, Any]:
    return {
        "rateLimits": {
            "limitId": "codex",
            "limitName": None,
            "normalModelSlug": None,
            "primary": None,
            "secondary": None,
            "credits": None,
            "individualLimit": None,
            "spendControlReached": None,
            "planType": None,
            "rateLimitReachedType": None,
        }
    }


def thread(
    *,
    thread_id: str,
    cwd: str,
    model: str,
    created_s: int,
    path: str | None,
    ephemeral: bool,
    originator: str,
    status: dict[str, Any],
    preview: str = "",
    cli_version: str = CLI_VERSION,
) -> dict[str, Any]:
    return {
        "id": thread_id,
        "environments": [{"environmentId": "local", "cwd": cwd, "runtimeWorkspaceRoots": [cwd]}],
        "extra": None,
        "sessionId": thread_id,
        "forkedFromId": None,
        "attachedToThreadId": None,
        "parentThreadId": None,
        "preview": preview,
        "ephemeral": ephemeral,
        "section": None,
        "sectionEnteredAt": None,
        "projectId": None,
        "historyMode": "paginated",
        "modelProvider": "mock_provider",
        "model": model,
        "reasoningEffort": None,
        "createdAt": created_s,
        "updatedAt": created_s,
        "recencyAt": created_s,
        "status": status,
        "path": path,
        "cwd": cwd,
        "cliVersion": cli_version,
        "originator": originator,
        "source": "vscode",
        "canAcceptDirectInput": True,
        "threadSource": None,
        "agentNickname": None,
        "agentRole": None,
        "gitInfo": None,
        "name": None,
        "daybreakEnabled": None,
        "turns": [],
    }


def thread_session_result(
    thread_obj: dict[str, Any], *, model: str, cwd: str, approval_policy: str, sandbox: str
) -> dict[str, Any]:
    """The body shared by the thread/start and thread/resume responses."""
    return {
        "thread": thread_obj,
        "model": model,
        "modelProvider": "mock_provider",
        "serviceTier": None,
        "disabledPluginIds": [],
        "cwd": cwd,
        "runtimeWorkspaceRoots": [cwd],
        "instructionSources": [],
        "approvalPolicy": approval_policy,
        "approvalsReviewer": "user",
        "sandbox": SANDBOXES.get(sandbox, SANDBOXES["read-only"]),
        "activePermissionProfile": None,
        "reasoningEffort": None,
        "multiAgentMode": "explicitRequestOnly",
    }


def resume_result(session: dict[str, Any], thread_id: str, model: str, turns: int) -> dict[str, Any]:
    """thread/resume's answer: the thread/start body plus the collaboration mode and history cursors."""
    out = {k: v for k, v in session.items() if k != "multiAgentMode"}
    out["collaborationMode"] = {
        "mode": "default",
        "settings": {"model": model, "reasoning_effort": None, "developer_instructions": None},
    }
    out["multiAgentMode"] = session["multiAgentMode"]
    out["initialTurnsPage"] = None
    cursor = '{{"requestedThreadId":"{t}","rolloutOrdinal":{o},"includeAnchor":true,"scope":{{"kind":"{k}"}}}}'
    # A thread without turns has no history to page back through (observed: both cursors null).
    out["turnsBackwardsCursor"] = cursor.format(t=thread_id, o=turns, k="turns") if turns else None
    out["itemsBackwardsCursor"] = (
        cursor.format(t=thread_id, o=turns * 8 + 1, k="itemsByCreatedAtOrdinal") if turns else None
    )
    return out


def turn(
    turn_id: str,
    *,
    status: str = "inProgress",
    started_s: int | None = None,
    completed_s: int | None = None,
    duration_ms: int | None = None,
    items: list[dict[str, Any]] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": turn_id,
        "rootTurnId": turn_id,
        "items": items or [],
        "itemsView": "summary" if items is not None and status == "completed" else "notLoaded",
        "status": status,
        "error": error,
        "startedAt": started_s,
        "completedAt": completed_s,
        "durationMs": duration_ms,
    }


def status_active(flags: list[str]) -> dict[str, Any]:
    return {"type": "active", "activeFlags": flags}


def user_message_item(item_id: str, text: str, started_ms: int, completed_ms: int | None) -> dict[str, Any]:
    return {
        "type": "userMessage",
        "id": item_id,
        "clientId": None,
        "content": [{"type": "text", "text": text, "text_elements": []}],
        "startedAtMs": started_ms,
        "completedAtMs": completed_ms,
    }


def agent_message_item(item_id: str, text: str, started_ms: int, completed_ms: int | None) -> dict[str, Any]:
    return {
        "type": "agentMessage",
        "moderation": None,
        "id": item_id,
        "text": text,
        "phase": None,
        "memoryCitation": None,
        "delivery": None,
        "questions": None,
        "startedAtMs": started_ms,
        "completedAtMs": completed_ms,
    }


def reasoning_item(item_id: str, summary: list[str], started_ms: int, completed_ms: int | None) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": summary,
        "content": [],
        "startedAtMs": started_ms,
        "completedAtMs": completed_ms,
    }


def shell_command(command: str) -> str:
    """How codex shows an ``exec_command`` cmd: wrapped in a login shell, quoted like shlex."""
    if "'" in command:
        return '/bin/bash -lc "' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"/bin/bash -lc '{command}'"


def execpolicy_amendment(command: str) -> list[str]:
    """A simple command proposes its argv; a compound one proposes the whole shell invocation."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return ["/bin/bash", "-lc", command]
    if not tokens or any(t and set(t) <= set("();<>|&") for t in tokens):
        return ["/bin/bash", "-lc", command]
    return tokens


def command_item(
    item_id: str,
    command: str,
    cwd: str,
    *,
    status: str,
    started_ms: int,
    completed_ms: int | None = None,
    process_id: str | None = None,
    source: str = "agent",
    output: str | None = None,
    exit_code: int | None = None,
    duration_ms: int | None = None,
) -> dict[str, Any]:
    return {
        "type": "commandExecution",
        "id": item_id,
        "pluginId": None,
        "scriptPath": None,
        "command": shell_command(command),
        "cwd": cwd,
        "processId": process_id,
        "source": source,
        "status": status,
        "commandActions": [{"type": "unknown", "command": command}],
        "aggregatedOutput": output,
        "exitCode": exit_code,
        "durationMs": duration_ms,
        "startedAtMs": started_ms,
        "completedAtMs": completed_ms,
    }


def command_approval_params(
    thread_id: str, turn_id: str, item_id: str, command: str, cwd: str, started_ms: int, reason: str
) -> dict[str, Any]:
    amendment = execpolicy_amendment(command)
    return {
        "kind": "command",
        "threadId": thread_id,
        "turnId": turn_id,
        "itemId": item_id,
        "startedAtMs": started_ms,
        "environmentId": "local",
        "reason": reason,
        "command": shell_command(command),
        "cwd": cwd,
        "commandActions": [{"type": "unknown", "command": command}],
        "proposedExecpolicyAmendment": amendment,
        "availableDecisions": [
            "accept",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": amendment}},
            "cancel",
        ],
    }


def file_change_item(
    item_id: str, path: str, content: str, *, status: str, started_ms: int, completed_ms: int | None = None
) -> dict[str, Any]:
    return {
        "type": "fileChange",
        "id": item_id,
        "changes": [{"path": path, "kind": {"type": "add"}, "diff": content}],
        "status": status,
        "startedAtMs": started_ms,
        "completedAtMs": completed_ms,
    }


def file_change_approval_params(thread_id: str, turn_id: str, item_id: str, started_ms: int) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "turnId": turn_id,
        "itemId": item_id,
        "startedAtMs": started_ms,
        "reason": None,
        "grantRoot": None,
    }


def unified_diff_add(relpath: str, content: str) -> str:
    lines = content.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{relpath} b/{relpath}\nnew file mode 100644\n--- /dev/null\n+++ b/{relpath}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def token_breakdown(input_tokens: int, cached: int, output: int, reasoning: int) -> dict[str, int]:
    return {
        "totalTokens": input_tokens + output,
        "inputTokens": input_tokens,
        "cachedInputTokens": cached,
        "cacheWriteInputTokens": 0,
        "outputTokens": output,
        "reasoningOutputTokens": reasoning,
    }


MODEL_URL: Final = "http://127.0.0.1/v1/responses"


def http_failure(status: int, error: str) -> tuple[str, Any]:
    """The turn error 0.171.0 reports for an HTTP error from the model (retries 0), by status (observed)."""
    if status == 500:
        return HIGH_DEMAND, "internalServerError"
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    if status == 429:
        return f"exceeded retry limit, last status: 429 {reason}", {
            "responseTooManyFailedAttempts": {"httpStatusCode": 429}
        }
    if status == 400:  # the body itself, as the Responses API sent it
        body = {"error": {"message": error, "type": "server_error", "code": "server_error"}}
        return orjson.dumps(body).decode(), "other"
    message = f"unexpected status {status} {reason}: {error}, url: {MODEL_URL}"
    return message, {"httpConnectionFailed": {"httpStatusCode": status}}


def turn_error(message: str, info: Any, details: str | None = None) -> dict[str, Any]:
    return {"message": message, "codexErrorInfo": info, "additionalDetails": details, "misalignment": None}
