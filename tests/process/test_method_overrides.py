"""``[[methods]]``: scripted answers to any client request, validated at load, honoured by the fakes."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.virtual import VirtualServer

from contracts import scenario_file
from contracts.scenario_file import ScenarioError

HEAD = 'name = "m"\ndescription = "x"\n[[turns]]\ninput = "hi"\n'


def _load(methods: str):
    return scenario_file.loads(HEAD + methods, source="m.toml")


def _session(methods: str) -> VirtualServer:
    server = VirtualServer(_load(methods))
    server.send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    return server


def _answer(server: VirtualServer, rid: int, within_ms: int = 10_000):
    return server.run_until(lambda f: f.get("id") == rid and "method" not in f, within_ms=within_ms)


def test_a_scripted_result_replaces_the_fakes_answer_and_round_trips() -> None:
    text = '[[methods]]\nname = "model/list"\nresult = { data = [], nextCursor = "p2" }\n'
    server = _session(text)
    server.send({"id": 1, "method": "model/list", "params": {}})
    assert _answer(server, 1) == {"id": 1, "result": {"data": [], "nextCursor": "p2"}}
    again = scenario_file.loads(scenario_file.dumps(_load(text)), source="m.toml")
    assert again.methods == _load(text).methods


def test_a_scripted_error_keeps_its_data() -> None:
    server = _session(
        '[[methods]]\nname = "account/read"\nerror = { code = -32000, message = "no", data = { a = 1 } }\n'
    )
    server.send({"id": 1, "method": "account/read", "params": {}})
    assert _answer(server, 1) == {"error": {"code": -32000, "message": "no", "data": {"a": 1}}, "id": 1}


def test_delay_alone_delays_the_fakes_own_answer_in_scripted_time() -> None:
    server = _session('[[methods]]\nname = "config/read"\ndelay_ms = 5000\n')
    start = server.now_ms
    server.send({"id": 1, "method": "config/read", "params": {}})
    assert _answer(server, 1, within_ms=4999) is None
    answer = _answer(server, 1)
    assert answer is not None and "config" in answer["result"] and server.now_ms - start == 5000


def test_no_answer_leaves_one_request_unanswered_and_the_server_up() -> None:
    server = _session('[[methods]]\nname = "config/read"\nfault = "no_answer"\nn = 1\n')
    server.send({"id": 1, "method": "config/read", "params": {}})
    server.send({"id": 2, "method": "config/read", "params": {}})
    assert _answer(server, 2) is not None
    assert _answer(server, 1, within_ms=60_000) is None and server.exit_code is None


def test_crash_before_answering_the_nth_request() -> None:
    server = _session('[[methods]]\nname = "skills/list"\nfault = { kind = "crash", exit_code = 7 }\nn = 2\n')
    server.send({"id": 1, "method": "skills/list", "params": {}})
    server.send({"id": 2, "method": "skills/list", "params": {}})
    assert _answer(server, 1) is not None and _answer(server, 2) is None
    assert server.exit_code == 7 and server.crashed


def test_overrides_make_the_scenario_fake_only() -> None:
    ok, reason = _load('[[methods]]\nname = "model/list"\nfault = "no_answer"\n').supports("real")
    assert not ok and "[[methods]]" in reason


@pytest.mark.parametrize(
    ("methods", "key"),
    [
        ('[[methods]]\nname = "no/such"\nresult = {}\n', "methods[0].name"),
        ('[[methods]]\nname = "model/list"\nresult = { data = 5 }\n', "methods[0].result"),
        ('[[methods]]\nname = "model/list"\nresult = {}\n', "methods[0].result"),
        ('[[methods]]\nname = "model/list"\nerror = { message = "x" }\n', "methods[0].error.code"),
        ('[[methods]]\nname = "model/list"\nerror = { code = 1 }\n', "methods[0].error.message"),
        ('[[methods]]\nname = "model/list"\nfault = "delayed_completion"\n', "methods[0].fault.at"),
        ('[[methods]]\nname = "model/list"\nfault = { kind = "crash", exit_code = 256 }\n', "exit_code"),
        ('[[methods]]\nname = "model/list"\nresult = {}\nerror = { code = 1, message = "x" }\n', "error"),
        ('[[methods]]\nname = "model/list"\n', "methods[0].result"),
        ('[[methods]]\nname = "model/list"\ndelay_ms = -1\n', "delay_ms"),
        ('[[methods]]\nname = "model/list"\nresult = {}\nbogus = 1\n', "bogus"),
        ('[[turns.faults]]\nkind = "crash"\nat = "request"\n', "at"),
    ],
)
def test_invalid_entries_are_refused_at_load(methods: str, key: str) -> None:
    with pytest.raises(ScenarioError) as err:
        _load(methods)
    assert key in str(err.value)


def test_a_declared_schema_violation_loads_and_is_sent_as_written() -> None:
    server = _session('[[methods]]\nname = "model/list"\nresult = { data = 5 }\nschema_violation = "a bad page"\n')
    server.send({"id": 1, "method": "model/list", "params": {}})
    assert _answer(server, 1) == {"id": 1, "result": {"data": 5}}


def test_fake_codex_refuses_an_invalid_override_with_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "bad.toml"
    path.write_text(HEAD + '[[methods]]\nname = "model/list"\nresult = { data = 5 }\n')
    proc = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--scenario", str(path)],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"methods[0].result" in proc.stderr and b"Traceback" not in proc.stderr


def test_a_real_only_scenario_with_overrides_is_refused() -> None:
    text = 'name = "m"\ndescription = "x"\ntargets = ["real"]\n[[turns]]\ninput = "hi"\n'
    with pytest.raises(ScenarioError, match=r"\[\[methods\]\] answers only a fake produces"):
        scenario_file.loads(text + '[[methods]]\nname = "model/list"\nfault = "no_answer"\n', source="m.toml")


_REACHED = """
[client]
request_timeout_ms = 2000

[[client.probe]]
at = "end"
send = "skills/list"
params = {}
"""
_NEVER_CALLED = """
[[methods]]
name = "skills/list"
fault = "no_answer"

[[methods]]
name = "model/list"
result = { data = [], nextCursor = "x" }

[[methods]]
name = "config/read"
fault = { kind = "crash", exit_code = 7 }
"""


def _failed(text: str, target: str) -> list[tuple[str, str, str]]:
    from harness.runner import run_one

    run = run_one(scenario_file.loads(text, source="m.toml"), target)
    assert run.skipped is None, run.skipped
    return [(c.contract, c.name, c.detail) for c in run.checks if c.status == "fail"]


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_a_methods_fault_on_a_method_never_called_fails_the_scenario_check(target: str) -> None:
    """The ledger holds [[methods]] faults too: neither skills/list nor config/read is ever asked, so both
    faults are reported as never struck (a scenario error), and nothing is blamed on the client."""
    failed = _failed(HEAD + _NEVER_CALLED, target)
    assert [(c, n) for c, n, _ in failed] == [("scenario", "fault_not_struck")], failed
    detail = failed[0][2]
    assert "[[methods]] skills/list: no_answer" in detail and "[[methods]] config/read: crash" in detail, detail
    assert "model/list" not in detail  # an answer, not a fault


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_a_methods_fault_on_a_method_the_client_calls_strikes(target: str) -> None:
    methods = '\n[[methods]]\nname = "skills/list"\nfault = "no_answer"\n'
    text = HEAD.replace("[[turns]]", _REACHED + "\n[[turns]]") + methods
    failed = _failed(text, target)
    assert not [f for f in failed if f[1] == "fault_not_struck"], failed


def test_the_runner_lists_methods_faults_in_meta() -> None:
    from harness.runner import scenario_faults

    listed = scenario_faults(_load(_NEVER_CALLED))
    assert [(f["turn"], f["index"], f["method"], f["kind"]) for f in listed] == [
        (-1, 0, "skills/list", "no_answer"),
        (-1, 2, "config/read", "crash"),
    ]


def test_the_report_diagram_places_a_methods_fault_after_its_request() -> None:
    from harness.html.diagram import fault_positions
    from harness.runner import run_one

    text = HEAD.replace("[[turns]]", _REACHED + "\n[[turns]]") + _NEVER_CALLED
    run = run_one(scenario_file.loads(text, source="m.toml"), "fake")
    assert run.record is not None
    placed = fault_positions(run.record)
    [where] = [p for p, t in placed.items() if "⚡ no_answer at request skills/list ([[methods]])" in t]
    assert run.record.wire[where].frame["method"] == "skills/list"  # the ledger: struck on reading it
    # config/read was never asked: drawn at the session's end, saying so
    never = [p for p, t in placed.items() if "⚡ crash at request config/read ([[methods]]): never struck" in t]
    assert never == [max(p for p, e in enumerate(run.record.wire) if e.dir != "note")]
