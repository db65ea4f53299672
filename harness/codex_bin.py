"""Finding the real `codex` binary, running its one-shot commands (bounded, confined, scrubbed), its version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codex_sandbox import confine
from codex_sandbox.bounded_run import Finished, OutputOverflow, run_capped
from codex_sandbox.confine import ConfinementUnavailable
from contracts.exitcodes import InternalError

_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?)")

#: Bound of ``codex --version``: a binary that cannot say its version this fast cannot run a scenario
#: either, and a run should say so at once. ``$CODEX_HARNESS_VERSION_TIMEOUT`` (seconds, at most 600)
#: overrides it (the tests use a fraction of a second).
VERSION_TIMEOUT_S = 7.0
VERSION_TIMEOUT_ENV = "CODEX_HARNESS_VERSION_TIMEOUT"
#: What ``--version`` may print: a version line, a banner at most (1.5 GB of it once cost 2.9 GB of memory).
VERSION_OUTPUT_BYTES: Final = 64 * 1024
#: What any other one-shot command may print on each stream (``generate-json-schema`` prints nothing).
OUTPUT_BYTES: Final = 1024 * 1024
#: Never passed to a binary: credentials and the host's codex settings.
SCRUBBED_PREFIXES: Final = ("OPENAI_", "CODEX_")
TRACE_ROOT_ENV: Final = "CODEX_ROLLOUT_TRACE_ROOT"


class CodexNotFound(InternalError):
    pass


def find_codex(explicit: str | os.PathLike[str] | None = None, *, use_path: bool = False) -> Path | None:
    """The binary named by ``explicit``, else ``$CODEX_BIN``, else (when ``use_path``) `codex` on PATH."""
    for candidate in (explicit, os.environ.get("CODEX_BIN")):
        if candidate:
            path = Path(candidate).expanduser()
            if not path.exists():
                raise CodexNotFound(f"codex binary not found: {path}")
            return path.resolve()
    if use_path and (found := shutil.which("codex")):
        return Path(found).resolve()
    return None


def version_timeout() -> float:
    """The ``--version`` bound: ``$CODEX_HARNESS_VERSION_TIMEOUT`` when it is a number in (0, 600], else the default."""
    try:
        value = float(os.environ.get(VERSION_TIMEOUT_ENV, ""))
    except ValueError:
        return VERSION_TIMEOUT_S
    return value if 0 < value <= 600 else VERSION_TIMEOUT_S


def codex_version(binary: str | os.PathLike[str], timeout: float | None = None) -> str:
    """``codex --version`` → its release version (``"X.Y.Z"``). Raises CodexNotFound with the reason when it cannot run.

    Run like every start of a binary (:func:`run_binary`: confined, scrubbed, a temporary HOME); its output
    is read up to :data:`VERSION_OUTPUT_BYTES`. ``timeout``: default :func:`version_timeout`.
    """
    limit = version_timeout() if timeout is None else timeout
    try:
        out = run_binary([os.fspath(binary), "--version"], limit, max_stdout=VERSION_OUTPUT_BYTES)
    except subprocess.TimeoutExpired:
        raise CodexNotFound(f"{binary} --version did not answer within {limit:g} s") from None
    except OutputOverflow as exc:
        raise CodexNotFound(f"{binary} --version {exc}: not a version") from None
    except ConfinementUnavailable as exc:
        raise CodexNotFound(str(exc)) from None
    except OSError as exc:
        raise CodexNotFound(f"cannot run {binary} --version: {exc.strerror or exc}") from None
    stdout = out.stdout.decode("utf-8", "replace")
    match = _VERSION_RE.search(stdout)
    if out.returncode != 0 or not match:
        text = _plain(stdout).strip() or _plain(out.stderr.decode("utf-8", "replace")).strip()
        said = text.splitlines()[0][:200] if text else ""
        raise CodexNotFound(f"{binary} --version gave no version (exit {out.returncode}): {said!r}")
    return match.group(1)


def _plain(text: str) -> str:
    from codex_client.stderr import strip_ansi

    return strip_ansi(text)


def scrubbed_env(
    base: Mapping[str, str], *, codex_home: Path, tmpdir: Path, trace_root: Path | None, home: Path | None = None
) -> dict[str, str]:
    """``base`` without ``OPENAI_*`` / ``CODEX_*`` (no credential reaches the child), plus the run's own.

    ``home``: a private ``HOME``. Commands run as ``bash -lc``, which sources the host user's shell
    start-up files; those can be slow or take locks (pyenv rehash), making a quick command outlive
    its yield time under load, and they are not part of the scenario.
    """
    env = {k: v for k, v in base.items() if not k.startswith(SCRUBBED_PREFIXES)}
    env.update(CODEX_HOME=str(codex_home), TMPDIR=str(tmpdir), RUST_LOG="warn")
    if home is not None:
        env["HOME"] = str(home)
    if trace_root is not None:
        env[TRACE_ROOT_ENV] = str(trace_root)
    return env


@contextmanager
def run_dir(prefix: str = "codex-harness-bin-", base_dir: Path | None = None) -> Iterator[RunDir]:
    """A temporary run directory (``codex_home/``, ``home/``, ``tmp/``, ``workdir/``), removed on the way out."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=base_dir)).resolve()
    try:
        paths = RunDir(root, root / "codex_home", root / "home", root / "tmp", root / "workdir")
        for directory in (paths.codex_home, paths.home, paths.tmpdir, paths.workdir):
            directory.mkdir()
        yield paths
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class RunDir:
    root: Path
    codex_home: Path
    home: Path
    tmpdir: Path
    workdir: Path

    def env(self, base: Mapping[str, str], trace_root: Path | None = None) -> dict[str, str]:
        return scrubbed_env(base, codex_home=self.codex_home, tmpdir=self.tmpdir, trace_root=trace_root, home=self.home)


def run_binary(
    argv: Sequence[str],
    timeout: float,
    *,
    max_stdout: int = OUTPUT_BYTES,
    max_stderr: int = OUTPUT_BYTES,
    run: RunDir | None = None,
) -> Finished:
    """Run a binary's one-shot command: bounded, confined, scrubbed — the one way the harness does it.

    In a temporary run directory (``run``, else a fresh one removed afterwards) that is its ``CODEX_HOME``,
    ``HOME``, ``TMPDIR`` and cwd, the only place it can write (:mod:`codex_sandbox.confine`); the environment
    without ``OPENAI_*`` / ``CODEX_*`` (plus the run marker of :mod:`codex_client.process`); at most
    ``timeout`` seconds, whatever its children do with its pipes, and at most ``max_stdout`` /
    ``max_stderr`` bytes read (:func:`codex_sandbox.bounded_run.run_capped`).
    Raises ``subprocess.TimeoutExpired``, :class:`~codex_sandbox.bounded_run.OutputOverflow`,
    :class:`~codex_sandbox.confine.ConfinementUnavailable`, ``OSError``.
    """
    launcher = confine.current()
    if run is None:
        with run_dir() as fresh:
            return run_binary(argv, timeout, max_stdout=max_stdout, max_stderr=max_stderr, run=fresh)
    from codex_client.process import child_environment

    env = child_environment(run.env(os.environ))  # + the run marker, by which a leftover is found
    where = confine.layout(argv[0], writable=[run.root], cwd=run.workdir, scratch=run.root, path_env=env.get("PATH"))
    return run_capped(
        launcher.wrap(argv, where),
        timeout=timeout,
        env=env,
        cwd=run.workdir,
        max_stdout=max_stdout,
        max_stderr=max_stderr,
    )
