"""A method's schema keeps every definition it reaches, however many schemas were built before it.

The validator caches the definitions a schema refers to by the schema's identity. That is sound only for the
bundle's own objects, alive as long as the validator: a schema built for one call is freed after it, and the next
one may get its id, and with it the first one's list. CI once saw `Pointer '/definitions/ItemStartedNotification'
does not exist` in a careful client's run for that reason.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from contracts import schema_store
from contracts.releases import default_version
from contracts.validator import Validator

_REF = re.compile(r'"#/definitions/([^"/]+)"')


def _ids(value: Any, into: set[int]) -> set[int]:
    into.add(id(value))
    if isinstance(value, dict):
        for item in value.values():
            _ids(item, into)
    elif isinstance(value, list):
        for item in value:
            _ids(item, into)
    return into


def test_only_the_bundles_own_objects_are_cached_by_identity() -> None:
    version = default_version()
    bundle = schema_store.load_bundle(version)
    validator = Validator(bundle, version)
    assert validator.compile_all() > 100
    owned = _ids(bundle, set())
    assert validator._ref_cache and set(validator._ref_cache) <= owned


def test_every_reference_of_every_method_schema_is_kept() -> None:
    version = default_version()
    validator = Validator(schema_store.load_bundle(version), version)
    validator.compile_all()
    for key in validator._schemas:
        schema = validator.schema_for(key)
        missing = set(_REF.findall(orjson.dumps(schema).decode())) - set(schema["definitions"])
        assert not missing, (key, missing)
