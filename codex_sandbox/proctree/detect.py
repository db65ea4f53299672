"""Which confinement this machine allows: a PID namespace, else a cgroup (v2, then the v1 freezer), else none.

Each candidate is tried for real once per process (a namespace or cgroup that cannot be made says why), and
``$CODEX_HARNESS_PROCTREE`` (``auto``, the default; ``pid-namespace``, ``cgroup``, ``none``) narrows the choice:
a forced mechanism that does not work gives "not confined" with the reason, never a silent other one.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from codex_sandbox.proctree import cgroup, pidns
from codex_sandbox.proctree.base import Confinement, Kind
from contracts.exitcodes import UsageError

CONFINE_ENV = "CODEX_HARNESS_PROCTREE"
MODES = ("auto", "pid-namespace", "cgroup", "none")


def mode() -> str:
    value = os.environ.get(CONFINE_ENV, "").strip() or "auto"
    if value not in MODES:
        raise UsageError(f"${CONFINE_ENV} must be one of {', '.join(MODES)}, not {value!r}")
    return value


def confinement() -> Confinement:
    """The confinement trees get here (probed once per process and mode)."""
    return _detect(mode())


@functools.cache
def _detect(wanted: str) -> Confinement:
    tried: list[str] = []
    if wanted == "none":
        return Confinement("none", f"not confined: ${CONFINE_ENV}=none")
    if wanted in ("auto", "pid-namespace"):
        found = pidns.launchers(shutil.which)
        if not found:
            tried.append("no PID namespace: neither bwrap nor unshare is installed")
        for launcher in found:
            why = pidns.probe(launcher)
            if why is None:
                name = Path(launcher[0]).name
                how = "bwrap --unshare-pid" if name == "bwrap" else "unshare --pid"
                return Confinement("pid-namespace", f"a PID namespace ({how})", launcher=tuple(launcher))
            tried.append(f"no PID namespace: {why}")
    if wanted in ("auto", "cgroup"):
        cgroups: tuple[tuple[int, Kind, str], ...] = (
            (2, "cgroup-v2", "cgroup v2"),
            (1, "cgroup-v1", "cgroup v1 freezer"),
        )
        for version, kind, what in cgroups:
            parent = _own_cgroup(version)
            if parent is None:
                tried.append(f"no {what} mounted")
                continue
            why = cgroup.probe(parent, version)
            if why is None:
                return Confinement(kind, f"{what} ({parent})", cgroup_parent=parent)
            tried.append(f"no {what}: {why}")
    return Confinement("none", "not confined: " + "; ".join(tried))


def _own_cgroup(version: int) -> Path | None:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        cgroups = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    return cgroup.own_cgroup(mountinfo, cgroups, version)


def forget() -> None:
    """Probe again next time (tests that change what is allowed)."""
    _detect.cache_clear()
