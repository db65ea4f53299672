"""A release learned into a user's store: a shipped release's folder under another version (the same behaviour)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from contracts import releases


def store_with_unnamed_release(store: Path, version: str = "0.170.0", like: str = "0.169.0") -> Path:
    """A store holding ``version`` whose data is ``like``'s (a release learned with the same behaviour)."""
    folder = store / f"codex-cli-{version}"
    shutil.copytree(releases.SHIPPED_ROOT / f"codex-cli-{like}", folder)
    meta = orjson.loads((folder / "meta.json").read_bytes())
    meta["codex_version"] = meta["produced_by"]["binary_version"] = version
    (folder / "meta.json").write_bytes(orjson.dumps(meta))
    for name in ("release.json", "policy.json"):
        if (folder / name).is_file():
            description = orjson.loads((folder / name).read_bytes())
            description["release"] = version
            (folder / name).write_bytes(orjson.dumps(description))
    return store
