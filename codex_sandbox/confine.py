"""The one launcher of a real binary: it writes only in its run's directories and cannot read the homes.

Every start of a binary the harness does not control — ``codex app-server`` of the real target (``run``,
``record``, ``diff``, ``latency``, ``validate-release``, ``matrix``), ``codex --version`` and
``generate-json-schema`` — is wrapped by :meth:`Launcher.wrap`. What the binary then sees:

- the host's ``/``, read-only (a probe ``fs/readFile /etc/hostname`` still reads the host's file);
- read-write only the paths of its :class:`Layout` (the run's ``CODEX_HOME``, ``HOME``, ``TMPDIR``, work
  directory, trace root: one temporary directory per run), and a private ``/tmp`` (tmpfs, at most
  :data:`TMP_BYTES`, gone with the run);
- ``/home``, ``/root``, ``/run``, the harness's ``$HOME`` and the user's home from the password database
  masked by an empty read-only tmpfs, so ``~/.codex/auth.json``, ssh keys and agent sockets are out of
  reach; the binary's own install tree (and its ``#!`` interpreter's), and the harness's interpreter and
  packages (what ``fake-codex`` runs on) and the ``/etc`` files that link into ``/run`` (``resolv.conf``), are
  bound back read-only when they live under one of them;
- a fresh ``/dev`` (null, zero, full, random, urandom, tty, its own pts) and the ``/proc`` of its own PID
  namespace: the host's processes (and their environments) are invisible, and everything the binary
  starts dies with it (the namespace's init is killed when the binary exits or its process group is).

Not confined: the network (the mock Responses API is on the host's loopback, so the network namespace is
shared; ``command/exec`` can connect out, and reach abstract unix sockets), CPU and memory.

Mechanisms, in order: bubblewrap (``bwrap`` on PATH), then util-linux ``unshare`` with
:mod:`codex_sandbox.confine_init` as the namespace's init. ``$CODEX_HARNESS_CONFINE`` = ``bwrap`` or
``unshare`` picks one. A mechanism is used only after it passed :func:`self_test` on this machine (once per
process): a planted secret unreadable, a read-only path unwritable, the writable one written, a PID
namespace of its own. None works: :func:`current` raises :class:`ConfinementUnavailable` saying why, unless
the command was given ``--unconfined`` (:func:`set_unconfined`).

bubblewrap's ``--die-with-parent`` is not used: its "parent" is the thread that forked, and trio starts
processes from worker threads that exit after 10 s idle, which would kill a live server.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from contracts.exitcodes import InternalError

MECHANISMS: Final = ("bwrap", "unshare")
UNCONFINED: Final = "none"
MECHANISM_ENV: Final = "CODEX_HARNESS_CONFINE"
#: masked whatever the user's environment says (the password database's home is added at start time)
HIDDEN: Final = ("/home", "/root", "/run")
TMP_BYTES: Final = 256 * 1024 * 1024
MASK_BYTES: Final = 1024 * 1024
SELF_TEST_TIMEOUT_S: Final = 20.0
INIT: Final = Path(__file__).with_name("confine_init.py")
#: the directory ``unshare``'s init builds the binary's view in (empty, inside the run's scratch directory)
ROOT_DIR: Final = ".confine-root"
SHEBANG_BYTES: Final = 256
#: files of /etc that commonly link into /run (masked); their targets are shown read-only
HOST_CONFIG: Final = ("/etc/resolv.conf", "/etc/hosts", "/etc/localtime")
#: the uid and gid the binary runs as, in a user namespace of its own mapped to the harness's user ("nobody":
#: not 0, so that the binary's own sandbox can map it in a nested user namespace without a capability)
SANDBOX_ID: Final = 65534
#: /proc/self/status lines a confined process must show: no capability in any set, no_new_privs on
NO_PRIVILEGES: Final = {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0, "NoNewPrivs": 1}


class ConfinementUnavailable(InternalError):
    """No mechanism confines a binary on this machine (and ``--unconfined`` was not given); ``str()`` says why."""


@dataclass(frozen=True, slots=True)
class Layout:
    """What one confined start may touch. Paths are absolute and resolved."""

    writable: tuple[str, ...]
    readable: tuple[str, ...]  # bound back read-only from under a mask (the binary's install tree)
    masks: tuple[str, ...]
    cwd: str
    scratch: str  # one of ``writable``: the unshare mechanism builds its root in it
    private_tmp: bool = True
    #: (host path, path inside): bound read-write at another path (the real binary's socket folder, whose
    #: name inside carries the uid it runs as, :data:`SANDBOX_ID`)
    moved: tuple[tuple[str, str], ...] = ()


def layout(
    argv0: str | os.PathLike[str],
    *,
    writable: Iterable[str | os.PathLike[str]],
    cwd: str | os.PathLike[str],
    scratch: str | os.PathLike[str],
    path_env: str | None = None,
    masks: Iterable[str | os.PathLike[str]] | None = None,
    private_tmp: bool = True,
    moved: Iterable[tuple[str | os.PathLike[str], str]] = (),
) -> Layout:
    """The layout of a start of ``argv0``: ``writable`` (``scratch`` among them) read-write, the homes masked.

    ``path_env``: the PATH the binary runs with (finds a ``#!/usr/bin/env NAME`` interpreter). ``masks``:
    instead of :func:`default_masks` (the self-test's planted home). ``moved``: (host path, path inside) pairs
    bound read-write at another path inside (under the private ``/tmp``).
    """
    scratch_path = _real(scratch)
    rw = _unique([scratch_path, *(_real(p) for p in writable)])
    hidden = [m for m in (_real(m) for m in (default_masks() if masks is None else masks)) if m != "/"]
    covering = [*hidden, "/tmp"] if private_tmp else hidden
    kept = _unique(m for m in hidden if not any(_inside(m, o) for o in covering if o != m))
    shown = [*kept, *covering]
    trees = [*_install_trees(str(argv0), path_env, shown), *_own_installation(shown), *_host_config(shown)]
    readable = _unique(p for p in trees if p not in rw)
    pairs = tuple((_real(host), inside) for host, inside in moved)
    return Layout(tuple(rw), tuple(readable), tuple(kept), _real(cwd), scratch_path, private_tmp, pairs)


def default_masks() -> list[str]:
    """``/home``, ``/root``, ``/run``, ``$HOME`` and the password database's home of this user, those that exist."""
    found = list(HIDDEN)
    if home := os.environ.get("HOME"):
        found.append(home)
    try:
        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    return [m for m in found if os.path.isabs(m) and os.path.isdir(m)]


@dataclass(frozen=True, slots=True)
class Launcher:
    mechanism: str  # bwrap | unshare | none
    tool: str | None = None

    def wrap(self, argv: Sequence[str | os.PathLike[str]], where: Layout) -> list[str]:
        """The argv that starts ``argv`` confined to ``where`` (``argv`` itself when unconfined)."""
        plain = [os.fspath(a) for a in argv]
        if os.sep in plain[0]:  # it runs in another directory: a relative path would name another file
            plain[0] = os.path.abspath(plain[0])
        if self.mechanism == "bwrap":
            return _bwrap(str(self.tool), plain, where)
        if self.mechanism == "unshare":
            return _unshare(str(self.tool), plain, where)
        return plain


def _bwrap(tool: str, argv: list[str], where: Layout) -> list[str]:
    # a user namespace of its own in which the binary is SANDBOX_ID with no capability (and an empty bounding
    # set): as root, bwrap would otherwise keep every capability and the binary could unmount the masks and
    # remount / read-write. Not uid 0 inside: a capability-less root cannot map a nested user namespace
    # (CAP_SETFCAP), which the binary's own sandbox needs.
    ids = str(SANDBOX_ID)
    args = [tool, "--unshare-user", "--uid", ids, "--gid", ids, "--cap-drop", "ALL", "--unshare-pid"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if where.private_tmp:
        args += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for mask in where.masks:
        args += ["--size", str(MASK_BYTES), "--tmpfs", mask]
    for path in where.writable:
        args += ["--bind", path, path]
    for path in where.readable:
        args += ["--ro-bind", path, path]
    for path, inside in where.moved:
        args += ["--bind", path, inside]
    for mask in where.masks:
        args += ["--remount-ro", mask]
    return [*args, "--chdir", where.cwd, "--", *argv]


def _unshare(tool: str, argv: list[str], where: Layout) -> list[str]:
    root = os.path.join(where.scratch, ROOT_DIR)
    os.makedirs(root, exist_ok=True)
    spec = {
        "root": root,
        "masks": list(where.masks),
        "writable": list(where.writable),
        "readable": list(where.readable),
        "moved": [list(pair) for pair in where.moved],
        "cwd": where.cwd,
        "argv": argv,
        "private_tmp": where.private_tmp,
        "tmp_bytes": TMP_BYTES,
        "mask_bytes": MASK_BYTES,
    }
    # root or not, a user namespace of its own: the init builds the view with the capabilities it has there
    # (--keep-caps: as SANDBOX_ID), never with the host's; the binary then runs with none at all (the init
    # drops them, and sets no_new_privs, before it executes it)
    ids = str(SANDBOX_ID)
    user = ["--user", f"--map-user={ids}", f"--map-group={ids}", "--keep-caps"]
    return [tool, *user, "--mount", "--pid", "--fork", "--kill-child", "--", sys.executable, "-I", "-S", str(INIT),
            json.dumps(spec)]  # fmt: skip


# --- the process's choice ----------------------------------------------------------------------------

_unconfined_asked = False
_chosen: Launcher | None = None
_tested: dict[tuple[str, str], str | None] = {}


def set_unconfined(flag: bool) -> None:
    """``--unconfined``: start binaries without the confinement, from now on in this process."""
    global _unconfined_asked, _chosen
    _unconfined_asked, _chosen = flag, None


def adopt(mechanism: str, tool: str | None) -> None:
    """Use the launcher another process of this run already chose and self-tested (the relay of an outside
    client's server: :mod:`harness.outside.real_relay`), without testing it again."""
    global _chosen
    if mechanism not in (*MECHANISMS, UNCONFINED):
        raise ConfinementUnavailable(f"unknown confinement mechanism {mechanism!r}")
    _chosen = Launcher(mechanism, tool)


def current() -> Launcher:
    """The launcher of this process: the first mechanism that passes its self-test, else the reason why none."""
    global _chosen
    if _chosen is not None:
        return _chosen
    if _unconfined_asked:
        _chosen = Launcher(UNCONFINED)
        return _chosen
    wanted = os.environ.get(MECHANISM_ENV, "")
    if wanted and wanted not in MECHANISMS:
        raise ConfinementUnavailable(f"${MECHANISM_ENV} is {wanted!r}: expected one of {', '.join(MECHANISMS)}")
    reasons = []
    for mechanism in (wanted,) if wanted else MECHANISMS:
        tool = shutil.which(mechanism)
        if tool is None:
            reasons.append(f"no {mechanism} on PATH")
            continue
        key = (mechanism, tool)
        if key not in _tested:
            _tested[key] = self_test(Launcher(mechanism, tool))
        if _tested[key] is None:
            _chosen = Launcher(mechanism, tool)
            return _chosen
        reasons.append(f"{mechanism} does not confine here: {_tested[key]}")
    raise ConfinementUnavailable(
        "cannot confine the real binary to its run directory: "
        + "; ".join(reasons)
        + " (install bubblewrap, e.g. apt-get install bubblewrap; or pass --unconfined to let it write anywhere)"
    )


def self_test(launcher: Launcher) -> str | None:
    """None when ``launcher`` confines as promised here, else what it failed (one line).

    Planted: a secret under a mask, a read-only path, a writable one. Inside, once the probe sees a mount
    namespace that is not the host's (so nothing it tries can touch the host's mounts), it tries the escape
    a root inside would: ``umount -l`` of the mask, ``mount -o remount,rw,bind`` of ``/`` and of the read-only
    path's mount, and both again from a nested user namespace of its own (where it has every capability).
    Every one must fail; the process must show no capability in any set and no_new_privs on.
    """
    from codex_sandbox.bounded_run import OutputOverflow, run_capped

    with tempfile.TemporaryDirectory(prefix="codex-harness-confine-test-") as tmp:
        base = Path(tmp).resolve()
        home, read_only, scratch = base / "home", base / "read-only", base / "scratch"
        for directory in (home, read_only, scratch):
            directory.mkdir()
        secret = "planted-" + os.urandom(8).hex()
        (home / "secret").write_text(secret)
        script = _probe(home, read_only, scratch)
        where = layout("/bin/sh", writable=[scratch], cwd=scratch, scratch=scratch, masks=[home], private_tmp=False)
        try:
            done = run_capped(
                launcher.wrap(["/bin/sh", "-c", script], where),
                timeout=SELF_TEST_TIMEOUT_S,
                max_stdout=4096,
                max_stderr=65536,
            )
        except (OSError, subprocess.TimeoutExpired, OutputOverflow) as exc:
            return f"its self-test did not run: {exc}"
        said = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            err = " ".join(done.stderr.decode(errors="replace").split())[:300]
            return f"its self-test exited {done.returncode}: {err or 'no message'}"
        for line in said.splitlines():
            if line.startswith("escape:"):
                return f"a root inside could escape: {ESCAPES.get(line, line)} succeeded"
        if secret in said:
            return "a masked home stayed readable"
        if (read_only / "x").exists():
            return "a read-only path was written"
        if not (scratch / "ok").is_file():
            return "the writable directory was not written"
        if problem := _privileges_problem(said):
            return problem
        if not said.strip() or said.split()[-1] == os.readlink("/proc/self/ns/pid"):
            return "no PID namespace of its own"
    return None


#: what each ``escape:`` line of the self-test's probe means
ESCAPES: Final = {
    "escape:umount-mask": "umount -l of a mask",
    "escape:remount-root": "mount -o remount,rw,bind /",
    "escape:remount-path": "mount -o remount,rw,bind of a read-only path's mount",
    "escape:nested-umount-mask": "umount -l of a mask from a nested user namespace",
    "escape:nested-remount-root": "mount -o remount,rw,bind / from a nested user namespace",
    "escape:nested-remount-path": "mount -o remount,rw,bind of a read-only path's mount from a nested user namespace",
}


def _probe(home: Path, read_only: Path, scratch: Path) -> str:
    """The self-test's shell script: the escape attempts (only in a mount namespace not the host's: a
    launcher that does not confine must not remount the host's ``/``), then the reads, writes and status."""
    q = shlex.quote
    point = _mount_point(read_only)

    def attempts(prefix: str) -> str:
        return (
            f"umount -l {q(str(home))} 2>/dev/null && echo escape:{prefix}umount-mask; "
            f"mount -o remount,rw,bind / 2>/dev/null && echo escape:{prefix}remount-root; "
            f"mount -o remount,rw,bind {q(point)} 2>/dev/null && echo escape:{prefix}remount-path; "
            f"cat {q(str(home))}/secret 2>/dev/null; (echo x > {q(str(read_only))}/x) 2>/dev/null; "
        )

    nested = f"unshare --user --map-root-user --mount /bin/sh -c {q(attempts('nested-'))} 2>/dev/null; "
    return (
        f'if [ "$(readlink /proc/self/ns/mnt)" != {q(os.readlink("/proc/self/ns/mnt"))} ]; then '
        f"{attempts('')}{nested}fi; "
        f"cat {q(str(home))}/secret 2>/dev/null; (echo x > {q(str(read_only))}/x) 2>/dev/null; "
        f"echo ok > {q(str(scratch))}/ok; "
        "grep -E '^(" + "|".join(NO_PRIVILEGES) + "):' /proc/$$/status; "
        "readlink /proc/self/ns/pid"
    )


def _mount_point(path: Path) -> str:
    """The mount point (on the host) that ``path`` lies on."""
    current = str(path)
    while not os.path.ismount(current):
        current = os.path.dirname(current)
    return current


def _privileges_problem(said: str) -> str | None:
    """What the probe's ``/proc/self/status`` lines show of a privilege the binary must not have."""
    seen: dict[str, int] = {}
    for line in said.splitlines():
        name, _, value = line.partition(":")
        if name in NO_PRIVILEGES:
            try:
                seen[name] = int(value.strip(), 16)
            except ValueError:
                continue
    missing = [name for name in NO_PRIVILEGES if name not in seen]
    if missing:
        return f"its capabilities could not be read inside ({', '.join(missing)} missing from /proc/self/status)"
    kept = [f"{name} {seen[name]:016x}" for name in NO_PRIVILEGES if name.startswith("Cap") and seen[name]]
    if kept:
        return f"the confined process keeps capabilities ({', '.join(kept)})"
    if seen["NoNewPrivs"] != 1:
        return "the confined process can gain privileges (no_new_privs is off)"
    return None


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="start the real binary without the filesystem confinement (bwrap / unshare): it can then write "
        "anywhere this user can and read the user's files",
    )


@contextmanager
def policy(args: argparse.Namespace) -> Iterator[None]:
    """A command's ``--unconfined`` for as long as the command runs (said once on stderr), then as before."""
    previous, chosen = _unconfined_asked, _chosen
    if getattr(args, "unconfined", False):
        set_unconfined(True)
        print(
            "codex-harness: --unconfined: the real binary runs without filesystem confinement "
            "(it can write anywhere this user can and read this user's files)",
            file=sys.stderr,
        )
    try:
        yield
    finally:
        _restore(previous, chosen)


def _restore(unconfined: bool, chosen: Launcher | None) -> None:
    global _unconfined_asked, _chosen
    _unconfined_asked, _chosen = unconfined, chosen


# --- paths --------------------------------------------------------------------------------------------


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def _inside(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it."""
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _install_trees(argv0: str, path_env: str | None, hidden: list[str]) -> list[str]:
    """What to bind back read-only so ``argv0`` can run from under a mask: its tree and its interpreter's."""
    found = []
    for binary in _binary_files(argv0, path_env):
        root = next((h for h in hidden if _inside(binary, h)), None)
        if root is None:
            continue
        tree = _tree_of(binary)
        # never the mask itself or anything above it: then the file alone
        found.append(tree if tree != root and _inside(tree, root) else binary)
    return found


#: The project's packages, whose folders a stand-in binary (fake-codex) runs from.
PACKAGES = ("contracts", "codex_sandbox", "codex_client", "fake_server", "harness", "conformance")


def _own_installation(hidden: list[str]) -> list[str]:
    """The harness's interpreter and packages, when under a mask: a stand-in binary (``fake-codex``, a test's
    script) runs on them, through launchers whose ``#!`` chain cannot be followed from here."""
    import importlib.util

    # Found, not imported: the sandbox sits below the packages that use it (tests/unit/test_layers.py).
    specs = [importlib.util.find_spec(name) for name in PACKAGES]
    found = [str(Path(spec.origin).parent) for spec in specs if spec is not None and spec.origin is not None]
    places = {sys.prefix, sys.base_prefix, *found}
    return [_real(p) for p in sorted(places) if any(_inside(_real(p), h) and _real(p) != h for h in hidden)]


def _host_config(hidden: list[str]) -> list[str]:
    """Host configuration that links under a mask (``/etc/resolv.conf`` → ``/run/systemd/resolve/…``): bound
    back read-only, so the binary resolves names as it would unconfined (the hermetic proof depends on it)."""
    found = []
    for name in HOST_CONFIG:
        target = _real(name)
        if target != name and os.path.isfile(target) and any(_inside(target, h) for h in hidden):
            found.append(target)
    return found


def _binary_files(argv0: str, path_env: str | None) -> list[str]:
    """``argv0`` (as named and resolved) and the interpreter its ``#!`` line names (as named and resolved)."""
    named = os.path.abspath(argv0)
    files = _unique([named, _real(named)])
    interpreter = _interpreter(_real(named), path_env)
    if interpreter is not None:
        files += [f for f in _unique([interpreter, _real(interpreter)]) if f not in files]
    return files


def install_tree(binary: str) -> str:
    """The tree ``binary`` was installed in (:func:`_tree_of`): what a process running that release runs from."""
    return _tree_of(os.path.realpath(binary))


def _tree_of(binary: str) -> str:
    """An npm install: the outermost ``node_modules`` (the launcher needs its platform package); a prefix
    (``…/bin/x``): the prefix; else the binary's directory."""
    parts = Path(binary).parts
    if "node_modules" in parts:
        return str(Path(*parts[: parts.index("node_modules") + 1]))
    parent = Path(binary).parent
    return str(parent.parent if parent.name == "bin" and parent.parent != Path("/") else parent)


def _interpreter(binary: str, path_env: str | None) -> str | None:
    """The interpreter a ``#!`` line names (``/usr/bin/env NAME``: NAME on ``path_env``), read bounded."""
    try:
        fd = os.open(binary, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not _is_regular(fd):
            return None
        head = os.read(fd, SHEBANG_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(names[0], path=path_env) if names else None
    return words[0] if os.path.isabs(words[0]) else None


def _is_regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
