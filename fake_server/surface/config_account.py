"""Models, providers, config, features, permission profiles and the account, as the real binary answers offline.

Offline with the mock provider there is no account: reads answer with nulls, and everything that
needs an OpenAI account is refused with the real messages.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fake_server import home_config
from fake_server.surface import static
from fake_server.surface.call import Call
from fake_server.surface.errors import invalid

SETUP_COMPLETED_MS = 5  # observed 4-8 ms after the answer, behind the next requests
AUTH_REQUIRED = {
    "account/rateLimits/read": "codex account authentication required to read rate limits",
    "account/rateLimitResetCredit/consume": "codex account authentication required for rate limit reset credits",
    "account/usage/read": "codex account authentication required to read token usage",
    "account/workspaceMessages/read": "codex account authentication required to read workspace messages",
    "account/sendAddCreditsNudgeEmail": "codex account authentication required to notify workspace owner",
}


def _static(call: Call, key: str) -> Any:
    return static.answer(call.world.profile, key, cwd=call.cwd, codex_home=call.codex_home)


def recorded(key: str | None = None) -> Any:
    def handler(call: Call) -> Any:
        return _static(call, key or call.method)

    return handler


def config_read(call: Call) -> dict[str, Any]:
    key = "config/read+layers" if call.params.get("includeLayers") else "config/read"
    result = _static(call, key)
    setup = call.world.setup
    if setup is not None:  # fake-codex with a CODEX_HOME: its config.toml and -c overrides (fake_server.home_config)
        empty = _static(call, f"{key}+empty") if f"{key}+empty" in static.keys(call.world.profile) else None
        layers = _static(call, "config/read+layers")
        result = home_config.config_answer(empty, result, layers, setup, call.codex_home)
        if "model" in call.state.config_values:
            result["config"]["model"] = call.state.config_values["model"]
        return result
    config = result["config"]
    scenario_config = call.world.scenario.config
    config["model"] = call.state.config_values.get("model", scenario_config.model)
    config["approval_policy"] = scenario_config.approval_policy
    return result


def _write_result(call: Call) -> dict[str, Any]:
    call.state.config_version += 1
    digest = hashlib.sha256(f"{call.world.ids.uuid4()}/{call.state.config_version}".encode()).hexdigest()
    return {
        "status": "ok",
        "version": f"sha256:{digest}",
        "filePath": f"{call.codex_home}/config.toml",
        "overriddenMetadata": None,
    }


def config_value_write(call: Call) -> dict[str, Any]:
    key = call.params.get("keyPath")
    if isinstance(key, str):
        call.state.config_values[key] = call.params.get("value")
    return _write_result(call)


def config_batch_write(call: Call) -> dict[str, Any]:
    for edit in call.params.get("edits") or []:
        if isinstance(edit, dict) and isinstance(edit.get("keyPath"), str):
            call.state.config_values[edit["keyPath"]] = edit.get("value")
    return _write_result(call)


def provider_config_write(call: Call) -> dict[str, Any]:
    settings = call.params.get("settings")
    if not isinstance(settings, dict) or "type" not in settings:
        raise invalid("Invalid request: missing field `type`")
    from fake_server.surface.schema_answer import minimal_result

    return minimal_result(call.world.profile.schema_release, call.method)


def provider_default_set(call: Call) -> dict[str, Any]:
    provider = call.params.get("providerId")
    known = {p["id"] for p in _static(call, "modelProvider/list")["data"]}
    if provider not in known:
        raise invalid(
            f"Model provider `{provider}` is not configured.", {"config_write_error_code": "configValidationError"}
        )
    return {}


def feature_enablement_set(call: Call) -> dict[str, Any]:
    enablement = call.params.get("enablement")
    return {"enablement": dict(enablement) if isinstance(enablement, dict) else {}}


def auth_required(call: Call) -> Any:
    raise invalid(AUTH_REQUIRED[call.method])


def login_cancel(call: Call) -> Any:
    raise invalid(f"invalid login id: {call.params.get('loginId')}")


def gateway_login(call: Call) -> Any:
    raise invalid("The selected provider does not use gateway OAuth")


def login_start(call: Call) -> dict[str, Any]:
    """An API key login succeeds offline (the key is not checked until a model request); others need the network."""
    kind = call.params.get("type")
    if kind != "apiKey":
        raise invalid(f"login type `{kind}` needs the network; script it with [[methods]]")
    call.after(
        "account/login/completed", {"loginId": None, "success": True, "error": None, "onboardingEntrypoint": None}
    )
    call.after("account/updated", {"authMode": "apikey", "planType": None, "reason": None})
    return {"type": "apiKey"}


def logout(call: Call) -> dict[str, Any]:
    call.after("account/updated", {"authMode": None, "planType": None, "reason": None})
    return {}


def windows_setup_start(call: Call) -> dict[str, Any]:
    mode = call.params.get("mode")
    call.later(
        SETUP_COMPLETED_MS,
        "windowsSandbox/setupCompleted",
        {"mode": mode, "success": False, "error": f"{mode} Windows sandbox setup is only supported on Windows"},
    )
    return {"started": True}


def new_import(call: Call) -> dict[str, Any]:
    return {"importId": call.world.ids.uuid4()}


def feedback_save(call: Call) -> dict[str, Any]:
    # The real binary writes a zip of logs to savePath; the fake writes nothing (no host side effects).
    return {
        "savedPath": call.params.get("savePath"),
        "threadId": f"no-active-thread-{call.world.ids.uuid7(call.world.now_ms)}",
        "promptHash": None,
    }


def model_provider_list(call: Call) -> dict[str, Any]:
    result: dict[str, Any] = static.answer(
        call.world.profile,
        "modelProvider/list",
        cwd=call.cwd,
        codex_home=call.codex_home,
        base_url="http://127.0.0.1:0/v1",
    )
    if call.world.setup is not None:
        return home_config.providers_answer(result, call.world.setup)
    return result


HANDLERS = {
    "model/list": recorded(),
    "modelProvider/list": model_provider_list,
    "modelProvider/capabilities/read": recorded(),
    "modelProvider/config/write": provider_config_write,
    "modelProvider/default/set": provider_default_set,
    "config/read": config_read,
    "configRequirements/read": recorded(),
    "config/value/write": config_value_write,
    "config/batchWrite": config_batch_write,
    "experimentalFeature/list": recorded(),
    "experimentalFeature/enablement/set": feature_enablement_set,
    "permissionProfile/list": recorded(),
    "account/read": recorded(),
    "account/securitySetup/read": recorded(),
    "account/gatewayOAuth/read": recorded(),
    "account/gatewayOAuth/cancel": lambda call: {},
    "account/gatewayOAuth/login": gateway_login,
    "account/login/cancel": login_cancel,
    "account/login/start": login_start,
    "account/logout": logout,
    **{method: auth_required for method in AUTH_REQUIRED},
    "windowsSandbox/readiness": recorded(),
    "windowsSandbox/setupStart": windows_setup_start,
    "externalAgentConfig/detect": recorded(),
    "externalAgentConfig/import": new_import,
    "externalAgentConfig/import/readHistories": recorded(),
    "externalAgentConfig/import/recordHistory": new_import,
    "feedback/save": feedback_save,
}
