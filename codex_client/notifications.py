"""What the client knows about the server's notifications: the methods it understands and whose thread one is."""

from __future__ import annotations

from typing import Any, Final

from codex_client.turnstate import nested_id

#: methods the client understands; anything else is ignored and counted
KNOWN_NOTIFICATIONS: Final = frozenset(
    {
        "thread/started",
        "thread/status/changed",
        "thread/tokenUsage/updated",
        "thread/readState/changed",
        "thread/name/updated",
        "turn/started",
        "turn/completed",
        "turn/diff/updated",
        "turn/plan/updated",
        "item/started",
        "item/completed",
        "item/agentMessage/delta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/textDelta",
        "item/commandExecution/outputDelta",
        "item/commandExecution/terminalInteraction",
        "item/fileChange/outputDelta",
        "item/fileChange/patchUpdated",
        "item/mcpToolCall/progress",
        "serverRequest/resolved",
        "error",
        "warning",
        "configWarning",
        "deprecationNotice",
        "account/rateLimits/updated",
        "remoteControl/status/changed",
        "model/rerouted",
    }
)


def thread_of(method: str, params: dict[str, Any]) -> Any:
    """The thread a notification names (``threadId``, or ``thread.id`` on ``thread/started``)."""
    thread = params.get("threadId")
    if thread is None and method == "thread/started":
        thread = nested_id(params, "thread")
    return thread
