"""``validate-release --from``: the two binaries are checked before anything is played (usage errors, exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.targets.real_adapter as real_adapter
from contracts.exitcodes import USAGE, UsageError
from harness import cli
from harness.release_validation import Ask, validate_release


@pytest.mark.parametrize(
    ("versions", "said"), [(("9.9.9", "9.9.9"), "are both codex-cli 9.9.9"), (("9.9.9", "9.10.0"), "is newer than")]
)
def test_from_the_same_or_a_newer_release_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, versions: tuple[str, str], said: str
) -> None:
    new, old = versions
    seen = {str(tmp_path / "new"): new, str(tmp_path / "old"): old}
    monkeypatch.setattr(
        real_adapter, "preflight", lambda codex, require_pinned_schema=True: (Path(codex), seen[str(codex)])
    )
    ask = Ask(codex=str(tmp_path / "new"), from_codex=str(tmp_path / "old"), store=tmp_path / "store")
    with pytest.raises(UsageError, match=said):
        validate_release(ask)
    argv = ["validate-release", "--codex", ask.codex, "--from", ask.from_codex, "--store", str(tmp_path / "store")]
    assert cli.main(argv) == USAGE
