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
from support import paths
from support.virtual import VirtualServer

from contracts.skeleton import answer_skeleton, differences, skeleton
from fake_server.catalogue import load_builtin
from fake_server.engine import Engine
from fake_server.surface import fs_search


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


def _walks(monkeypatch: Any) -> list[str]:
    """The folders the search walks, counted (os.walk as fs_search calls it)."""
    walked: list[str] = []
    real_walk = os.walk

    def counting(top: str, *args: Any, **kwargs: Any) -> Any:
        walked.append(top)
        return real_walk(top, *args, **kwargs)

    monkeypatch.setattr(fs_search.os, "walk", counting)
    return walked


def test_search_takes_each_root_once_as_the_real_binary_does(tmp_path: Path, monkeypatch: Any) -> None:
    """0.171.0 answered 64 copies of one root with that root's matches once; 200 copies made the fake walk
    the folder 200 times (33 s on a big one)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "hello.txt").write_text("")
    server = _server(tmp_path)
    walked = _walks(monkeypatch)
    one = _ask(server, 1, "fuzzyFileSearch", {"query": "hel", "roots": [str(tmp_path)]})["result"]
    spellings = [str(tmp_path), f"{tmp_path}/", f"{tmp_path}//.", str(tmp_path)] * 50
    many = _ask(server, 2, "fuzzyFileSearch", {"query": "hel", "roots": spellings})["result"]
    assert many == one and len(walked) == 2  # one walk each, the answer of one root
    other = f"{tmp_path}/sub/.."  # not the same root to 0.171.0 (nothing resolved): its matches again
    both = _ask(server, 3, "fuzzyFileSearch", {"query": "hel", "roots": [str(tmp_path), other]})["result"]
    assert [f["root"] for f in both["files"]] == [str(tmp_path), other]


def test_search_looks_at_a_bounded_number_of_entries_over_all_its_roots(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(fs_search, "MAX_SEARCH_FILES", 30)
    monkeypatch.setattr(fs_search, "MAX_SEARCH_RESULTS", 1000)
    roots = []
    for d in range(10):
        (tmp_path / f"d{d}").mkdir()
        roots.append(str(tmp_path / f"d{d}"))
        for i in range(10):
            (tmp_path / f"d{d}" / f"file{i}").write_text("")
    answer = _ask(_server(tmp_path), 1, "fuzzyFileSearch", {"query": "file", "roots": roots})
    assert 0 < len(answer["result"]["files"]) <= 30  # not 100: the budget is the search's, not each root's


def test_search_with_too_many_roots_is_refused_with_the_cap(tmp_path: Path) -> None:
    roots = [f"{tmp_path}/r{i}" for i in range(fs_search.MAX_SEARCH_ROOTS + 1)]
    answer = _ask(_server(tmp_path), 1, "fuzzyFileSearch", {"query": "x", "roots": roots})
    assert answer["error"]["code"] == -32600 and str(fs_search.MAX_SEARCH_ROOTS) in answer["error"]["message"]
    answer = _ask(_server(tmp_path), 2, "fuzzyFileSearch", {"query": "x", "roots": roots[:-1]})
    assert answer["result"] == {"files": []}  # at the cap: answered


def _write(server: VirtualServer, rid: int, path: Path, data: bytes) -> dict[str, Any]:
    return _ask(server, rid, "fs/writeFile", {"path": str(path), "dataBase64": base64.b64encode(data).decode()})


def test_the_overlay_is_a_bounded_disk_and_full_reads_as_0_171_0_s_full_disk(tmp_path: Path, monkeypatch: Any) -> None:
    """200 writes of 4 MiB held 869 MB; past the caps a write gets what 0.171.0 answered with its work
    directory on a full tmpfs."""
    monkeypatch.setattr(fs_search, "MAX_OVERLAY_BYTES", 10)
    monkeypatch.setattr(fs_search, "MAX_OVERLAY_ENTRIES", 4)
    full = {"code": -32603, "message": "No space left on device (os error 28)"}
    server = _server(tmp_path)
    assert _write(server, 1, tmp_path / "a", b"12345678")["result"] == {}
    assert _write(server, 2, tmp_path / "b", b"123")["error"] == full  # 11 bytes
    assert _write(server, 3, tmp_path / "a", b"1234567890")["result"] == {}  # a rewrite frees what it replaces
    copy = {"sourcePath": str(tmp_path / "a"), "destinationPath": str(tmp_path / "c")}
    assert _ask(server, 4, "fs/copy", copy)["error"] == full
    assert _ask(server, 5, "fs/remove", {"path": str(tmp_path / "a")})["result"] == {}
    assert _write(server, 6, tmp_path / "b", b"123")["result"] == {}  # the removed file's bytes are free again
    for n in (7, 8):
        assert _ask(server, n, "fs/createDirectory", {"path": str(tmp_path / f"dir{n}")})["result"] == {}
    assert _ask(server, 9, "fs/createDirectory", {"path": str(tmp_path / "dir9")})["error"] == full  # 5 paths
    assert _ask(server, 10, "fs/readFile", {"path": str(tmp_path / "b")})["result"] == {"dataBase64": "MTIz"}


def test_the_overlay_caps_match_the_docs() -> None:
    assert fs_search.MAX_OVERLAY_BYTES == 64 * 1024 * 1024 and fs_search.MAX_OVERLAY_ENTRIES == 10_000
    docs = (paths.REPO / "docs" / "real-binary.md").read_text(encoding="utf-8")
    assert "10,000 paths and 64 MiB" in docs and "more than 1,000 distinct" in docs


def test_watches_are_capped(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(fs_search, "MAX_WATCHES", 2)
    server = _server(tmp_path)
    for n in (1, 2):
        assert "result" in _ask(server, n, "fs/watch", {"path": str(tmp_path), "watchId": f"w{n}"})
    refused = _ask(server, 3, "fs/watch", {"path": str(tmp_path), "watchId": "w3"})
    assert refused["error"]["code"] == -32600 and "at most 2 watches" in refused["error"]["message"]


def test_a_refused_request_is_freed_at_once(tmp_path: Path) -> None:
    """A refusal kept its traceback, which held the call and its params: a cycle only the collector frees,
    and it seldom runs when the objects are few and large (refused writes piled up to gigabytes)."""
    import gc
    import tracemalloc

    server = _server(tmp_path)
    bad = "!" * (1024 * 1024)  # not base64: refused
    _ask(server, 99, "fs/writeFile", {"path": str(tmp_path / "x"), "dataBase64": "!"})  # caches filled first
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for n in range(20):
            answer = _ask(server, n + 1, "fs/writeFile", {"path": str(tmp_path / "x"), "dataBase64": bad})
            assert answer["error"]["code"] == -32600
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert held < 8 * 1024 * 1024, held  # 20 MiB of params when each refusal kept its call


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
    from fake_server.profiles import default as default_profile
    from fake_server.surface.schema_answer import smallest_instance

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
    for method in default_profile().methods.client:
        entry = index.get(method)
        if entry is None or method in ("initialize", "turn/start", "turn/steer"):
            continue
        base = (smallest_instance(definitions[entry.params_refs[0]], definitions) if entry.params_refs else None) or {}
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
