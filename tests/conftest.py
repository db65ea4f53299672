"""What every unit test gets: a schema store of its own.

``schema pin`` and ``validate-release`` write to the user's store (``$CODEX_HARNESS_STORE``, else
``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``). A test must never write into the real home
or the package, so each test's store lives under its own temporary directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_schema_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    data_home = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.delenv("CODEX_HARNESS_STORE", raising=False)
    return data_home / "codex-harness" / "schemas"
