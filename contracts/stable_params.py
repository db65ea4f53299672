"""Which params fields of a client method a release takes without ``experimentalApi``, from its own pin.

``generate-json-schema`` leaves a field gated behind the capability out of the stable bundle and keeps it in the
experimental one; the server refuses it from a client that did not opt in (older releases: ``thread/resume.excludeTurns
requires experimentalApi capability``; newer ones made the field stable). A client that knows the release it
talks to sends such a field only where the release takes it.
"""

from __future__ import annotations

from typing import Any

from contracts import schema_store
from contracts.protocol_index import Union, build_index


def params_fields(release: str, method: str, experimental: bool) -> frozenset[str] | None:
    """The top-level params fields of ``method`` in the release's stable (or experimental) pin; None when the pin
    cannot be read or does not describe the method's params."""
    try:
        bundle = schema_store.load_bundle(release, experimental)
    except (schema_store.SchemaStoreError, OSError):
        return None
    entry = build_index(bundle).methods[Union.CLIENT_REQUEST].get(method)
    if entry is None or not entry.params_refs:
        return None
    definitions: dict[str, Any] = bundle.get("ClientRequest.json", {}).get("definitions", {})
    properties = definitions.get(entry.params_refs[0], {}).get("properties")
    return frozenset(properties) if isinstance(properties, dict) else None


def takes_without_opt_in(release: str | None, method: str, name: str) -> bool:
    """Whether the release takes ``name`` in ``method``'s params from a client without ``experimentalApi``: False
    only when its pin says the field is experimental (in the experimental bundle, not the stable one); a release
    without a readable pin is taken to accept it (what a client sends by default)."""
    if release is None:
        return True
    stable = params_fields(release, method, experimental=False)
    full = params_fields(release, method, experimental=True)
    if stable is None or full is None:
        return True
    return name in stable or name not in full
