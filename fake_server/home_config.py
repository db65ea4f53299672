"""What fake-codex answers from the client's own setup: the ``config.toml`` of the ``CODEX_HOME`` it is given and
its ``-c key=value`` overrides, as the real binary does.

Observed on the real binary (``tests/data/real/<release>/thread_store/observed.json``, the ``setup:`` cases):
``config/read`` shows the home's file with the overrides over it (``model``, ``model_provider``,
``approval_policy``, ``sandbox_mode``, ``model_providers``: null / empty when nothing sets them), its layers are
``sessionFlags`` (only when ``-c`` was given), ``user`` (the file, even when absent) and ``system``;
``modelProvider/list`` lists the configured providers and the built-in ``openai``, by id, the default being
``model_provider`` or ``openai``; a new thread's ``model`` is the configured one, else the release's default
model (``model/list``'s ``isDefault``), and its ``modelProvider`` the configured one, else ``openai``.

The answers are derived from the release's recorded ones: ``config/read`` from an empty home (answers.json's
``config/read+empty`` / ``config/read+layers+empty``, recorded by ``tests/surface_observe.py --answers-into``:
keys no layer sets are null or absent there, ``analytics``, ``check_for_update_on_startup`` and
``features.plugins`` included, and have no origin) with what this setup sets put in, each set leaf's origin
naming its layer (``tests/data/real/<release>/surface/observed.json``). The answer recorded with the harness's
mock-provider ``config.toml`` gives the shape of what a file adds (a provider's fields, ``features``'
``network_proxy``); a setup equal to that file gives the recorded answers unchanged. The in-process fake has no
home: it keeps the recorded answers (:attr:`fake_server.world.World.setup` None).
"""

from __future__ import annotations

import copy
import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any

import orjson

from contracts import bounded_parse, safe_read
from contracts.exitcodes import InvalidInput
from contracts.jsonval import as_object

MAX_CONFIG_BYTES = 1024 * 1024
BUILTIN_PROVIDER = "openai"
#: What ``config/read`` shows for a key no layer sets, for a release folder learned before answers.json held the
#: empty home's answer (``config/read+empty``).
UNSET: dict[str, Any] = {
    "model": None,
    "model_provider": None,
    "approval_policy": None,
    "approvals_reviewer": None,
    "sandbox_mode": None,
    "model_providers": {},
}


class ConfigError(InvalidInput, ValueError):
    """The home's config.toml or a ``-c`` override cannot be read (``str()`` says why)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """The home's ``config.toml`` (``user``, ``{}`` when absent) and the ``-c`` overrides (``flags``), as tables."""

    user: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)

    @property
    def effective(self) -> dict[str, Any]:
        return merged(self.user, self.flags)

    @property
    def model(self) -> str | None:
        value = self.effective.get("model")
        return value if isinstance(value, str) else None

    @property
    def provider(self) -> str:
        value = self.effective.get("model_provider")
        return value if isinstance(value, str) else BUILTIN_PROVIDER

    @property
    def providers(self) -> dict[str, dict[str, Any]]:
        value = self.effective.get("model_providers")
        if not isinstance(value, dict):
            return {}
        return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, dict)}


def merged(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    """``high`` over ``low``, tables merged key by key (a TOML layer over another)."""
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict[str, Any]:
    """``-c a.b=VALUE`` as ``{"a": {"b": VALUE}}``; VALUE as TOML, else the raw string (as the real binary)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"Invalid override (missing '='): {text}")
    parts = key.split(".")
    if len(parts) >= bounded_parse.MAX_DEPTH:
        raise ConfigError(f"Invalid override: {key[:60]}... has more than {bounded_parse.MAX_DEPTH - 1} parts")
    try:
        value: Any = bounded_parse.loads_toml(f"v = {raw.strip()}", bounded_parse.MAX_DEPTH - len(parts))["v"]
    except bounded_parse.TooDeep as exc:
        raise ConfigError(f"Invalid override {key[:60]}: {exc}") from None
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    for part in reversed(parts):
        value = {part.strip().strip('"'): value}
    return dict(value)


def read_setup(codex_home: str, overrides: list[str]) -> Setup:
    """The setup of ``codex_home``: its ``config.toml`` (bounded, a regular file, no link followed) and
    ``overrides``. :class:`ConfigError` when either cannot be read."""
    user: dict[str, Any] = {}
    try:
        data = safe_read.read_bounded(os.path.join(codex_home, "config.toml"), MAX_CONFIG_BYTES)
    except FileNotFoundError:
        data = None
    except OSError as exc:
        raise ConfigError(f"cannot read {codex_home}/config.toml: {exc}") from None
    if data is not None:
        try:
            user = bounded_parse.loads_toml(data.decode("utf-8"))
        except bounded_parse.TooDeep as exc:
            raise ConfigError(f"{codex_home}/config.toml: {exc}") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{codex_home}/config.toml is not valid TOML: {exc}") from None
    flags: dict[str, Any] = {}
    for text in overrides:
        flags = merged(flags, parse_override(text))
    return Setup(user, flags)


# --- the answers ------------------------------------------------------------------------------------


def _version(table: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(orjson.dumps(table, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _leaves(table: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in table.items():
        path = f"{prefix}{key}"
        out += _leaves(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return out


def _provider_entry(template: dict[str, Any], recorded_cfg: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """A provider as ``config/read`` shows it: every field of the recorded one, what the recorded file set
    unset, this one's settings in."""
    entry = {k: (None if k in recorded_cfg else v) for k, v in template.items()}
    entry.update({k: v for k, v in cfg.items() if k in entry})
    return entry


def _table(key: str, value: dict[str, Any], shown: Any, recorded_cfg: dict[str, Any], recorded_user: Any) -> Any:
    """Table ``key`` set to ``value`` as ``config/read`` shows it: the empty home's table (``shown``), the fields
    the release shows beside any it is given (in the recorded answer, not set by the recorded file: ``features``
    shows ``network_proxy`` once the table is there), then ``value``."""
    base = shown if isinstance(shown, dict) else {}
    recorded_table = as_object(recorded_cfg.get(key))
    recorded_set = recorded_user.get(key) if isinstance(recorded_user, dict) else None
    recorded_set = recorded_set if isinstance(recorded_set, dict) else {}
    beside = {k: v for k, v in recorded_table.items() if k not in base and k not in recorded_set}
    return merged(merged(base, copy.deepcopy(beside)), value)


def config_answer(
    empty: dict[str, Any] | None,
    recorded: dict[str, Any],
    recorded_layers: dict[str, Any],
    setup: Setup,
    codex_home: str,
) -> Any:
    """``config/read`` for ``setup``. ``empty``: the release's answer to the same request from an empty home
    (answers.json's ``config/read+empty`` / ``config/read+layers+empty``; None for a release folder learned
    without it: the recorded answer, what its file set taken out, stands in); ``recorded``: the answer with the
    harness's mock-provider file (``recorded_layers``: with its layers)."""
    recorded_user = recorded_layers["layers"][0]["config"]
    if not setup.flags and setup.user == recorded_user:
        return recorded
    out = copy.deepcopy(empty if empty is not None else recorded)
    config = out["config"]
    recorded_cfg = recorded["config"]
    if empty is None:
        for key in recorded_user:
            if key in UNSET and key in config:
                config[key] = copy.deepcopy(UNSET[key])
    template_providers = recorded_cfg.get("model_providers")
    template = next(iter(template_providers.values()), None) if isinstance(template_providers, dict) else None
    recorded_provider_cfg: Any = next(iter((recorded_user.get("model_providers") or {}).values()), {})
    for key, value in setup.effective.items():
        if key not in config and key not in recorded_cfg:
            continue  # not a setting this release shows
        if key == "model_providers" and isinstance(value, dict) and template is not None:
            config[key] = {
                pid: _provider_entry(template, recorded_provider_cfg, cfg)
                for pid, cfg in value.items()
                if isinstance(cfg, dict)
            }
        elif isinstance(value, dict):
            config[key] = _table(key, value, config.get(key), recorded_cfg, recorded_user)
        else:
            config[key] = value
    user_name = {"type": "user", "file": f"{codex_home}/config.toml", "profile": None}
    layers: list[dict[str, Any]] = [{"name": user_name, "version": _version(setup.user), "config": setup.user}]
    if setup.flags:
        layers.insert(0, {"name": {"type": "sessionFlags"}, "version": _version(setup.flags), "config": setup.flags})
    origins: dict[str, Any] = {}
    for layer in reversed(layers):  # the higher layer's origin wins
        for leaf in _leaves(layer["config"]):
            origins[leaf] = {"name": layer["name"], "version": layer["version"]}
    out["origins"] = origins  # observed: with and without the layers, a key no layer sets has no origin
    if "layers" in out:
        out["layers"] = layers + [layer for layer in recorded_layers["layers"][1:]]
    return out


def providers_answer(recorded: dict[str, Any], setup: Setup) -> dict[str, Any]:
    """``modelProvider/list`` for ``setup`` (``recorded``: the release's answer with the mock provider)."""
    builtin = [p for p in recorded["data"] if p.get("id") == BUILTIN_PROVIDER]
    custom = [p for p in recorded["data"] if p.get("id") != BUILTIN_PROVIDER]
    shape = custom[0] if custom else {"canEdit": True, "settings": {"type": "customGateway", "auth": {"mode": "none"}}}
    data = list(builtin)
    for pid, cfg in setup.providers.items():
        if pid == BUILTIN_PROVIDER:
            continue
        name, base_url = cfg.get("name"), cfg.get("base_url")
        entry = {**copy.deepcopy(shape), "id": pid, "name": name if isinstance(name, str) else pid}
        entry["baseUrl"] = base_url if isinstance(base_url, str) else None
        data.append(entry)
    data.sort(key=lambda p: str(p.get("id")))
    return {**recorded, "data": data, "defaultProviderId": setup.provider}


def default_model(model_list: dict[str, Any]) -> str | None:
    """The release's default model (``model/list``'s ``isDefault``)."""
    for model in model_list.get("data") or []:
        if isinstance(model, dict) and model.get("isDefault") and isinstance(model.get("id"), str):
            return str(model["id"])
    return None
