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


#: Test modules whose tests share one xdist worker under ``--dist loadgroup`` (``make test``): their real
#: sessions run one at a time. The ``xdist_group`` mark does the same, but pytest-xdist 3.8 under pytest 9.2
#: silently drops it (it writes the group into a node id field pytest no longer reads: pytest-xdist#1386),
#: so the scheduler is told here by module.
XDIST_GROUPS: dict[str, str] = {"tests/test_real_releases.py": "real_releases"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return XDIST_GROUPS.get(module) or super()._split_scope(nodeid)

    return ModuleGroups(config, log)  # type: ignore[arg-type]
