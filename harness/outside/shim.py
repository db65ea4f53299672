"""The ``codex`` shim an outside client is given (``CODEX_BIN`` and first on ``PATH``).

A ``/bin/sh`` script that answers ``--version`` like the release profile and otherwise execs
``fake-codex`` with the client's own arguments. The scenario, the recording folder, the profile and the
run marker are baked into the script, not read from the environment: clients often scrub ``CODEX_*``
from the server's environment, and the shim must play the same scenario whatever they pass.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from contracts.releases import default_version
from fake_server.recording import RECORD_ENV
from harness.targets.fake import fake_codex_argv

#: The release profile played when neither ``--release`` nor the scenario names one (fake_server.profiles).
DEFAULT_PROFILE = default_version()


def write_shim(
    directory: Path, *, scenario_file: Path, record_dir: Path, marker: str, profile: str = DEFAULT_PROFILE
) -> Path:
    """``directory/codex``, executable. ``profile`` must be one of fake_server.profiles (UnknownRelease: exit 3)."""
    from fake_server import profiles

    version_line = profiles.get(profile).version_line
    directory.mkdir(parents=True, exist_ok=True)
    fake = " ".join(shlex.quote(a) for a in fake_codex_argv())
    q = shlex.quote
    script = f"""#!/bin/sh
# codex shim written by codex-harness: plays one scenario on fake-codex and records what it sees.
case "$1" in
  --version|-V) echo {q(version_line)}; exit 0 ;;
esac
export FAKE_CODEX_SCENARIO={q(str(scenario_file))}
export {RECORD_ENV}={q(str(record_dir))}
export FAKE_CODEX_RELEASE={q(profile)}
export CODEX_HARNESS_RUN_MARKER={q(marker)}
exec {fake} "$@"
"""
    path = directory / "codex"
    path.write_text(script, encoding="utf-8")
    os.chmod(path, 0o755)
    return path
