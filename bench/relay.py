"""Relay overhead: what the recorder between an outside client and the real binary adds per message.

Usage: ``python bench/relay.py [--rounds N] [--deltas N] [--quick] [--json PATH]``

The relay (``harness/outside/relay.py``) stamps each chunk when its read returns (in) and when its write to the
other side finished (out); a message's overhead is its chunk's out - in. Measured on the relay's own clock,
because the bare round trip through two pipes on this loaded machine already varies by milliseconds: a
difference of round-trip percentiles would measure noise. Two loads, each through three settings measured in the
same run:

- ``pingpong``: N requests one at a time, a peer answering each at once (both directions, one message per chunk);
- ``flood``: a peer writing N deltas as fast as the pipe takes them (many messages per chunk);

``direct`` (no relay: the round trip's baseline), ``copy`` (the relay forwarding and timing only, no recording:
the overhead's baseline) and ``relay`` (recording the wire). Target: the relay's in → out p99 at most 1 ms.
``cycle`` is a chunk's read to the end of its recording (what the next read of that direction waits behind).
The flood's in → out includes any wait of the write for the reader (a full pipe); the client's pipe is 1 MiB so
that a reader a few chunks behind does not count, and ``copy`` has the same wait.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, arg_parser, finish, percentile, ratio

BENCH = "relay"
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_BYTES = 1 << 20  # the default limit of /proc/sys/fs/pipe-max-size
TARGET_MS = 1.0
ECHO = """
import os, sys
buf = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    buf += data
    while b"\\n" in buf:
        line, buf = buf.split(b"\\n", 1)
        os.write(1, b'{"id":%s,"result":{}}\\n' % line[6:line.index(b",")])
"""
FLOOD = """
import os, sys
n = int(sys.argv[1])
sys.stdin.buffer.readline()
data = b"".join(b'{"method":"item/agentMessage/delta","params":{"delta":"x","seq":%d}}\\n' % k for k in range(n))
view = memoryview(data)
while view:
    view = view[os.write(1, view[:65536]):]
sys.stdin.buffer.read()
"""


def _argv(setting: str, root: Path, peer: list[str]) -> list[str]:
    if setting == "direct":
        return peer
    flag = "--bare" if setting == "relay" else "--bare-copy"
    return [sys.executable, "-m", "harness.outside.relay", flag, str(root), "--", *peer]


def _overhead(root: Path) -> dict:
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    return orjson.loads((folder / "relay.json").read_bytes())["overhead"]


def pingpong(setting: str, rounds: int, root: Path) -> tuple[list[float], dict]:
    proc = subprocess.Popen(_argv(setting, root, [sys.executable, "-c", ECHO]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    out, inp = proc.stdin.fileno(), proc.stdout.fileno()
    rtts = []
    try:
        for k in range(rounds + 20):
            line = b'{"id":%d,"method":"ping"}\n' % k
            t0 = time.perf_counter()
            os.write(out, line)
            got = b""
            while not got.endswith(b"\n"):
                chunk = os.read(inp, 65536)
                if not chunk:
                    raise RuntimeError(f"{setting}: the peer went away")
                got += chunk
            if k >= 20:  # the first rounds warm the pipes and the interpreters
                rtts.append((time.perf_counter() - t0) * 1000)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return rtts, (_overhead(root) if setting != "direct" else {})


def flood(setting: str, deltas: int, root: Path) -> tuple[float, dict]:
    argv = _argv(setting, root, [sys.executable, "-c", FLOOD, str(deltas)])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:  # a reader a few chunks behind (this machine is shared) must not block the relay's write: not its cost
        fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    os.write(proc.stdin.fileno(), b'{"id":1,"method":"go"}\n')
    first = os.read(proc.stdout.fileno(), 1 << 20)  # the clock starts at the first delta: starts are not measured
    t0 = time.perf_counter()
    lines = first.count(b"\n")
    while lines < deltas:
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        if not chunk:
            break
        lines += chunk.count(b"\n")
    wall = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(timeout=60)
    if lines != deltas:
        raise RuntimeError(f"{setting}: {lines} of {deltas} deltas arrived")
    return deltas / wall, (_overhead(root) if setting != "direct" else {})


def _both(overhead: dict, key: str) -> float:
    return max(float(d.get(key, 0.0)) for d in overhead.values())


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--deltas", type=int, default=100_000)
    args = parser.parse_args()
    rounds, deltas = (200, 5000) if args.quick else (args.rounds, args.deltas)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
        base = Path(tmp)
        rtt, over = {}, {}
        for setting in ("direct", "copy", "relay"):
            rtt[setting], over[setting] = pingpong(setting, rounds, base / f"pp-{setting}")
        direct_p99 = percentile(rtt["direct"], 99)
        for setting in ("direct", "copy", "relay"):
            p99 = percentile(rtt[setting], 99)
            base_name = None if setting == "direct" else "pingpong direct round trip p99"
            rows.append(Row(BENCH, f"pingpong {setting} round trip p99", p99, "ms", base_name,
                            None if setting == "direct" else ratio(p99, direct_p99),
                            note=f"p50 {percentile(rtt[setting], 50):.3f} ms, {rounds} rounds"))  # fmt: skip
        copy_p99, relay_p99 = _both(over["copy"], "p99_ms"), _both(over["relay"], "p99_ms")
        rows.append(Row(BENCH, "pingpong copy in->out p99", copy_p99, "ms", note="forward + time, no recording"))
        rows.append(Row(BENCH, "pingpong relay in->out p99", relay_p99, "ms", "pingpong copy in->out p99",
                        ratio(relay_p99, copy_p99), target=f"<= {TARGET_MS:g} ms", ok=relay_p99 <= TARGET_MS,
                        note=f"max {_both(over['relay'], 'max_ms'):.3f} ms; cycle p99 "
                        f"{_both(over['relay'], 'cycle_p99_ms'):.3f} ms"))  # fmt: skip
        rate, fover = {}, {}
        for setting in ("direct", "copy", "relay"):
            rate[setting], fover[setting] = flood(setting, deltas, base / f"fl-{setting}")
        for setting in ("copy", "relay"):
            rows.append(Row(BENCH, f"flood {setting} deltas/s", rate[setting], "msg/s", "flood direct deltas/s",
                            ratio(rate[setting], rate["direct"])))  # fmt: skip
        rows.insert(-2, Row(BENCH, "flood direct deltas/s", rate["direct"], "msg/s", note=f"{deltas} deltas"))
        fcopy, frelay = _both(fover["copy"], "p99_ms"), _both(fover["relay"], "p99_ms")
        rows.append(Row(BENCH, "flood copy in->out p99", fcopy, "ms", note="per message, many per chunk"))
        rows.append(Row(BENCH, "flood relay in->out p99", frelay, "ms", "flood copy in->out p99", ratio(frelay, fcopy),
                        target=f"<= {TARGET_MS:g} ms", ok=frelay <= TARGET_MS,
                        note=f"cycle p99 {_both(fover['relay'], 'cycle_p99_ms'):.3f} ms (read to recorded)"),
                    )  # fmt: skip
    return finish(rows, "relay overhead (relay's own in -> out timestamps, per message)", args.json)


if __name__ == "__main__":
    sys.exit(main())
