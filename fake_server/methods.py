"""The client→server methods of the release played, as its deserializer lists them, and what it says of others.

The table is the release's (:attr:`contracts.releases.Release.methods`): its pinned schema's ``ClientRequest``
variants in declaration order, with the methods its folder's ``release.json`` lists beyond the schema, put
where the real "unknown variant" answer lists them; the experimental ones (behind ``experimentalApi``) and
those that may omit ``params`` come from the schema too. It is read on the first request.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from contracts.releases import MethodTable


def unknown_variant_message(method: str, table: MethodTable) -> str:
    """The real answer to a method the release does not know (serde's message for an unknown enum tag)."""
    listed = ", ".join(f"`{m}`" for m in table.client)
    return f"Invalid request: unknown variant `{method}`, expected one of {listed}"


@functools.cache
def pinned_client_requests(release: str) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """The pinned experimental schema of ``release`` and its client requests by method (indexed once per
    release); raises what loading the pin raises."""
    from contracts import schema_store
    from contracts.protocol_index import Union, build_index

    bundle = schema_store.load_bundle(release, True)
    return bundle, dict(build_index(bundle).methods[Union.CLIENT_REQUEST])


@functools.cache
def schema_required_params(release: str, method: str) -> tuple[str, ...]:
    """Required params fields of a client method, from the release's pinned experimental schema.

    The schema lists them alphabetically, not in serde's declaration order, so with several missing
    the first one named may differ from the real message; with one missing it is exact.
    """
    try:
        bundle, requests = pinned_client_requests(release)
        entry = requests.get(method)
        definitions = bundle["ClientRequest.json"].get("definitions", {})
    except Exception:  # a missing schema only makes the fake less strict
        return ()
    if entry is None or not entry.params_refs:
        return ()
    required = definitions.get(entry.params_refs[0], {}).get("required") or ()
    return tuple(str(name) for name in required)
