"""The real target is hermetic for the filesystem: whatever a scenario makes the binary do, it writes only in
the run's directory and cannot read the user's secrets (``codex_sandbox.confine``).

One confined real session, ``[config] sandbox = "danger-full-access"`` (the binary's own sandbox off), tries
every way a scenario has to reach out: probe steps ``fs/writeFile`` to absolute paths outside and
``command/exec`` running ``id > /outside/file``, a model tool call (``type = "command"``) doing the same,
``fs/readFile`` and ``cat`` of a planted ``~/.codex/auth.json`` (in a HOME this test sets for the harness, never
the user's). Nothing may be written, nothing read. The same session carries its positive controls: the
thread starts, the turn completes, the same probes write inside the run directory and read it back,
``/etc/hostname`` still reads the host's file. So a confinement that broke the session fails here too.

Two places outside: under ``/var/tmp`` (the host's ``/`` seen read-only) and under the test's own
temporary directory (``/tmp``: private to the run). Each mechanism (bubblewrap, unshare) is proved; and
with ``--unconfined`` the same session does write outside and read the secret, so the checks bite.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from codex_sandbox import confine
from contracts.scenario_file import loads
from harness.runner import ScenarioRun, run_one

pytestmark = pytest.mark.real_codex

MECHANISMS = list(confine.MECHANISMS)


@dataclass(frozen=True, slots=True)
class Places:
    outside: tuple[Path, ...]  # directories the binary must not write into
    secret: Path  # the planted ~/.codex/auth.json
    token: str  # its content


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Places]:
    home = tmp_path / "user-home"
    (home / ".codex").mkdir(parents=True)
    token = "sk-planted-" + secrets.token_hex(12)
    secret = home / ".codex" / "auth.json"
    secret.write_text(f'{{"OPENAI_API_KEY": "{token}"}}\n')
    monkeypatch.setenv("HOME", str(home))  # the harness's HOME: masked like the user's would be
    in_tmp = tmp_path / "outside"
    in_tmp.mkdir()
    var_tmp = Path(tempfile.mkdtemp(prefix="codex-harness-outside-", dir="/var/tmp"))
    try:
        yield Places((var_tmp, in_tmp), secret, token)
    finally:
        shutil.rmtree(var_tmp, ignore_errors=True)


def _use(mechanism: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``mechanism`` (None: ``--unconfined``); the choice is forgotten again after the test."""
    if mechanism is None:
        monkeypatch.setattr(confine, "_unconfined_asked", True)
    else:
        monkeypatch.setenv(confine.MECHANISM_ENV, mechanism)
    monkeypatch.setattr(confine, "_chosen", None)


def _require(mechanism: str) -> None:
    launcher = confine.Launcher(mechanism, shutil.which(mechanism))
    problem = f"no {mechanism} on PATH" if launcher.tool is None else confine.self_test(launcher)
    if problem is not None:
        if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
            pytest.fail(f"CODEX_HARNESS_REQUIRE_REAL=1 but {mechanism} cannot confine here: {problem}")
        pytest.skip(f"{mechanism} cannot confine here: {problem}")


def _probe(send: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"send": send, "params": params}


def escape_scenario(places: Places) -> str:
    """The scenario as a file would say it: every reach outside, then the same inside."""
    secret = str(places.secret)
    probes = []
    command_parts = []
    for outside in places.outside:
        data = base64.b64encode(b"written by fs/writeFile").decode()
        probes.append(_probe("fs/writeFile", {"path": f"{outside}/fs.txt", "dataBase64": data}))
        probes.append(_probe("command/exec", {"command": ["sh", "-c", f"id > {outside}/exec.txt"]}))
        command_parts.append(f"id > {outside}/tool.txt")
    probes += [
        _probe("fs/readFile", {"path": secret}),
        _probe("command/exec", {"command": ["cat", secret]}),
        # the positive controls, same kinds of steps
        _probe("fs/writeFile", {"path": "${cwd}/inside-fs.txt", "dataBase64": base64.b64encode(b"inside").decode()}),
        _probe("fs/readFile", {"path": "${cwd}/inside-fs.txt"}),
        _probe("command/exec", {"command": ["sh", "-c", "id > ${cwd}/inside-exec.txt && cat ${cwd}/inside-exec.txt"]}),
        _probe("fs/readFile", {"path": "/etc/hostname"}),
    ]
    tool = "; ".join([*command_parts, f"cat {secret}", "id > inside-tool.txt", "cat inside-tool.txt"])
    document = {
        "name": "confined_escape",
        "description": "probes and a tool call with danger-full-access try to write outside and read a secret",
        "config": {"sandbox": "danger-full-access"},
        "client": {"probe": probes},
        "turns": [
            {
                "input": "Run it",
                "responses": [
                    {"items": [{"type": "command", "command": tool, "call_id": "call_escape", "output": ""}]},
                    {"items": [{"type": "message", "text": "Done."}]},
                ],
            }
        ],
        "expect": {
            "server_trace": "none",
            "client_trace": "none",
            "turns": [{"status": "completed", "server_status": "completed"}],
        },
    }
    return tomli_w.dumps(document)


def play(places: Places, tmp_path: Path, codex_bin: Path) -> ScenarioRun:
    scenario = loads(escape_scenario(places), "confined_escape.toml")
    return run_one(scenario, "real", codex=codex_bin, work_root=tmp_path)


def answers(run: ScenarioRun) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(method, params, answer) of every request the client sent, in order (answer: the whole frame)."""
    assert run.record is not None
    sent = [e.frame for e in run.record.wire if e.dir == "c2s" and e.frame and "method" in e.frame and "id" in e.frame]
    got = {e.frame["id"]: e.frame for e in run.record.wire if e.dir == "s2c" and e.frame and "method" not in e.frame}
    return [(f["method"], f.get("params") or {}, got.get(f["id"], {})) for f in sent]


def tool_output(run: ScenarioRun) -> str:
    assert run.record is not None
    for entry in run.record.wire:
        frame = entry.frame or {}
        item = (frame.get("params") or {}).get("item") or {}
        if frame.get("method") == "item/completed" and item.get("id") == "call_escape":
            return str(item.get("aggregatedOutput"))
    raise AssertionError("the tool call never completed")


def outside_files(places: Places) -> list[str]:
    return sorted(str(p) for d in places.outside for p in d.iterdir())


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_confined_session_writes_nothing_outside_and_reads_no_secret(
    mechanism: str, places: Places, tmp_path: Path, codex_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require(mechanism)
    _use(mechanism, monkeypatch)
    run = play(places, tmp_path, codex_bin)
    assert run.skipped is None, run.skipped
    assert run.record is not None and run.record.meta.get("confinement") == mechanism
    # positive controls: the session ran, its turn completed, every check holds
    failed = [f"{c.contract} / {c.name}: {c.detail}" for c in run.checks if c.status == "fail"]
    assert not failed, failed
    asked = answers(run)
    for method in ("thread/start", "turn/start"):
        answer = next((a for m, _, a in asked if m == method), {})
        assert "result" in answer, (method, answer)
    by_path = {(m, str(p.get("path") or p.get("command"))): a for m, p, a in asked}
    inside_read = next(a for m, p, a in asked if m == "fs/readFile" and str(p.get("path")).endswith("inside-fs.txt"))
    assert base64.b64decode(inside_read["result"]["dataBase64"]) == b"inside", inside_read
    inside_exec = next(a for m, p, a in asked if m == "command/exec" and "inside-exec" in str(p.get("command")))
    assert inside_exec["result"]["stdout"].startswith("uid="), inside_exec
    hostname = next(a for m, p, a in asked if m == "fs/readFile" and p.get("path") == "/etc/hostname")
    assert base64.b64decode(hostname["result"]["dataBase64"]) == Path("/etc/hostname").read_bytes()
    output = tool_output(run)
    assert "uid=" in output, output  # the tool call's inside write was read back
    # nothing outside, no secret
    assert outside_files(places) == []
    secret_read = by_path[("fs/readFile", str(places.secret))]
    assert "result" not in secret_read, secret_read
    assert places.token not in str(asked) and places.token not in output
    assert run.record is not None and places.token not in run.record.stderr_tail


def test_unconfined_the_same_session_writes_outside_and_reads_the_secret(
    places: Places, tmp_path: Path, codex_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above bite: without the confinement (``--unconfined``, the old behaviour) all of it gets out."""
    _use(None, monkeypatch)
    run = play(places, tmp_path, codex_bin)
    assert run.record is not None and run.record.meta.get("confinement") == confine.UNCONFINED
    written = outside_files(places)
    assert written == sorted(str(d / name) for d in places.outside for name in ("exec.txt", "fs.txt", "tool.txt"))
    assert places.token in str(answers(run)) and places.token in tool_output(run)


ESCAPE = (
    "umount -l /tmp; umount -l /home; umount -l /run; umount -l {home}; mount -o remount,rw,bind /; "
    "mount -o remount,rw /"
)


def root_escape_scenario(places: Places) -> str:
    """What a scenario (or an outside client) can ask the binary for: ``command/exec`` with
    ``sandboxPolicy: dangerFullAccess`` running a root's escape (unmount the private ``/tmp`` and the masks,
    remount ``/`` read-write, write outside, read the secret), and a model tool call doing the same. Each
    first checks it is in a mount namespace not the host's (unconfined, it must never remount the host)."""
    home = places.secret.parent.parent
    escape = ESCAPE.format(home=home)
    writes = "; ".join(f"echo x > {d}/escaped-{{how}}.txt" for d in places.outside)
    body = (
        f'[ "$(readlink /proc/self/ns/mnt)" = "{os.readlink("/proc/self/ns/mnt")}" ] && exit 9; '
        f"({escape}) 2>&1; ({writes}) 2>&1; cat {places.secret}; "
        "grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/$$/status; id; "
        "echo inside > ${{cwd}}/escaped-{how}-inside.txt && cat ${{cwd}}/escaped-{how}-inside.txt"
    )
    full = {"type": "dangerFullAccess"}
    exec_body = body.replace("{how}", "exec").replace("${{cwd}}", "${cwd}")
    tool_body = body.replace("{how}", "tool").replace("${{cwd}}", ".")
    document = {
        "name": "confined_root_escape",
        "description": "command/exec and a tool call with danger-full-access try a root's escape",
        "config": {"sandbox": "danger-full-access"},
        "client": {"probe": [_probe("command/exec", {"command": ["sh", "-c", exec_body], "sandboxPolicy": full})]},
        "turns": [
            {
                "input": "Run it",
                "responses": [
                    {"items": [{"type": "command", "command": tool_body, "call_id": "call_escape", "output": ""}]},
                    {"items": [{"type": "message", "text": "Done."}]},
                ],
            }
        ],
        "expect": {
            "server_trace": "none",
            "client_trace": "none",
            "turns": [{"status": "completed", "server_status": "completed"}],
        },
    }
    return tomli_w.dumps(document)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_root_inside_cannot_unmount_or_remount_its_way_out(
    mechanism: str, places: Places, tmp_path: Path, codex_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old: as root (CI), ``command/exec`` with dangerFullAccess ran with every capability
    (``CapEff 000001fffeffffff``), unmounted the private /tmp, remounted / read-write and wrote on the host. Now
    the binary and all it starts have no capability and cannot gain one; the same command writes inside."""
    _require(mechanism)
    _use(mechanism, monkeypatch)
    run = run_one(loads(root_escape_scenario(places), "escape.toml"), "real", codex=codex_bin, work_root=tmp_path)
    assert run.skipped is None, run.skipped
    failed = [f"{c.contract} / {c.name}: {c.detail}" for c in run.checks if c.status == "fail"]
    assert not failed, failed
    exec_answer = next(a for m, _, a in answers(run) if m == "command/exec")
    said = {"exec": str(exec_answer.get("result", {}).get("stdout")), "tool": tool_output(run)}
    for how, out in said.items():
        assert out.rstrip().endswith("inside"), (how, out)  # positive control: it wrote and read the work directory
        assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out, (how, out)
        assert "NoNewPrivs:\t1" in out, (how, out)
        assert places.token not in out, (how, out)
    assert outside_files(places) == []


NESTED = """
name = "nested_sandbox"
description = "the binary's own read-only sandbox still denies a write inside our confinement"

[config]
sandbox = "{sandbox}"

[[turns]]
input = "Write a file"

[[turns.responses]]

[[turns.responses.items]]
type = "command"
command = "(echo in > inside.txt) 2>&1; echo rc=$?"
call_id = "call_escape"
output = ""

[[turns.responses]]

[[turns.responses.items]]
type = "message"
text = "Done."

[expect]
server_trace = "none"
client_trace = "none"

[[expect.turns]]
status = "completed"
"""


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_binarys_own_sandbox_still_works_nested(
    mechanism: str, tmp_path: Path, codex_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our confinement lets the work directory be written; the binary's read-only sandbox (bubblewrap, inside
    ours) must still refuse it, and its workspace-write sandbox allow it."""
    _require(mechanism)
    _use(mechanism, monkeypatch)
    seen = {}
    for sandbox in ("read-only", "workspace-write"):
        run = run_one(loads(NESTED.format(sandbox=sandbox), "nested.toml"), "real", codex=codex_bin, work_root=tmp_path)
        assert run.skipped is None, run.skipped
        seen[sandbox] = tool_output(run)
    assert "Read-only file system" in seen["read-only"] and "rc=1" in seen["read-only"], seen
    assert seen["workspace-write"].strip() == "rc=0", seen
