"""Skills, hooks, marketplaces, plugins, apps and MCP servers, as the real binary answers them offline.

The real session has the bundled system skills and nothing else installed; remote plugin features
are off (the real target's network-off configuration), so they are refused with the real messages.
"""

from __future__ import annotations

from typing import Any

from fake_server.surface import static
from fake_server.surface.call import Call
from fake_server.surface.errors import internal, invalid, invalid_params

SHARING_OFF = "plugin sharing is not enabled"
ONE_SOURCE = "{method} requires exactly one of marketplacePath or remoteMarketplaceName"


def _recorded(call: Call) -> Any:
    return static.answer(call.world.profile, call.method, cwd=call.cwd, codex_home=call.codex_home)


def skills_list(call: Call) -> dict[str, Any]:
    result = _recorded(call)
    cwds = [c for c in call.params.get("cwds") or [] if isinstance(c, str)] or [call.cwd]
    template = result["data"][0]
    return {"data": [{**template, "cwd": cwd} for cwd in cwds]}


def hooks_list(call: Call) -> dict[str, Any]:
    cwds = [c for c in call.params.get("cwds") or [] if isinstance(c, str)] or [call.cwd]
    return {"data": [{"cwd": cwd, "hooks": [], "warnings": [], "errors": []} for cwd in cwds]}


def extra_roots_set(call: Call) -> dict[str, Any]:
    call.before("skills/changed", {})
    return {}


def skills_config_write(call: Call) -> dict[str, Any]:
    if (call.params.get("path") is None) == (call.params.get("name") is None):
        raise invalid_params("skills/config/write requires exactly one of path or name")
    return {"effectiveEnabled": bool(call.params.get("enabled"))}


def marketplace_add(call: Call) -> Any:
    raise invalid("invalid marketplace source format; expected owner/repo, a git URL, or a local marketplace path")


def marketplace_remove(call: Call) -> Any:
    raise invalid(f"marketplace `{call.params.get('marketplaceName')}` is not configured or installed")


def one_source(call: Call) -> Any:
    has_path = call.params.get("marketplacePath") is not None
    has_remote = call.params.get("remoteMarketplaceName") is not None
    if has_path == has_remote:
        raise invalid(ONE_SOURCE.format(method=call.method))
    if has_remote:
        raise invalid(f"remote plugin read is not enabled for marketplace {call.params['remoteMarketplaceName']}")
    raise internal(f"marketplace not found: {call.params['marketplacePath']}")


def skill_read(call: Call) -> Any:
    raise invalid(f"remote plugin skill read is not enabled for marketplace {call.params.get('remoteMarketplaceName')}")


def sharing_off(call: Call) -> Any:
    raise invalid(SHARING_OFF)


def uninstall(call: Call) -> Any:
    raise invalid("remote plugin uninstall is not enabled")


def app_read(call: Call) -> dict[str, Any]:
    ids = [a for a in call.params.get("appIds") or [] if isinstance(a, str)]
    return {"apps": [], "missingAppIds": list(dict.fromkeys(ids))}


def mcp_login(call: Call) -> Any:
    raise invalid(f"No MCP server named '{call.params.get('name')}' found.")


def mcp_resource_read(call: Call) -> Any:
    raise internal(f"unknown MCP server '{call.params.get('server')}'")


HANDLERS = {
    "skills/list": skills_list,
    "skills/extraRoots/set": extra_roots_set,
    "skills/config/write": skills_config_write,
    "hooks/list": hooks_list,
    "marketplace/add": marketplace_add,
    "marketplace/remove": marketplace_remove,
    "marketplace/upgrade": _recorded,
    "plugin/list": _recorded,
    "plugin/installed": _recorded,
    "plugin/reconcile": _recorded,
    "plugin/read": one_source,
    "plugin/install": one_source,
    "plugin/uninstall": uninstall,
    "plugin/skill/read": skill_read,
    "plugin/share/save": sharing_off,
    "plugin/share/updateTargets": sharing_off,
    "plugin/share/list": sharing_off,
    "plugin/share/checkout": sharing_off,
    "plugin/share/delete": sharing_off,
    "app/read": app_read,
    "app/list": _recorded,
    "app/installed": _recorded,
    "mcpServer/oauth/login": mcp_login,
    "config/mcpServer/reload": lambda call: {},
    "mcpServerStatus/list": _recorded,
    "mcpServer/resource/read": mcp_resource_read,
}
