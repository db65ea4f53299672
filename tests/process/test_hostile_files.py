"""Files another program wrote are hostile input: never followed, never read whole, never trusted.

An outside client (``run --client-cmd``) runs in the harness's directory and knows every path of its run:
its recording folder is in the shim, its result file in ``CODEX_HARNESS_RESULT``. Each case here plants what
a hostile client would and runs the real entry point in a subprocess, bounded in time and address space (the
old code read ``/dev/zero`` until the disk or the memory ran out, and waited on a FIFO forever), then checks
the figure: the run ends, writes at most 65 MiB per record, stays under 300 MB of RSS, and says in the record
and on the terminal what it refused.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from contracts.exitcodes import FAILED, USAGE

MiB = 1024 * 1024
#: What a record may take on disk with /dev/zero planted, and the harness's peak RSS.
MAX_RECORD_BYTES = 65 * MiB
MAX_RSS_MB = 300
#: A run of one scenario takes a second; the old code on these inputs never ended.
TIMEOUT_S = 60.0
#: The old code's reads and copies were unbounded: cap the subprocess (its memory, and each file it writes:
#: past it SIGXFSZ) so a regression fails the test, not the machine. A sparse 1.5 GiB file fits under it.
ADDRESS_SPACE = 4 * 1024 * MiB
FILE_SIZE = 2 * 1024 * MiB

CLIENT = """
import json, os, re, sys
mode = sys.argv[1]
shim = open(os.environ["CODEX_BIN"]).read()
rec = re.search(r"FAKE_CODEX_RECORD='?([^'\\n]+)'?", shim).group(1)
result = os.environ["CODEX_HARNESS_RESULT"]
secret = os.environ["PLANTED_SECRET"]
os.makedirs(rec, exist_ok=True)

def folder(n=1, pid=999):
    d = os.path.join(rec, f"{n}-{pid}")
    os.makedirs(d)
    open(os.path.join(d, "wire.jsonl"), "w").close()
    return d

def start(d, **fields):
    body = {"n": 1, "pid": 999, "started_t": 1.0, "scenario": "plain", "profile": "0.171.0", **fields}
    with open(os.path.join(d, "start.json"), "w") as fh:
        json.dump(body, fh)

def result_file(turn):
    with open(result, "w") as fh:
        fh.write('{"turns": [{"turn": %s, "status": "completed"}]}' % turn)

if mode == "zero":
    os.symlink("/dev/zero", os.path.join(rec, "zero"))
elif mode == "etc":
    os.symlink("/etc", os.path.join(rec, "etc"))
elif mode == "secret":
    os.symlink(secret, os.path.join(rec, "shadow"))
elif mode == "fifo":
    os.mkfifo(os.path.join(rec, "fifo"))
elif mode == "recording-link":
    os.rmdir(rec)
    os.symlink("/etc", rec)
elif mode == "result-fifo":
    os.mkfifo(result)
elif mode == "result-zero":
    os.symlink("/dev/zero", result)
elif mode == "result-secret":
    os.symlink(secret, result)
elif mode.startswith("turn="):
    result_file(mode[5:])
elif mode == "n-23-digits":
    start(folder(), n=10**22)
elif mode == "pid-string":
    start(folder(), pid="x")
elif mode == "started-string":
    start(folder(), started_t="soon")
elif mode == "scenario-object":
    start(folder(), scenario={"a": 1})
elif mode == "folder-mismatch":
    start(folder(2, 999))
elif mode == "end-forged":
    d = folder()
    start(d)
    with open(os.path.join(d, "end.json"), "w") as fh:
        json.dump({"reason": "exit", "t": "late", "exit_code": 10**30}, fh)
elif mode == "start-zero":
    os.symlink("/dev/zero", os.path.join(folder(), "start.json"))
elif mode == "sparse-start":
    with open(os.path.join(folder(), "start.json"), "wb") as fh:
        fh.write(b'{"n": 1}')
        fh.truncate(1536 * 1024 * 1024)
print("planted", mode)
"""


@dataclass
class Outcome:
    code: int | None  # None: killed at the timeout
    text: str
    wall_s: float
    rss_mb: float
    report_bytes: int
    report: Path

    def checks(self) -> list[dict[str, object]]:
        return list(orjson.loads((self.report / "checks.json").read_bytes()))

    def failed(self) -> dict[tuple[object, object], str]:
        return {(c["contract"], c["name"]): str(c["detail"]) for c in self.checks() if c["status"] == "fail"}

    def record(self) -> dict[str, object]:
        return dict(orjson.loads((self.report / "sessions" / "fake-process" / "plain" / "record.json").read_bytes()))


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))


def disk_bytes(root: Path) -> int:
    """Bytes on disk under ``root`` (blocks, so a sparse copy counts what it takes), links not followed."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


#: The harness's own peak RSS is its VmHWM at exit: rusage's maxrss would count the pages a forked child shares
#: with its parent (a pytest worker of 500 MB) before it execs.
_MEASURED = """
import atexit, sys
where = sys.argv.pop(1)
atexit.register(lambda: open(where, "w").write(open("/proc/self/status").read()))
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _peak_rss_mb(status: Path) -> float:
    for line in status.read_text().splitlines() if status.is_file() else []:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("inf")  # killed before it could say: no figure, no pass


def run_measured(argv: list[str], cwd: Path, report: Path, env: dict[str, str]) -> Outcome:
    """Run ``codex-harness ARGV`` to its end or TIMEOUT_S; its exit code, output, wall time and peak RSS."""
    out_path, status = cwd / "output.txt", cwd / "status.txt"
    started = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MEASURED, str(status), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit,
            start_new_session=True,
        )
    waited: list[tuple[int, int]] = []
    waiter = threading.Thread(target=lambda: waited.append(os.waitpid(proc.pid, 0)))
    waiter.start()
    waiter.join(TIMEOUT_S)
    killed = not waited
    if killed:
        os.killpg(proc.pid, 9)
        waiter.join(30)
    proc.returncode = -9 if killed else 0  # reaped by waitpid above: Popen must not wait for it again
    wall = time.monotonic() - started
    code = None if killed else os.waitstatus_to_exitcode(waited[0][1])
    return Outcome(code, out_path.read_text(errors="replace"), wall, _peak_rss_mb(status), disk_bytes(report), report)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    client = tmp_path / "hostile_client.py"
    client.write_text(CLIENT)
    secret = tmp_path / "secret"
    secret.write_text("root:$6$the-planted-secret:19000::::::\n")
    env = {**os.environ, "PLANTED_SECRET": str(secret)}
    return client, env


def play(tmp_path: Path, hostile: tuple[Path, dict[str, str]], mode: str) -> Outcome:
    client, env = hostile
    report = tmp_path / "report"
    argv = ["run", "--client-cmd", f"{sys.executable} {client} {mode}", "--scenario", "plain", "--report", str(report)]
    outcome = run_measured(argv, tmp_path, report, env)
    assert outcome.code is not None, f"still running after {TIMEOUT_S:g} s: {outcome.text[-2000:]}"
    assert "Traceback" not in outcome.text, outcome.text
    return outcome


def assert_bounded(outcome: Outcome) -> None:
    assert outcome.report_bytes <= MAX_RECORD_BYTES, f"{outcome.report_bytes / MiB:.1f} MiB written"
    assert outcome.rss_mb <= MAX_RSS_MB, f"peak RSS {outcome.rss_mb:.0f} MB"


@pytest.mark.parametrize(
    ("mode", "name", "why"),
    [
        ("zero", "recording/zero", "is a symbolic link (not followed)"),
        ("etc", "recording/etc", "is a symbolic link (not followed)"),
        ("secret", "recording/shadow", "is a symbolic link (not followed)"),
        ("fifo", "recording/fifo", "is a FIFO (named pipe)"),
    ],
)
def test_what_a_client_plants_in_its_recording_is_never_copied(
    mode: str, name: str, why: str, tmp_path: Path, hostile: tuple[Path, dict[str, str]]
) -> None:
    """Old code: /dev/zero copied until killed (2.2 GB in 8 s), /etc copied whole (138 MB, then a
    traceback), the secret copied verbatim, the FIFO waited on forever."""
    outcome = play(tmp_path, hostile, mode)
    assert outcome.code == FAILED, outcome.text  # the client started no server: a failing check, not a crash
    assert_bounded(outcome)
    assert outcome.wall_s < 30, outcome.wall_s
    assert f"{name}: {why}; not copied" in outcome.record()["not_copied"], outcome.record()["not_copied"]  # type: ignore[operator]
    assert f"plain: not copied into the report: {name}: {why}" in outcome.text, outcome.text
    saved = outcome.report / "sessions" / "fake-process" / "plain" / "recording"
    assert saved.is_dir() and list(saved.iterdir()) == []
    assert "the-planted-secret" not in "".join(
        p.read_text(errors="replace") for p in outcome.report.rglob("*") if p.is_file() and not p.is_symlink()
    )
    assert not any(p.is_symlink() for p in outcome.report.rglob("*"))


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("result-fifo", "result.json is a FIFO (named pipe), not a regular file"),
        ("result-zero", "result.json is a symbolic link (not followed)"),
        ("result-secret", "result.json is a symbolic link (not followed)"),
        ("turn=1.0", "turns/0/turn: 1.0 is not of type 'integer'"),
        ("turn=true", "turns/0/turn: True is not of type 'integer'"),
        ("turn=1e30", "turns/0/turn: 1e+30 is not of type 'integer'"),
    ],
)
def test_a_hostile_result_file_is_a_failing_check(
    mode: str, problem: str, tmp_path: Path, hostile: tuple[Path, dict[str, str]]
) -> None:
    """Old code: a FIFO hung the harness forever, /dev/zero reached 3.6 GB of RSS in 8 s, ``"turn": 1.0``
    passed the schema and raised a TypeError in a contract."""
    outcome = play(tmp_path, hostile, mode)
    assert outcome.code == FAILED, outcome.text
    assert_bounded(outcome)
    failed = outcome.failed()
    assert problem in failed.get(("client", "result file"), ""), failed
    assert not any("raised" in detail for detail in failed.values()), failed  # no contract crashed on it
    assert ("runner", "play") not in failed
    assert "the-planted-secret" not in (outcome.report / "checks.json").read_text()


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("n-23-digits", "'n' must be an integer in 1..10000, got 1e+22"),
        ("pid-string", "'pid' must be a process id, got 'x'"),
        ("started-string", "'started_t' must be a finite number of seconds, got 'soon'"),
        ("scenario-object", "'scenario' must be a string"),
        ("folder-mismatch", "n 1 and pid 999 are not those of its folder '2-999'"),
        ("end-forged", "end.json: 't' must be a finite number of seconds, got 'late'"),
        ("start-zero", "start.json is a symbolic link (not followed)"),
        ("sparse-start", "start.json is 1610612736 bytes, more than the 1048576 read of it"),
        ("recording-link", "recording is a symbolic link (not followed)"),
    ],
)
def test_a_forged_recording_is_a_failing_check(
    mode: str, problem: str, tmp_path: Path, hostile: tuple[Path, dict[str, str]]
) -> None:
    """Old code: a 23-digit ``n`` broke saving the record (``Integer exceeds 64-bit range``) and a string pid
    was a ``runner / play`` traceback; a 1.5 GB sparse start.json was read whole and copied densely."""
    outcome = play(tmp_path, hostile, mode)
    assert outcome.code == FAILED, outcome.text
    assert_bounded(outcome)
    failed = outcome.failed()
    assert ("runner", "play") not in failed, failed
    assert problem in failed.get(("client", "recording"), ""), failed


def _schema_dir(tmp_path: Path, member: str) -> Path:
    out = tmp_path / "schema"
    out.mkdir()
    (out / "ClientRequest.json").write_text('{"type": "object"}')
    target = {"zero": "/dev/zero", "secret": "/etc/hostname"}[member]
    (out / "ServerNotification.json").symlink_to(target)
    return out


@pytest.mark.parametrize("member", ["zero", "secret"])
def test_a_schema_file_generate_json_schema_did_not_write_is_refused(member: str, tmp_path: Path) -> None:
    """Old code: a schema file linked to /dev/zero was read until memory ran out (7.5 GB)."""
    schema = _schema_dir(tmp_path, member)
    outcome = run_measured(["schema", "diff", str(schema), str(schema)], tmp_path, tmp_path / "none", dict(os.environ))
    assert outcome.code == USAGE, outcome.text
    assert f"{schema}/ServerNotification.json is a symbolic link (not followed)" in outcome.text, outcome.text
    assert "Traceback" not in outcome.text
    assert outcome.rss_mb <= MAX_RSS_MB


def test_a_trace_bundle_member_linked_elsewhere_is_refused(tmp_path: Path) -> None:
    from test_trace_support import SIGKILL, copy_bundle

    from contracts.trace.closure import check_bundle
    from contracts.trace.reader import bundles_under

    bundle = copy_bundle(SIGKILL, tmp_path / "root" / "b")
    (bundle / "manifest.json").rename(tmp_path / "manifest.json")
    (bundle / "manifest.json").symlink_to(tmp_path / "manifest.json")
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "symbolic link (not followed)" in (verdict.error or ""), verdict.error
    assert bundles_under(tmp_path / "root") == []  # a bundle's manifest must be its own file
    (tmp_path / "root" / "linked").symlink_to(bundle)
    assert bundles_under(tmp_path / "root") == []  # and a bundle folder a real one


def test_the_fault_ledger_is_read_bounded_and_never_blocks(tmp_path: Path) -> None:
    """In a subprocess with a timeout: the old code's open() of a FIFO without a writer blocked forever."""
    fifo = tmp_path / "ledger"
    os.mkfifo(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    code = "import sys; from pathlib import Path; from fake_server import ledger; "
    code += "print([ledger.read(Path(p)) for p in sys.argv[1:]])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fifo), str(link)], capture_output=True, timeout=30, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0 and proc.stdout.strip() == b"[[], []]", proc.stderr


@pytest.mark.parametrize("damage", ["corrupt", "oversized", "missing"])
def test_a_store_release_with_a_bad_stable_bundle_exits_3_naming_it(damage: str, tmp_path: Path) -> None:
    """fake-codex --release X started, then answered every request, initialize included, -32603 with tracebacks."""
    import shutil

    import zstandard

    from contracts import releases

    shipped = releases.SHIPPED_ROOT / "codex-cli-0.169.0"
    folder = tmp_path / "store" / "codex-cli-0.199.0"
    shutil.copytree(shipped, folder)
    for name in ("meta.json", "release.json"):
        (folder / name).write_text((folder / name).read_text().replace("0.169.0", "0.199.0"))
    bundle = folder / "stable.json.zst"
    if damage == "corrupt":
        bundle.write_bytes(bundle.read_bytes()[:100])
    elif damage == "oversized":
        bundle.write_bytes(zstandard.ZstdCompressor().compress(b"[" + b" " * (300 * MiB) + b"]"))
    else:
        bundle.unlink()
    initialize = b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
    proc = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--release", "0.199.0", "--scenario", "plain"],
        input=initialize,
        capture_output=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "CODEX_HARNESS_STORE": str(tmp_path / "store")},
    )
    assert proc.returncode == USAGE, (proc.returncode, proc.stdout[:300], proc.stderr[-2000:])
    assert b"Traceback" not in proc.stderr and b"stable.json.zst" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


BAD_NAME_CODEX = """#!/bin/sh
case "$*" in
  *--version*) echo "codex-cli 0.199.0" ;;
  *generate-json-schema*)
    for a; do out=$a; done
    mkdir -p "$out"
    printf '{"type": "object"}' > "$out/ClientRequest.json"
    printf '{"type": "object"}' > "$out/$(printf 'Bad\\377Name.json')"
    ;;
esac
"""


def test_a_schema_file_name_that_is_not_utf8_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    """Old code: a traceback in encode_bundle, and an empty release folder left in the store."""
    codex = tmp_path / "codex"
    codex.write_text(BAD_NAME_CODEX)
    codex.chmod(0o755)
    store = tmp_path / "store"
    argv = ["schema", "pin", "--codex", str(codex), "--store", str(store)]
    outcome = run_measured(argv, tmp_path, tmp_path / "none", dict(os.environ))
    assert "Traceback" not in outcome.text, outcome.text
    assert outcome.code in (FAILED, USAGE) and "not UTF-8" in outcome.text, outcome.text
    assert not store.exists() or list(store.rglob("*")) == [], list(store.rglob("*"))


def test_a_bundle_json_cannot_hold_is_refused_before_its_folder_is_made(tmp_path: Path) -> None:
    from contracts import schema_store

    with pytest.raises(schema_store.SchemaStoreError, match=r"cannot write the schema of 0\.199\.0"):
        schema_store.write_release("0.199.0", {"Bad\udcffName.json": {}}, {}, root=tmp_path)
    assert list(tmp_path.iterdir()) == []
