"""Frame payloads with the field sets the release played writes: its ``shapes.json``, filled in by the engine.

A release folder's ``shapes.json`` (:mod:`contracts.releases`) holds ``frames``: per frame kind a template,
the JSON the release writes with ``${name}`` where the engine puts a value of its own (:data:`VARIABLES` names
what each kind gets); every other value is written as it stands. So the field sets are data: a field the
engine computes that a release's template leaves out is not written, a field the engine knows nothing of is
written as recorded. A string that is exactly ``${name}`` becomes the value (any JSON type); inside a longer
string it is replaced by its text. ``values`` holds the release's tables (its sandboxes, the models it has
metadata for, the context window of one without). Keeping every real key (also the ``null`` ones) matters
because clients and the validator see absent and ``null`` as different things.

Pure: values in, JSON-ready dicts out. How a command is shown (``/bin/bash -lc``) and a diff is written stay
code (:func:`shell_command`, :func:`unified_diff_add`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

import orjson

from contracts.releases import ReleaseError

_TOKEN: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Per frame kind of ``shapes.json``'s ``frames``: the variables the engine fills in.
VARIABLES: Final[dict[str, frozenset[str]]] = {
    name: frozenset(names.split())
    for name, names in {
        "user_agent": "client_name client_version release",
        "initialize": "user_agent codex_home release",
        "config_warning": "",
        "remote_control_status": "hostname installation_id",
        "model_warning": "thread_id model",
        "rate_limits": "",
        "thread": "thread_id cwd model created_s path ephemeral originator status preview cli_version",
        "thread_session": "thread model cwd approval_policy sandbox",
        "thread_resume": "thread model cwd approval_policy sandbox turns_cursor items_cursor",
        "turns_cursor": "thread_id ordinal",
        "items_cursor": "thread_id ordinal",
        "turn": "turn_id items items_view status error started_s completed_s duration_ms",
        "status_active": "flags",
        "user_message_item": "item_id text started_ms completed_ms",
        "agent_message_item": "item_id text started_ms completed_ms",
        "reasoning_item": "item_id summary started_ms completed_ms",
        "command_item": (
            "item_id command raw_command cwd process_id source status output exit_code duration_ms started_ms "
            "completed_ms"
        ),
        "command_approval": "thread_id turn_id item_id started_ms reason command raw_command cwd amendment",
        "file_change_item": "item_id path diff status started_ms completed_ms",
        "file_change_approval": "thread_id turn_id item_id started_ms",
        "token_breakdown": "total input cached output reasoning",
        "turn_error": "message info details",
        "full_history_deprecation": "",
        "http_error": "status reason error body",
    }.items()
}
#: ``http_error``: one ``{message, info}`` template per HTTP status the model answered, ``other`` for the rest.
HTTP_OTHER: Final = "other"
#: Frame kinds that are texts; every other kind is a JSON object.
TEXT_KINDS: Final = frozenset({"user_agent", "turns_cursor", "items_cursor"})


def fill(template: Any, env: Mapping[str, Any]) -> Any:
    """``template`` with its ``${name}`` tokens of ``env`` filled in (a fresh copy; unknown tokens stay)."""
    kind = type(template)
    if kind is str:
        if "${" not in template:
            return template
        whole = _TOKEN.fullmatch(template)
        if whole is not None and whole.group(1) in env:
            return env[whole.group(1)]
        return _TOKEN.sub(lambda m: str(env[m.group(1)]) if m.group(1) in env else m.group(0), template)
    if kind is list:
        return [fill(value, env) for value in template]
    if kind is dict:
        return {key: fill(value, env) for key, value in template.items()}
    return template


def tokens(template: Any) -> set[str]:
    """Every ``${name}`` a template uses."""
    if isinstance(template, str):
        return set(_TOKEN.findall(template))
    if isinstance(template, list):
        return set().union(*(tokens(v) for v in template)) if template else set()
    if isinstance(template, dict):
        return set().union(*(tokens(v) for v in template.values())) if template else set()
    return set()


class Shapes:
    """One release's ``shapes.json``, checked when read: every frame kind the engine builds is there and uses
    only the variables the engine gives it (:data:`VARIABLES`). Raises ReleaseError naming ``where``."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("frames"), dict) or set(data) - {"frames", "values"}:
            raise ReleaseError(f"{where}: expected an object with frames (and values)")
        frames: dict[str, Any] = data["frames"]
        for kind, allowed in VARIABLES.items():
            if kind not in frames:
                raise ReleaseError(f"{where}: frames.{kind}: missing (the engine builds it)")
            if not isinstance(frames[kind], str if kind in TEXT_KINDS else dict):
                expected = "a text" if kind in TEXT_KINDS else "an object"
                raise ReleaseError(f"{where}: frames.{kind}: expected {expected}")
            unknown = tokens(frames[kind]) - allowed
            if unknown:
                given = ", ".join(sorted(allowed)) or "none"
                raise ReleaseError(
                    f"{where}: frames.{kind}: ${{{sorted(unknown)[0]}}} is not a value the engine gives it "
                    f"(it gives: {given})"
                )
        errors = frames["http_error"]
        if not isinstance(errors, dict) or not all(
            isinstance(e, dict) and set(e) == {"message", "info"} for e in errors.values()
        ) or HTTP_OTHER not in errors:
            raise ReleaseError(f"{where}: frames.http_error: expected {{message, info}} per status, and {HTTP_OTHER!r}")
        values = data.get("values", {})
        self._frames = frames
        self.context_window = _value(values, "context_window", int, where)
        models = _value(values, "known_models", list, where)
        if not all(isinstance(m, str) for m in models):
            raise ReleaseError(f"{where}: values.known_models: expected model names")
        #: the models the release has metadata for (others get a ``warning``)
        self.known_models: frozenset[str] = frozenset(models)
        self.sandboxes: dict[str, Any] = _value(values, "sandboxes", dict, where)
        self.default_sandbox: str = _value(values, "default_sandbox", str, where)
        if self.default_sandbox not in self.sandboxes:
            raise ReleaseError(f"{where}: values.default_sandbox: expected one of values.sandboxes")

    def build(self, kind: str, **env: Any) -> Any:
        return fill(self._frames[kind], env)

    # --- the frames --------------------------------------------------------------------------------

    def user_agent(self, name: str, version: str, release: str) -> str:
        return str(self.build("user_agent", client_name=name, client_version=version, release=release))

    def initialize_result(self, name: str, version: str, codex_home: str, release: str) -> dict[str, Any]:
        """``release``: the codex-cli version the fake plays (fake_server.profiles), as the userAgent names it."""
        agent = self.user_agent(name, version, release)
        return dict(self.build("initialize", user_agent=agent, codex_home=codex_home, release=release))

    def config_warning(self) -> dict[str, Any]:
        return dict(self.build("config_warning"))

    def remote_control_status(self, hostname: str, installation_id: str) -> dict[str, Any]:
        return dict(self.build("remote_control_status", hostname=hostname, installation_id=installation_id))

    def model_warning(self, thread_id: str, model: str) -> dict[str, Any]:
        return dict(self.build("model_warning", thread_id=thread_id, model=model))

    def rate_limits(self) -> dict[str, Any]:
        return dict(self.build("rate_limits"))

    def full_history_deprecation(self) -> dict[str, Any]:
        return dict(self.build("full_history_deprecation"))

    def thread(
        self,
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
        cli_version: str,
    ) -> dict[str, Any]:
        env = {
            "thread_id": thread_id,
            "cwd": cwd,
            "model": model,
            "created_s": created_s,
            "path": path,
            "ephemeral": ephemeral,
            "originator": originator,
            "status": status,
            "preview": preview,
            "cli_version": cli_version,
        }
        return dict(self.build("thread", **env))

    def _session_env(
        self, thread_obj: dict[str, Any], model: str, cwd: str, approval_policy: str, sandbox: str
    ) -> dict[str, Any]:
        chosen = self.sandboxes.get(sandbox, self.sandboxes[self.default_sandbox])
        return {
            "thread": thread_obj,
            "model": model,
            "cwd": cwd,
            "approval_policy": approval_policy,
            "sandbox": fill(chosen, {}),
        }

    def thread_session_result(
        self, thread_obj: dict[str, Any], *, model: str, cwd: str, approval_policy: str, sandbox: str
    ) -> dict[str, Any]:
        """The body of the thread/start (and thread/fork) response."""
        return dict(self.build("thread_session", **self._session_env(thread_obj, model, cwd, approval_policy, sandbox)))

    def resume_result(
        self,
        thread_obj: dict[str, Any],
        *,
        model: str,
        cwd: str,
        approval_policy: str,
        sandbox: str,
        thread_id: str,
        turns: int,
    ) -> dict[str, Any]:
        """thread/resume's answer, with its history cursors: a thread without turns has none to page back
        through (observed: both cursors null)."""
        env = self._session_env(thread_obj, model, cwd, approval_policy, sandbox)
        env["turns_cursor"] = self.build("turns_cursor", thread_id=thread_id, ordinal=turns) if turns else None
        env["items_cursor"] = self.build("items_cursor", thread_id=thread_id, ordinal=turns * 8 + 1) if turns else None
        return dict(self.build("thread_resume", **env))

    def turn(
        self,
        turn_id: str,
        *,
        status: str = "inProgress",
        started_s: int | None = None,
        completed_s: int | None = None,
        duration_ms: int | None = None,
        items: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        env = {
            "turn_id": turn_id,
            "items": items or [],
            "items_view": "summary" if items is not None and status == "completed" else "notLoaded",
            "status": status,
            "error": error,
            "started_s": started_s,
            "completed_s": completed_s,
            "duration_ms": duration_ms,
        }
        return dict(self.build("turn", **env))

    def status_active(self, flags: list[str]) -> dict[str, Any]:
        return dict(self.build("status_active", flags=flags))

    def user_message_item(self, item_id: str, text: str, started_ms: int, completed_ms: int | None) -> dict[str, Any]:
        env = {"item_id": item_id, "text": text, "started_ms": started_ms, "completed_ms": completed_ms}
        return dict(self.build("user_message_item", **env))

    def agent_message_item(self, item_id: str, text: str, started_ms: int, completed_ms: int | None) -> dict[str, Any]:
        env = {"item_id": item_id, "text": text, "started_ms": started_ms, "completed_ms": completed_ms}
        return dict(self.build("agent_message_item", **env))

    def reasoning_item(
        self, item_id: str, summary: list[str], started_ms: int, completed_ms: int | None
    ) -> dict[str, Any]:
        env = {"item_id": item_id, "summary": summary, "started_ms": started_ms, "completed_ms": completed_ms}
        return dict(self.build("reasoning_item", **env))

    def command_item(
        self,
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
        env = {
            "item_id": item_id,
            "command": shell_command(command),
            "raw_command": command,
            "cwd": cwd,
            "process_id": process_id,
            "source": source,
            "status": status,
            "output": output,
            "exit_code": exit_code,
            "duration_ms": duration_ms,
            "started_ms": started_ms,
            "completed_ms": completed_ms,
        }
        return dict(self.build("command_item", **env))

    def command_approval_params(
        self, thread_id: str, turn_id: str, item_id: str, command: str, cwd: str, started_ms: int, reason: str
    ) -> dict[str, Any]:
        env = {
            "thread_id": thread_id,
            "turn_id": turn_id,
            "item_id": item_id,
            "started_ms": started_ms,
            "reason": reason,
            "command": shell_command(command),
            "raw_command": command,
            "cwd": cwd,
            "amendment": execpolicy_amendment(command),
        }
        return dict(self.build("command_approval", **env))

    def file_change_item(
        self, item_id: str, path: str, content: str, *, status: str, started_ms: int, completed_ms: int | None = None
    ) -> dict[str, Any]:
        env = {
            "item_id": item_id,
            "path": path,
            "diff": content,
            "status": status,
            "started_ms": started_ms,
            "completed_ms": completed_ms,
        }
        return dict(self.build("file_change_item", **env))

    def file_change_approval_params(
        self, thread_id: str, turn_id: str, item_id: str, started_ms: int
    ) -> dict[str, Any]:
        env = {"thread_id": thread_id, "turn_id": turn_id, "item_id": item_id, "started_ms": started_ms}
        return dict(self.build("file_change_approval", **env))

    def token_breakdown(self, input_tokens: int, cached: int, output: int, reasoning: int) -> dict[str, int]:
        env = {"total": input_tokens + output, "input": input_tokens, "cached": cached, "output": output}
        env["reasoning"] = reasoning
        return dict(self.build("token_breakdown", **env))

    def http_failure(self, status: int, error: str) -> tuple[str, Any]:
        """The turn error the release reports for an HTTP error from the model (retries 0), by status (observed)."""
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        # The Responses API's error body, as the mock sent it: a 400 reports it as it stands.
        body = orjson.dumps({"error": {"message": error, "type": "server_error", "code": "server_error"}}).decode()
        errors = self._frames["http_error"]
        template = errors.get(str(status), errors[HTTP_OTHER])
        filled = fill(template, {"status": status, "reason": reason, "error": error, "body": body})
        return str(filled["message"]), filled["info"]

    def turn_error(self, message: str, info: Any, details: str | None = None) -> dict[str, Any]:
        return dict(self.build("turn_error", message=message, info=info, details=details))


def _value(values: Any, name: str, kind: type, where: str) -> Any:
    value = values.get(name) if isinstance(values, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ReleaseError(f"{where}: values.{name}: expected a {kind.__name__}")
    return value


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


def unified_diff_add(relpath: str, content: str) -> str:
    lines = content.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{relpath} b/{relpath}\nnew file mode 100644\n--- /dev/null\n+++ b/{relpath}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
