"""A release is held to its own pinned schema, nothing more: no rule its pin does not have."""

from __future__ import annotations

import copy

from contracts import schema_store
from contracts.validator import Validator

NOTIFICATION = {"method": "thread/started", "params": {}}


def _without_emitted_at() -> dict[str, object]:
    bundle = copy.deepcopy(dict(schema_store.load_bundle("0.171.0")))
    bundle["ServerNotification.json"]["properties"].pop("emittedAtMs")
    return bundle


def _problems(validator: Validator, frame: dict[str, object]) -> list[str]:
    return [str(v) for v in validator.validate(frame, "s2c") if "emittedAtMs" in str(v)]


def test_emitted_at_is_required_only_where_the_pin_declares_it() -> None:
    declared = Validator(schema_store.load_bundle("0.171.0"), "0.171.0")
    assert _problems(declared, NOTIFICATION)  # 0.171.0's pin declares it: a notification without it is not its own
    assert not _problems(declared, {**NOTIFICATION, "emittedAtMs": 1})
    older = Validator(_without_emitted_at(), "0.130.0")
    assert _problems(older, NOTIFICATION) == []  # a pin without it: the rule is not the release's
