"""The recorder relay between an outside client and its server (harness.outside.relay), on a peer of our own.

A flood of 100,000 deltas reaches the client byte for byte and the recording holds every one, in order; a client
that dies mid-line leaves a recording the harness reads (the torn line named, the server ended by the stdin
close); the client's signal reaches the server. No real binary: the relay is the same whatever it starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from codex_client.process import child_environment
from harness.outside.record import read_recordings

N = 100_000
#: The peer: reads one request, answers it, floods N deltas in writes of 7,000 bytes (lines cut across writes),
#: then waits for its stdin to close.
PEER = f"""
import os, sys
line = sys.stdin.buffer.readline()
out = [b'{{"id":1,"result":{{}}}}\\n']
for k in range({N}):
    out.append(b'{{"method":"item/agentMessage/delta","params":{{"delta":"x","seq":%d}}}}\\n' % k)
data = b"".join(out)
for i in range(0, len(data), 7000):
    os.write(1, data[i:i + 7000])
sys.stdin.buffer.read()
"""
ECHO_UNTIL_EOF = "import sys\nfor line in sys.stdin.buffer: pass\n"
SLEEPER = "import time\ntime.sleep(60)\n"


def until(done: Callable[[], bool], limit_s: float = 30.0) -> None:
    """Poll ``done`` until it holds, at most ``limit_s`` (a real process's own pace, bounded)."""
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def relay(root: Path, *peer: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "harness.outside.relay", "--bare", str(root), "--", sys.executable, "-c", *peer]
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_environment(None)
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def test_a_flood_of_100000_deltas_is_relayed_and_recorded_whole_and_in_order(tmp_path: Path) -> None:
    proc = relay(tmp_path, PEER)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"id":1,"method":"ping"}\n')
    proc.stdin.flush()
    got = bytearray()
    want_lines = N + 1
    deadline = time.monotonic() + 60
    last = b'"seq":%d}}\n' % (N - 1)
    while not got.endswith(last) and time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        got += chunk
    proc.stdin.close()
    assert finish(proc) == 0
    lines = bytes(got).splitlines()
    assert len(lines) == want_lines  # nothing lost, nothing added
    assert [orjson.loads(x)["params"]["seq"] for x in lines[1:]] == list(range(N))  # nothing reordered
    (server,) = read_recordings(tmp_path)
    s2c = [e for e in server.wire if e.dir == "s2c"]
    assert [(e.frame or {}).get("params", {}).get("seq") for e in s2c[1:]] == list(range(N))
    assert [e.frame for e in server.wire if e.dir == "c2s"] == [{"id": 1, "method": "ping"}]
    times = [e.t for e in server.wire if e.dir != "note"]
    assert times == sorted(times)  # monotonic, as read
    assert server.end is not None and server.end["reason"] == "stdin_closed" and server.end["exit_code"] == 0
    overhead = orjson.loads((server.folder / "relay.json").read_bytes())["overhead"]
    assert overhead["s2c"]["messages"] == N + 1 and overhead["s2c"]["sampled"] == N + 1


ECHO = """
import os
buf = b""
while data := os.read(0, 65536):
    buf += data
    while b"\\n" in buf:
        line, buf = buf.split(b"\\n", 1)
        os.write(1, b'{"id":%s,"result":{}}\\n' % line[6:line.index(b",")])
"""


def test_an_answer_is_recorded_after_its_request_though_each_direction_records_after_forwarding(tmp_path: Path) -> None:
    """The server answers a request as soon as the relay forwarded it, before the relay recorded it: the file still
    holds every request before its answer, and its times never go back."""
    proc = relay(tmp_path, ECHO)
    assert proc.stdin is not None and proc.stdout is not None
    for k in range(300):
        os.write(proc.stdin.fileno(), b'{"id":%d,"method":"ping"}\n' % k)
        got = b""
        while not got.endswith(b"\n"):
            got += os.read(proc.stdout.fileno(), 65536)
    proc.stdin.close()
    assert finish(proc) == 0
    (server,) = read_recordings(tmp_path)
    order = [(e.dir, (e.frame or {}).get("id")) for e in server.wire if e.dir != "note"]
    assert order == [pair for k in range(300) for pair in (("c2s", k), ("s2c", k))]
    times = [e.t for e in server.wire]
    assert times == sorted(times)


def test_a_client_killed_mid_line_leaves_a_bounded_readable_record(tmp_path: Path) -> None:
    # The client: writes one whole request and half of the next, then dies (SIGKILL) with the relay's stdin.
    client = (
        "import os, signal, subprocess, sys\n"
        f"p = subprocess.Popen({[sys.executable, '-m', 'harness.outside.relay', '--bare', str(tmp_path), '--']!r}"
        f" + [sys.executable, '-c', {ECHO_UNTIL_EOF!r}], stdin=subprocess.PIPE)\n"
        'p.stdin.write(b\'{"id":1,"method":"a"}\\n{"id":2,"method":"b","params":{"x":\');'
        " p.stdin.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", client], env=child_environment(None), timeout=60)
    assert done.returncode == -signal.SIGKILL
    until(lambda: bool(list(tmp_path.glob("*/end.json"))))  # the relay, orphaned, ends its server by itself
    (server,) = read_recordings(tmp_path)
    c2s = [e for e in server.wire if e.dir == "c2s"]
    assert c2s[0].frame == {"id": 1, "method": "a"}
    assert c2s[1].error == "truncated_at_eof" and str(c2s[1].raw).startswith('{"id":2')
    assert any(e.dir == "note" and e.note == "stdin closed" for e in server.wire)
    assert server.end is not None and server.end["reason"] == "stdin_closed"
    assert (server.folder / "wire.jsonl").stat().st_size < 4096


def test_the_clients_signal_reaches_the_server_and_the_relay_exits_as_it_did(tmp_path: Path) -> None:
    proc = relay(tmp_path, SLEEPER)
    until(lambda: bool(children(proc.pid)))  # the server started
    proc.send_signal(signal.SIGTERM)
    assert finish(proc, 30) == -signal.SIGTERM  # the server died of it, and so does the relay
    (server,) = read_recordings(tmp_path)
    assert server.end is not None and server.end["reason"] == "signal" and server.end["signal"] == "SIGTERM"
    assert any(e.dir == "note" and e.note == "signal SIGTERM" for e in server.wire)


def test_a_server_started_around_the_relay_is_told_from_one_behind_it(tmp_path: Path) -> None:
    """The bypass watch of a real run: an app-server (or the binary's install tree) without the relay's entry is
    a bypass; the same with the entry (behind a relay), or the shim itself, is not."""
    from harness.outside.relay import RELAY_ENV
    from harness.outside.runner import BypassWatch

    install = tmp_path / "node_modules"
    binary = install / "codex" / "bin" / "codex.js"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    shim = tmp_path / "bin" / "codex"
    entry = f"{RELAY_ENV}={tmp_path / 'recording'}"
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    cases = [
        ([*sleep, "app-server"], {}, True),
        ([*sleep, str(binary)], {}, True),  # the binary's install tree, whatever the subcommand
        ([*sleep, "app-server"], {RELAY_ENV: str(tmp_path / "recording")}, False),
        ([*sleep, str(shim), "app-server"], {}, False),
        ([*sleep, "exec"], {}, False),
        # a server's own helper, started with a cleared environment by a process behind the relay: not a bypass
        (
            [sys.executable, "-c", f"import subprocess; subprocess.run({[*sleep, 'app-server']!r}, env={{}})"],
            {RELAY_ENV: str(tmp_path / "recording")},
            False,
        ),
    ]
    procs = [subprocess.Popen(argv, env={**child_environment(None), **env}) for argv, env, _ in cases]
    try:
        until(lambda: all(b"time.sleep" in Path(f"/proc/{p.pid}/cmdline").read_bytes() for p in procs))
        until(lambda: bool(children(procs[-1].pid)))
        watch = BypassWatch(str(install), entry, str(shim))
        assert [watch.bypasses(p.pid) for p in procs[:-1]] == [want for _, _, want in cases[:-1]]
        (helper,) = children(procs[-1].pid)
        until(lambda: b"app-server" in Path(f"/proc/{helper}/cmdline").read_bytes())
        assert not watch.bypasses(helper)
        assert not watch.bypasses(procs[0].pid)  # a process is named once (until it executes something else)
    finally:
        for p in procs:
            for child in children(p.pid):
                os.kill(child, signal.SIGKILL)
            p.kill()
            p.wait()


def test_a_process_that_ends_while_its_parents_are_walked_is_looked_at_again_not_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real binary's sandbox stages under a workspace-write sandbox (its bundled bwrap, in the install tree, with
    a cleared environment) live a few milliseconds: one that ended between the read of its command line and the walk
    of its parents had no parents to show and was named a server started around the relay (client / server
    started failed on the real binary only, on a loaded machine). An unknown chain is not a bypass."""
    from harness.outside import runner
    from harness.outside.relay import RELAY_ENV
    from harness.outside.runner import BypassWatch

    shim = tmp_path / "bin" / "codex"
    entry = f"{RELAY_ENV}={tmp_path / 'recording'}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "app-server"], env=child_environment(None)
    )
    walk = runner._ancestors

    def ends_first(pid: int) -> list[int] | None:
        proc.kill()
        proc.wait()
        return walk(pid)

    try:
        until(lambda: b"time.sleep" in Path(f"/proc/{proc.pid}/cmdline").read_bytes())
        alive = BypassWatch(str(tmp_path / "node_modules"), entry, str(shim))
        monkeypatch.setattr(runner, "_ancestors", ends_first)
        assert not alive.bypasses(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_bypass_is_named_once_its_parents_are_known(tmp_path: Path) -> None:
    """The same server, alive and with its parents readable, is named (known-bad still fails)."""
    from harness.outside.relay import RELAY_ENV
    from harness.outside.runner import BypassWatch

    entry = f"{RELAY_ENV}={tmp_path / 'recording'}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "app-server"], env=child_environment(None)
    )
    try:
        until(lambda: b"time.sleep" in Path(f"/proc/{proc.pid}/cmdline").read_bytes())
        assert BypassWatch(str(tmp_path / "node_modules"), entry, str(tmp_path / "bin" / "codex")).bypasses(proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("args", "left"),
    [
        (["app-server"], False),
        (["app-server", "-c", "model=o3"], False),
        (["-c", "model_provider=openai", "app-server"], True),
        (["app-server", "--config=model_providers.mock_provider.base_url=http://127.0.0.1:9"], True),
        (["app-server", "-cmodel_provider=x"], True),
    ],
)
def test_an_argument_that_takes_the_binary_away_from_the_mock_is_named(args: list[str], left: bool) -> None:
    from harness.outside.real_relay import model_provider
    from harness.targets.real import PROVIDER_ID

    provider, source = model_provider(args)
    assert (provider != PROVIDER_ID) is left, (provider, source)
    assert source.startswith("-c ") is left
