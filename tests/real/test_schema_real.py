"""The pinned bundle is exactly what the real binary prints (needs the real codex: marker ``real_codex``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import schema_store
from harness.codex_bin import codex_version
from harness.schema_pin import generate

pytestmark = pytest.mark.real_codex


@pytest.mark.parametrize("experimental", [False, True], ids=["stable", "experimental"])
def test_regenerated_schema_equals_the_pinned_bundle(codex_bin: Path, experimental: bool) -> None:
    version = codex_version(codex_bin)
    if version not in schema_store.pinned_releases():
        pytest.fail(f"codex {version} at {codex_bin} has no pinned schema (pinned: {schema_store.pinned_releases()})")
    generated = generate(codex_bin, experimental, timeout=120)
    pinned = schema_store.load_bundle(version, experimental)
    assert sorted(generated) == sorted(pinned)
    differing = [path for path in generated if generated[path] != pinned[path]]
    assert differing == []
    meta = schema_store.load_meta(version)["bundles"]["experimental" if experimental else "stable"]
    assert schema_store.bundle_digest(generated) == meta["sha256"]
