"""The real target is hermetic: a real session attempts no connection off this machine.

One real session runs with the server under ``strace -f`` (connect, sendto, sendmsg, sendmmsg); every
address it names must be AF_UNIX, 127.0.0.0/8 or ::1. With the real target's network-off settings
(``harness.targets.real.HERMETIC_CONFIG``) removed, the same check must catch codex-cli 0.171.0's
start-up calls (the curated plugin sync's DNS lookups of github.com / chatgpt.com), so the check is
known to bite. A log line proves nothing; the syscalls do.

Needs strace (``.ci/run`` installs it): without it the tests skip with the reason, or fail when
``CODEX_HARNESS_REQUIRE_REAL=1``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from codex_client.stderr import StderrTail, strip_ansi
from codex_sandbox import confine
from contracts.scenario_file import loads
from harness.runner import run_one
from harness.targets import real

TRACED = "connect,sendto,sendmsg,sendmmsg"
#: A turn that runs a command in the sandbox, then streams a message for about 1.5 s, so start-up work of
#: the server has time to show.
SCENARIO = """
name = "hermetic"
description = "a sandboxed command, then a slow streamed message"

[[turns]]
input = "Run echo, then say hello"

[[turns.responses]]

[[turns.responses.items]]
type = "command"
command = "echo hermetic"
call_id = "call_echo"
output = "hermetic\\n"

[[turns.responses]]

[[turns.responses.items]]
type = "message"
text = "Hello from the mock model!"
deltas = ["Hello ", "from the ", "mock ", "model!"]
delay_ms = 400

[expect]
server_trace = "none"
client_trace = "none"

[[expect.turns]]
status = "completed"
server_status = "completed"
"""

_CALL = re.compile(r"^\s*(?:\d+\s+)?(connect|sendto|sendmsg|sendmmsg)\(")
_FAMILY = re.compile(r"sa_family=(AF_[A-Z0-9]+)")
_INET = re.compile(r'inet_addr\("([^"]+)"\)')
_INET6 = re.compile(r'inet_pton\(AF_INET6,\s*"([^"]+)"')


@dataclass(frozen=True, slots=True)
class Attempt:
    call: str
    family: str
    address: str | None
    line: str


def attempts(log_dir: Path) -> list[Attempt]:
    """Every traced call that names an address (a call on an already connected socket names none)."""
    found = []
    for path in sorted(log_dir.glob("trace*")):
        for line in path.read_text(errors="replace").splitlines():
            call, family = _CALL.match(line), _FAMILY.search(line)
            if not call or not family:
                continue
            address = _INET.search(line) or _INET6.search(line)
            found.append(Attempt(call.group(1), family.group(1), address.group(1) if address else None, line))
    return found


#: Families that never leave the machine: local sockets; AF_UNSPEC, ``connect``'s way to dissolve a UDP
#: association; AF_NETLINK, messages to this kernel (the command sandbox, bubblewrap with its own network
#: namespace, brings its loopback interface up that way).
LOCAL_FAMILIES = ("AF_UNIX", "AF_UNSPEC", "AF_NETLINK")


def off_machine(attempt: Attempt) -> bool:
    """Anything but a local family and loopback (127.0.0.0/8, ::1, an IPv4-mapped loopback)."""
    if attempt.family in LOCAL_FAMILIES:
        return False
    if attempt.family in ("AF_INET", "AF_INET6") and attempt.address is not None:
        address = ipaddress.ip_address(attempt.address)
        mapped = getattr(address, "ipv4_mapped", None)
        return not (address.is_loopback or (mapped is not None and mapped.is_loopback))
    return True


def _unavailable(reason: str) -> None:
    if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
        pytest.fail(f"CODEX_HARNESS_REQUIRE_REAL=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def strace() -> str:
    path = shutil.which("strace")
    if path is None:
        _unavailable("strace is not installed (apt-get install strace); the hermetic proof needs it")
    probe = subprocess.run([path, "-f", "-o", os.devnull, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        _unavailable(f"strace cannot trace here: {probe.stderr.strip()[:200]}")
    return str(path)


def traced_launcher(strace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every start of the binary runs under strace, the confining launcher included (strace stays outside the
    confinement, so it can write its log; ``-f`` follows into the namespaces)."""
    log_dir = tmp_path / "strace"
    log_dir.mkdir()
    trace = [strace, "-f", "-ff", "-qq", "-e", f"trace={TRACED}", "-o", str(log_dir / "trace")]
    wrap = confine.Launcher.wrap

    def traced(self: confine.Launcher, argv: Sequence[str], where: confine.Layout) -> list[str]:
        return [*trace, *wrap(self, argv, where)]

    monkeypatch.setattr(confine.Launcher, "wrap", traced)
    return log_dir


def one_session(codex_bin: Path, strace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Attempt]:
    log_dir = traced_launcher(strace, tmp_path, monkeypatch)
    scenario = loads(SCENARIO, "hermetic.toml")
    run = run_one(scenario, "real", codex=codex_bin, work_root=tmp_path)
    assert run.skipped is None, run.skipped
    failed = [f"{c.contract} / {c.name}: {c.detail}" for c in run.checks if c.status == "fail"]
    assert not failed, failed
    assert run.record is not None and "\x1b" not in run.record.stderr_tail  # codex colours it; we show it plain
    return attempts(log_dir)


@pytest.mark.real_codex
def test_a_real_session_connects_to_nothing_off_the_machine(
    codex_bin: Path, strace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = one_session(codex_bin, strace, tmp_path, monkeypatch)
    # The trace works: the server's requests to the mock Responses API on 127.0.0.1 are in it.
    assert any(a.call == "connect" and a.family == "AF_INET" and a.address == "127.0.0.1" for a in seen), seen
    outside = [a.line for a in seen if off_machine(a)]
    assert not outside, "connection attempts off the machine:\n" + "\n".join(outside[:20])


@pytest.mark.real_codex
def test_without_the_network_off_settings_the_check_catches_the_attempts(
    codex_bin: Path, strace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _has_outside_resolver():
        _unavailable("no nameserver outside 127.0.0.0/8 in /etc/resolv.conf: start-up lookups would stay local")
    monkeypatch.setattr(real, "HERMETIC_CONFIG", {})
    seen = one_session(codex_bin, strace, tmp_path, monkeypatch)
    outside = [a for a in seen if off_machine(a)]
    assert outside, "the plugin sync's lookups were expected without the network-off settings; strace saw none"
    assert any(a.family in ("AF_INET", "AF_INET6") for a in outside)


def _has_outside_resolver() -> bool:
    try:
        text = Path("/etc/resolv.conf").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                if not ipaddress.ip_address(parts[1].split("%")[0]).is_loopback:
                    return True
            except ValueError:
                continue
    return False


# --- the parser itself ----------------------------------------------------------------------------

SAMPLE = """\
101 connect(7, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0
102 sendto(47, "L\\31", 32, MSG_NOSIGNAL, {sa_family=AF_INET, sin_port=htons(53), \
sin_addr=inet_addr("10.255.255.53")}, 16) = 32
103 connect(9, {sa_family=AF_INET, sin_port=htons(40001), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
104 connect(5, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0
105 sendto(7, "\\0", 1, 0, NULL, 0) = 1
106 connect(3, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), \
inet_pton(AF_INET6, "2606:4700::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH
107 connect(3, {sa_family=AF_INET6, sin6_port=htons(8), sin6_flowinfo=htonl(0), \
inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0
108 connect(4, {sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, 12) = 0
"""


def test_the_trace_reader_flags_what_leaves_the_machine(tmp_path: Path) -> None:
    (tmp_path / "trace.101").write_text(SAMPLE)
    seen = attempts(tmp_path)
    addresses = [a.address for a in seen]
    assert addresses == ["10.255.255.53", "10.255.255.53", "127.0.0.1", None, "2606:4700::1", "::1", None]
    flagged = [a.address or a.family for a in seen if off_machine(a)]
    assert flagged == ["10.255.255.53", "10.255.255.53", "2606:4700::1"]
    (tmp_path / "trace.102").write_text('connect(3, {sa_family=AF_PACKET, sll_protocol=htons(ETH_P_ALL)}, 20) = 0\n')
    assert [a.family for a in attempts(tmp_path) if off_machine(a)][-1] == "AF_PACKET"  # unknown: flagged


def test_stderr_tails_are_shown_without_colour_codes() -> None:
    line = (
        "\x1b[2m2026-12-01T09:50:56Z\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mcodex_core_plugins::startup_sync\x1b[0m"
        "\x1b[2m:\x1b[0m git sync failed \x1b[3mapi_token\x1b[0m\x1b[2m=\x1b[0msecret42\x1b]0;title\x07 done\x1bM\n"
    )
    plain = "2026-12-01T09:50:56Z  WARN codex_core_plugins::startup_sync: git sync failed api_token={}{} done{}\n"
    # Only colours go; a title write (OSC 0) and a reverse index are kept, to be shown escaped.
    assert strip_ansi(line) == plain.format("secret42", "\x1b]0;title\x07", "\x1bM")
    tail = StderrTail(limit=4096)
    tail.feed(line.encode())
    # the colour codes no longer hide the assignment (the value runs to the ';' of the title sequence and
    # goes with it); what is left of escape sequences is written out
    assert tail.text() == plain.format("[REDACTED]", ";title\\x07", "\\x1bM")
    assert strip_ansi("plain text") == "plain text"
