"""The init of an ``unshare``-confined start (:mod:`codex_sandbox.confine`): builds the view, then runs the binary.

Started by ``unshare --user --map-user=65534 --map-group=65534 --keep-caps --mount --pid --fork
--kill-child`` as PID 1 of a new PID namespace with a private mount namespace, both owned by a user
namespace of its own (the capabilities it builds the view with are that namespace's, never the host's), as
``python -I -S confine_init.py SPEC`` (SPEC: JSON). It uses nothing but the standard library (it is not
imported as part of the package, so it imports nothing of it). In order:

1. ``/`` is bound recursively onto ``SPEC.root`` (an empty directory of the run's) and every mount under
   it is made read-only (its nosuid / nodev / noexec / atime flags kept);
2. a fresh ``/dev`` (tmpfs: null, zero, full, random, urandom, tty bound from the host, a new devpts,
   ``shm``), a fresh ``/proc`` of the new PID namespace (``sys``, ``sysrq-trigger``, ``irq``, ``bus``
   read-only, as bubblewrap does), a private ``/tmp`` of at most ``tmp_bytes``;
3. an empty tmpfs over each of ``masks`` (the homes), read-only at the end;
4. ``writable`` bound read-write, ``readable`` bound read-only, each at its own path; each ``moved`` pair
   (host path, path inside) bound read-write at its path inside;
5. ``SPEC.root`` becomes ``/`` (pivot_root); then a child changes to ``cwd``, drops every capability
   (bounding and ambient sets emptied, the others cleared) and sets no_new_privs, so that a root inside
   cannot unmount a mask or remount ``/`` read-write, and executes ``argv`` with this environment, while
   this process reaps orphans until that child exits, and exits with its status (128 + N for signal N;
   the namespace's other processes die with their init).

Any step that fails ends the start before the binary runs: exit 126 and one line on stderr.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24

#: per-mount options (mountinfo field 6) a read-only remount must keep
KEPT = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
#: under these the host's mounts are hidden by fresh ones: a read-only remount that fails there is harmless
REPLACED = ("/dev", "/proc", "/tmp")

MNT_DETACH = 2
#: pivot_root(2) has no libc wrapper: its syscall number per architecture
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "i686": 217, "i386": 217, "armv7l": 218, "ppc64le": 203,
              "s390x": 217}  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: capability numbers are below 64 (two 32-bit words); an unknown one answers EINVAL to PR_CAPBSET_DROP
CAP_LIMIT = 64
EINVAL = 22


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class SetupError(Exception):
    pass


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    args = [None if v is None else os.fsencode(v) for v in (source, target, fstype)]
    if _libc.mount(args[0], args[1], args[2], flags, None if data is None else data.encode()) != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"mount {source or fstype} on {target}: {os.strerror(errno)}")


def under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo``."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(root: str) -> list[tuple[str, int]]:
    """(mount point, kept flags) of every mount at or under ``root``, outermost first."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            fields = line.split()
            point = unescape(fields[4])
            if not under(point, [root]):
                continue
            flags = 0
            for option in fields[5].split(","):
                flags |= KEPT.get(option, 0)
            found.append((point, flags))
    return sorted(found, key=lambda item: item[0].count("/"))


def read_only_root(root: str, hidden: list[str]) -> None:
    mount("/", root, None, MS_BIND | MS_REC)
    for point, flags in mounts_under(root):
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except SetupError:
            if not under(point[len(root) :] or "/", hidden):
                raise


def at(root: str, path: str) -> str:
    return root + path if path != "/" else root


def make_mount_point(target: str, like: str) -> None:
    if os.path.isdir(like):
        os.makedirs(target, exist_ok=True)
    elif not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "x"):
            pass


def fresh_dev(root: str) -> None:
    dev = at(root, "/dev")
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_STRICTATIME, "mode=0755,size=1m")
    for name in DEVICES:
        node = f"{dev}/{name}"
        with open(node, "x"):
            pass
        mount(f"/dev/{name}", node, None, MS_BIND)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/pts")
    mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    os.mkdir(f"{dev}/shm", 0o1777)
    os.chmod(f"{dev}/shm", 0o1777)


def fresh_proc(root: str) -> None:
    proc = at(root, "/proc")
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READ_ONLY:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def bind(root: str, path: str, read_only: bool, inside: str | None = None) -> None:
    target = at(root, inside or path)
    make_mount_point(target, path)
    mount(path, target, None, MS_BIND)  # not recursive: the run's root, built under it, stays out
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build(spec: dict) -> None:
    root = spec["root"]
    masks: list[str] = spec["masks"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    read_only_root(root, [*masks, *REPLACED])
    fresh_dev(root)
    fresh_proc(root)
    if spec["private_tmp"]:
        mount("tmpfs", at(root, "/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['tmp_bytes']}")
    for mask in masks:
        mount("tmpfs", at(root, mask), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={spec['mask_bytes']}")
    for path in spec["writable"]:
        bind(root, path, read_only=False)
    for path in spec["readable"]:
        bind(root, path, read_only=True)
    for path, inside in spec.get("moved", ()):
        bind(root, path, read_only=False, inside=inside)
    for mask in masks:
        mount(None, at(root, mask), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def pivot(root: str) -> None:
    """Make ``root`` the namespace's ``/`` and drop the old one.

    pivot_root, not chroot: in a chroot the kernel refuses new user namespaces (``EPERM``), and the binary's
    own command sandbox (bubblewrap) needs one.
    """
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    os.chdir(root)
    if _libc.syscall(number, b".", b".") != 0:
        raise SetupError(f"pivot_root {root}: {os.strerror(ctypes.get_errno())}")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise SetupError(f"umount the old root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def prctl(option: int, arg: int = 0, what: str = "prctl") -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def drop_privileges() -> None:
    """No capability in any set, none to regain: the bounding and ambient sets emptied, the permitted,
    effective and inheritable ones cleared, no_new_privs on (a set-uid file gives nothing)."""
    for cap in range(CAP_LIMIT):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != EINVAL:
            raise SetupError(f"drop capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "clear the ambient capabilities")
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise SetupError(f"capset: {os.strerror(ctypes.get_errno())}")
    prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")


def run(spec: dict) -> int:
    child = os.fork()
    if child == 0:
        try:
            for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores them; an exec'd program expects the default
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            os.chdir(spec["cwd"])
            drop_privileges()
            os.execv(spec["argv"][0], spec["argv"])
        except SetupError as exc:
            print(f"codex-harness confine: {exc}", file=sys.stderr, flush=True)
            os._exit(126)
        except OSError as exc:
            print(f"codex-harness confine: cannot run {spec['argv'][0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(127)
    while True:  # PID 1: reap every orphan, leave when the binary does
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 127
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def main() -> int:
    try:
        spec = json.loads(sys.argv[1])
        build(spec)
        pivot(spec["root"])
    except (SetupError, OSError, KeyError, IndexError, ValueError) as exc:
        print(f"codex-harness confine: {exc}", file=sys.stderr, flush=True)
        return 126
    return run(spec)


if __name__ == "__main__":
    sys.exit(main())
