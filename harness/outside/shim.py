"""The ``codex`` shim an outside client is given (``CODEX_BIN`` and first on ``PATH``).

A ``/bin/sh`` script that answers ``--version`` like the release profile and otherwise execs
``fake-codex`` with the client's own arguments. The scenario, the recording folder, the profile and the
run marker are baked into the script, not read from the environment: clients often scrub ``CODEX_*``
from the server's environment, and the shim must play the same scenario whatever they pass.

Every start of the shim, ``--version`` included, appends its arguments to ``SHIM_STARTS`` in the run's work
directory (:func:`start_log`): a client that never started a server is told from one that never ran the shim
(it ran a ``codex`` of its own).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from contracts.releases import default_version
from fake_server.recording import RECORD_ENV
from harness.targets.fake import fake_codex_argv

#: The file of the work directory each start of the shim appends a line to (its arguments, cut at 120 bytes).
SHIM_STARTS = "shim-starts.txt"
#: Past this size the shim stops appending (a client that runs it in a loop fills no disk).
MAX_STARTS_BYTES = 64 * 1024
#: What the harness reads of it.
MAX_STARTS_SHOWN = 20


def start_log(log: Path) -> str:
    """The shell line that appends this start's arguments to ``log`` (bounded; a failure is ignored)."""
    q = shlex.quote(str(log))
    return (
        f'{{ [ -f {q} ] && [ "$(wc -c < {q})" -gt {MAX_STARTS_BYTES} ]; }} || '
        f"printf '%.120s\\n' \"$*\" 2>/dev/null >> {q}"
    )


def read_starts(work_fd: int | None, work_dir: Path) -> list[str]:
    """The shim's starts, oldest first (at most :data:`MAX_STARTS_SHOWN`), as written; read without following a
    link, bounded (the client could write the file)."""
    from contracts import safe_read
    from contracts.text import escape

    try:
        if work_fd is not None:
            data = safe_read.read_prefix(SHIM_STARTS, MAX_STARTS_BYTES + 4096, dir_fd=work_fd)
        else:
            data = safe_read.read_prefix(work_dir / SHIM_STARTS, MAX_STARTS_BYTES + 4096)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return [escape(line.strip()[:120]) or "(no arguments)" for line in lines[:MAX_STARTS_SHOWN]]


#: The release profile played when neither ``--release`` nor the scenario names one (fake_server.profiles).
DEFAULT_PROFILE = default_version()


def write_shim(
    directory: Path,
    *,
    scenario_file: Path,
    record_dir: Path,
    marker: str,
    profile: str = DEFAULT_PROFILE,
    starts: Path | None = None,
) -> Path:
    """``directory/codex``, executable. ``profile`` must be one of fake_server.profiles (UnknownRelease: exit 3).
    ``starts``: the file each start is noted in (:func:`start_log`)."""
    from fake_server import profiles

    version_line = profiles.get(profile).version_line
    directory.mkdir(parents=True, exist_ok=True)
    fake = " ".join(shlex.quote(a) for a in fake_codex_argv())
    q = shlex.quote
    script = f"""#!/bin/sh
# codex shim written by codex-harness: plays one scenario on fake-codex and records what it sees.
{start_log(starts) if starts is not None else ":"}
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
