"""The fake's surface methods stay inside the session: no host commands, no writes, reads confined and capped.

Also the skeleton comparison itself (contracts.skeleton): equal for answers that differ only in values,
different for a missing key, a null where a value was, an empty array where one had entries.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contracts.skeleton import answer_skeleton, differences, skeleton
from fake_server.catalogue import load_builtin
from fake_server.engine import Engine
from fake_server.surface import fs_search
from fake_server.virtual import VirtualServer


def _server(workdir: Path) -> VirtualServer:
    server = VirtualServer(load_builtin("plain"))
    server.engine = Engine(load_builtin("plain"), cwd=str(workdir), codex_home=str(workdir.parent / "home"))
    server.send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    return server


def _ask(server: VirtualServer, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    server.send({"id": rid, "method": method, "params": params})
    answer = server.run_until(lambda f: f.get("id") == rid and "method" not in f)
    assert answer is not None
    return answer


def test_command_exec_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "made-by-exec"
    answer = _ask(_server(tmp_path), 1, "command/exec", {"command": ["touch", str(target)]})
    assert answer["result"] == {"exitCode": 0, "stdout": "", "stderr": ""}
    assert not target.exists()


def test_writes_stay_in_memory_and_reads_see_them(tmp_path: Path) -> None:
    server = _server(tmp_path)
    path = str(tmp_path / "new.txt")
    assert (
        _ask(server, 1, "fs/writeFile", {"path": path, "dataBase64": base64.b64encode(b"hi").decode()})["result"] == {}
    )
    assert not os.path.exists(path)
    assert _ask(server, 2, "fs/readFile", {"path": path})["result"] == {"dataBase64": "aGk="}
    (tmp_path / "real.txt").write_text("x")
    assert _ask(server, 3, "fs/remove", {"path": str(tmp_path / "real.txt")})["result"] == {}
    assert (tmp_path / "real.txt").exists()
    assert _ask(server, 4, "fs/readFile", {"path": str(tmp_path / "real.txt")})["error"]["code"] == -32603
    names = [e["fileName"] for e in _ask(server, 5, "fs/readDirectory", {"path": str(tmp_path)})["result"]["entries"]]
    assert "new.txt" in names and "real.txt" not in names


def test_reads_outside_the_work_directory_are_missing(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (workdir / "link").symlink_to(secret)
    server = _server(workdir)
    for n, path in enumerate((str(secret), str(workdir / "link"), str(workdir / ".." / "secret.txt")), start=1):
        answer = _ask(server, n, "fs/readFile", {"path": path})
        assert answer["error"] == {"code": -32603, "message": fs_search.NOT_FOUND}, path
    found = _ask(server, 9, "fuzzyFileSearch", {"query": "secret", "roots": [str(tmp_path)]})
    assert found["result"] == {"files": []}


def test_reads_are_capped(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(fs_search, "MAX_READ_BYTES", 8)
    (tmp_path / "big.txt").write_text("0123456789")
    answer = _ask(_server(tmp_path), 1, "fs/readFile", {"path": str(tmp_path / "big.txt")})
    assert answer["error"]["code"] == -32600 and "cap" in answer["error"]["message"]


def test_search_results_are_capped(tmp_path: Path) -> None:
    for i in range(fs_search.MAX_SEARCH_RESULTS + 10):
        (tmp_path / f"file{i}.txt").write_text("")
    answer = _ask(_server(tmp_path), 1, "fuzzyFileSearch", {"query": "file", "roots": [str(tmp_path)]})
    assert len(answer["result"]["files"]) == fs_search.MAX_SEARCH_RESULTS


# --- skeletons ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=20,
)


def _revalue(value: Any) -> Any:
    """Same structure, other scalar values of the same JSON types."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [_revalue(v) for v in value]
    if isinstance(value, dict):
        return {k: _revalue(v) for k, v in value.items()}
    return value


@given(JSON)
def test_values_do_not_change_a_skeleton(value: Any) -> None:
    assert skeleton(_revalue(value)) == skeleton(value)
    assert differences(skeleton(value), skeleton(_revalue(value))) == []


@given(st.dictionaries(st.text(min_size=1, max_size=4), JSON, min_size=1, max_size=4))
def test_a_missing_key_or_a_null_or_an_empty_array_is_a_difference(value: dict[str, Any]) -> None:
    key = next(iter(value))
    dropped = {k: v for k, v in value.items() if k != key}
    assert differences(answer_skeleton({"result": value}), answer_skeleton({"result": dropped}))
    if value[key] is not None:
        assert differences(skeleton(value), skeleton({**value, key: None}))
    assert differences(skeleton({"a": [1]}), skeleton({"a": []}))
    assert differences(answer_skeleton({"result": {"a": 1}}), answer_skeleton({"result": {}}))


def test_error_messages_compare_with_ids_and_paths_normalised() -> None:
    real = {"error": {"code": -32600, "message": "thread not found: 01a23106-c369-72c3-b602-252e3b3243f7"}}
    fake = {"error": {"code": -32600, "message": "thread not found: 01a22b4c-2808-78e5-b50e-72ec5efe4b05"}}
    assert differences(answer_skeleton(real), answer_skeleton(fake)) == []
    other = {"error": {"code": -32600, "message": "thread not loaded: 01a22b4c-2808-78e5-b50e-72ec5efe4b05"}}
    assert differences(answer_skeleton(real), answer_skeleton(other))
    assert answer_skeleton({"error": {"code": 1, "message": "/tmp/x/a is bad"}}, [("/tmp/x", "/RUN")]) == (
        answer_skeleton({"error": {"code": 1, "message": "/RUN/a is bad"}})
    )


def test_wrong_param_types_are_refused_never_an_internal_error(tmp_path: Path) -> None:
    """Every method, every top-level param replaced by each JSON type: a -32600 answer or a valid one,
    never a handler crash (-32603 Internal error, a traceback on stderr) or silence."""
    from contracts import schema_store
    from contracts.protocol_index import Union, build_index
    from fake_server.methods import CLIENT_METHODS
    from fake_server.surface.schema_answer import _instance

    bundle = schema_store.load_bundle("0.171.0", True)
    index = build_index(bundle).methods[Union.CLIENT_REQUEST]
    definitions = bundle["ClientRequest.json"]["definitions"]
    server = VirtualServer(load_builtin("plain"))
    server.engine = Engine(load_builtin("plain"), cwd=str(tmp_path), codex_home=str(tmp_path))
    caps = {"experimentalApi": True}
    server.send(
        {
            "id": "i",
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}, "capabilities": caps},
        }
    )
    server.send({"id": "s", "method": "thread/start", "params": {}})
    thread_id = next(f for f in server.frames if f.get("id") == "s")["result"]["thread"]["id"]
    crashes = []
    n = 0
    for method in CLIENT_METHODS:
        entry = index.get(method)
        if entry is None or method in ("initialize", "turn/start", "turn/steer"):
            continue
        base = (_instance(definitions[entry.params_refs[0]], definitions, 0) if entry.params_refs else None) or {}
        if "threadId" in base:
            base["threadId"] = thread_id
        for key in list(base) or ["x"]:
            for bad in (5, None, [], {}, "", True):
                n += 1
                rid = f"r{n}"
                server.send({"id": rid, "method": method, "params": {**base, key: bad}})
                answer = server.run_until(lambda f, rid=rid: f.get("id") == rid and "method" not in f, within_ms=5000)
                if answer is None or answer.get("error", {}).get("message") == "Internal error":
                    crashes.append((method, key, bad))
        server.settle(100)
    assert crashes == [] and not any("Traceback" in line for line in server.stderr), crashes[:10]
