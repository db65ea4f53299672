"""What a server asks, runs and reports under each approval policy, sandbox and approvals reviewer a client sets,
observed the same way on any binary: the real ``codex`` (offline, confined, through
:func:`harness.targets.real.real_target`) or ``fake-codex``.

Each case is one server process with one thread, configured one way (``approvalPolicy`` × ``sandbox`` ×
``approvalsReviewer``, given in ``thread/start``, as ``turn/start`` overrides, or in ``config.toml``), that plays
the same turns, one tool call each: a plain command that writes in the work directory, the same command asking
for escalation (``sandbox_permissions: "require_escalated"``, as a scenario's ``approval = true`` command
does), a patch inside the work directory and a patch outside it. The client accepts every approval. Each turn is
reduced to what a client relies on: the server requests (method and, for a command, whether it carries a
reason), the tool item's status, whether the command's file / the patched file exists afterwards, how many model
requests the turn made, and its status.

``tests/data/real/<version>/policy/observed.json`` is the real binary's; ``tests/process/test_policy_observed.py``
compares the fake with it on every run, and the release folder's ``policy.json`` (the table the fake plays) is
derived from it (``harness.learn.policy``).

Record again: ``.venv/bin/python -m harness.learn.policy_observe --codex .tools/node_modules/.bin/codex
--out tests/data/real/<version>/policy/observed.json``; ``release learn`` plays the ``thread:`` cases on the binary it
learns and writes the table into the release folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import trio

from contracts.exitcodes import Finding
from contracts.scenario import (
    CommandItem,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    Scenario,
    ServerConfig,
    TurnScript,
)
from harness.learn.observe_io import LineConn, write_observed

STEP_S = 60.0
GRANULAR = {"granular": {"sandbox_approval": True, "rules": True, "mcp_elicitations": True}}
GRANULAR_NO_SANDBOX = {"granular": {"sandbox_approval": False, "rules": True, "mcp_elicitations": True}}
POLICIES: dict[str, Any] = {
    "untrusted": "untrusted",
    "on-request": "on-request",
    "never": "never",
    "granular": GRANULAR,
    "granular-no-sandbox-approval": GRANULAR_NO_SANDBOX,
}
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
REVIEWERS = ("user", "auto_review")
_TURN_SANDBOX = {
    "read-only": {"type": "readOnly"},
    "workspace-write": {"type": "workspaceWrite"},
    "danger-full-access": {"type": "dangerFullAccess"},
}
#: The turns every case plays (name -> the tool call); the file each leaves behind tells whether it ran.
ACTIONS = ("command", "command_escalated", "patch_inside", "patch_outside")
AFTER = ModelResponse(items=(MessageItem(text="done", deltas=("done",)),))


def _tool(action: str, outside: Path) -> CommandItem | FileChangeItem:
    if action == "command":
        return CommandItem(command="echo ran > ran_command.txt", call_id="call_cmd", output="")
    if action == "command_escalated":
        return CommandItem(command="echo ran > ran_escalated.txt", call_id="call_esc", approval=True, output="")
    if action == "patch_inside":
        return FileChangeItem(path="patched_inside.txt", content="inside\n", call_id="call_pin")
    return FileChangeItem(path=str(outside / "patched_outside.txt"), content="outside\n", call_id="call_pout")


def _written(action: str, workdir: Path, outside: Path) -> Path:
    return {
        "command": workdir / "ran_command.txt",
        "command_escalated": workdir / "ran_escalated.txt",
        "patch_inside": workdir / "patched_inside.txt",
        "patch_outside": outside / "patched_outside.txt",
    }[action]


def scenario(outside: Path) -> Scenario:
    """One turn per action: the tool call, then a message for each further model request."""
    turns = tuple(
        TurnScript(input=f"do {a}", responses=(ModelResponse(items=(_tool(a, outside),)), AFTER, AFTER))
        for a in ACTIONS
    )
    # on-request: what the real binary plays when nothing sets a policy (the fake in process has no home to read)
    config = ServerConfig(approval_policy="on-request")
    return Scenario(name="policy_observe", description="policy observation", turns=turns, config=config)


@dataclass(frozen=True, slots=True)
class Case:
    policy: str  # a key of POLICIES
    sandbox: str
    reviewer: str
    where: str  # thread | turn | config (config.toml) | flag (``-c`` on the command line)

    @property
    def name(self) -> str:
        return f"{self.where}: {self.policy} / {self.sandbox} / {self.reviewer}"


def cases() -> list[Case]:
    out = [Case(p, s, r, "thread") for p in POLICIES for s in SANDBOXES for r in REVIEWERS]
    out += [Case(p, s, "user", "turn") for p in POLICIES for s in SANDBOXES]
    out += [Case(p, s, "user", "config") for p in ("on-request", "never") for s in SANDBOXES]
    # config.toml refuses "untrusted" (the real binary exits); "on-failure" is no longer in the schema's policies
    out += [Case("untrusted", "workspace-write", "user", where) for where in ("config", "flag")]
    out += [Case("on-failure", s, "user", "config") for s in SANDBOXES]
    out += [Case(p, s, "auto_review", "config") for p in ("on-request",) for s in ("read-only",)]
    out += [Case(p, "workspace-write", r, "flag") for p in ("on-request", "never") for r in REVIEWERS]
    return out


def config_lines(case: Case) -> dict[str, Any]:
    """config.toml keys for a ``config`` case (``untrusted`` is refused there by the real binary)."""
    policy = POLICIES.get(case.policy, case.policy)
    return {"approval_policy": policy, "sandbox_mode": case.sandbox, "approvals_reviewer": case.reviewer}


def flag_args(case: Case) -> tuple[str, ...]:
    """``-c`` overrides for a ``flag`` case (TOML values)."""
    if case.where != "flag":
        return ()
    out: list[str] = []
    for key, value in config_lines(case).items():
        out += ["-c", f"{key}={orjson.dumps(value).decode()}"]
    return tuple(out)


# --- one session --------------------------------------------------------------------------------------


class ServerRefused(Finding):
    """The server ended before it answered ``initialize`` (a setting it refuses to start with)."""

    def __init__(self, code: int | None, stderr: str) -> None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        self.code = code
        self.said = lines[0] if lines else ""
        super().__init__(f"exit {code}: {self.said}")


class Conn(LineConn):
    async def call(
        self, method: str, params: dict[str, Any], until: str | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer, and every message after the request until ``until`` (server requests answered accept)."""
        rid = await self.request(method, params)
        answer: dict[str, Any] | None = None
        seen: list[dict[str, Any]] = []
        with trio.fail_after(STEP_S):
            while True:
                message = await self.recv()
                if "method" in message and "id" in message:
                    seen.append(message)
                    await self.send({"id": message["id"], "result": {"decision": "accept"}})
                elif "method" in message:
                    seen.append(message)
                elif message.get("id") == rid:
                    answer = message
                if answer is not None and (
                    "error" in answer or until is None or any(m.get("method") == until for m in seen)
                ):
                    return answer, seen


def reduce_turn(seen: list[dict[str, Any]]) -> dict[str, Any]:
    requests = []
    tool: dict[str, Any] = {}
    notes: list[str] = []
    items: list[str] = []
    reviews: list[dict[str, Any]] = []
    status = None
    for m in seen:
        method = m["method"]
        params = m.get("params") or {}
        if "id" in m:
            requests.append(method)
            continue
        if method == "item/completed":
            item = params.get("item") or {}
            if item.get("type") not in ("userMessage", "agentMessage", "reasoning"):
                items.append(f"{item.get('type')}:{item.get('status')}")
            if item.get("type") in ("commandExecution", "fileChange"):
                tool = {"type": item["type"], "status": item.get("status")}
                if item.get("type") == "commandExecution":
                    tool["exitCode"] = item.get("exitCode")
        elif method == "turn/completed":
            status = (params.get("turn") or {}).get("status")
        elif "eview" in method or "guardian" in method.lower():
            notes.append(method)
            if method.startswith("item/autoApprovalReview/"):
                review = params.get("review") or {}
                action = params.get("action") or {}
                reviews.append(
                    {
                        "method": method,
                        "status": review.get("status"),
                        "action": action.get("type"),
                        "fields": sorted(params),
                    }
                )
    out = {"requests": requests, "tool": tool, "items": items, "status": status, "review_notes": sorted(set(notes))}
    if reviews:
        out["reviews"] = reviews
    return out


Server = Callable[[Case], AbstractAsyncContextManager[tuple[Conn, Path, Path, Callable[[], list[Any]]]]]


def tool_outputs(bodies: list[Any], call_id: str) -> list[str]:
    """What the model was told of each tool call (the function_call_output items it received, in order)."""
    out: list[str] = []
    seen: set[str] = set()
    for body in bodies:
        for item in (body or {}).get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                key = str(item.get("call_id"))
                if key in seen or key != call_id:
                    continue
                seen.add(key)
                text = item.get("output")
                text = text if isinstance(text, str) else orjson.dumps(text).decode()
                out.append(text[:300])
    return out


async def play_case(server: Server, case: Case) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with server(case) as (conn, workdir, outside, model_calls):
        params: dict[str, Any] = {"cwd": str(workdir)}
        if case.where == "thread":
            params |= {
                "approvalPolicy": POLICIES[case.policy],
                "sandbox": case.sandbox,
                "approvalsReviewer": case.reviewer,
            }
        answer, _ = await conn.call("thread/start", params)
        if "error" in answer:
            return {"thread/start": {"error": answer["error"].get("message")}}
        result = answer["result"]
        out["thread/start"] = {
            "approvalPolicy": result.get("approvalPolicy"),
            "sandbox": (result.get("sandbox") or {}).get("type"),
            "approvalsReviewer": result.get("approvalsReviewer"),
        }
        thread_id = result["thread"]["id"]
        for action in ACTIONS:
            before = len(model_calls())
            turn: dict[str, Any] = {"threadId": thread_id, "input": [{"type": "text", "text": f"do {action}"}]}
            if case.where == "turn":
                turn |= {
                    "approvalPolicy": POLICIES[case.policy],
                    "sandboxPolicy": _TURN_SANDBOX[case.sandbox],
                    "approvalsReviewer": case.reviewer,
                }
            answer, seen = await conn.call("turn/start", turn, until="turn/completed")
            if "error" in answer:
                out[action] = {"error": answer["error"].get("message")}
                continue
            reduced = reduce_turn(seen)
            if os.environ.get("POLICY_OBSERVE_RAW"):
                print(orjson.dumps(seen).decode(), file=sys.stderr)
            reduced["ran"] = _written(action, workdir, outside).exists()
            bodies = model_calls()
            reduced["model_requests"] = len(bodies) - before
            reduced["model_was_told"] = tool_outputs(bodies[before:], str(_tool(action, outside).call_id))
            out[action] = reduced
    return out


@asynccontextmanager
async def _session(argv: Any, env: Any, cwd: Path) -> AsyncIterator[Conn]:
    from codex_client.process import spawn_process

    async with spawn_process(argv, cwd=cwd, env=env) as process:
        conn = Conn(process)
        try:
            init = {"clientInfo": {"name": "observe", "version": "0"}, "capabilities": {"experimentalApi": True}}
            await conn.call("initialize", init)
        except EOFError:
            code = None
            with trio.move_on_after(10):
                code = await process.wait_exit()
            raise ServerRefused(code, process.stderr_tail()) from None
        await conn.send({"method": "initialized"})
        yield conn
        await process.close_input()
        with trio.move_on_after(10):
            await process.wait_exit()


def real_server(codex: Path, tmp: Path) -> Server:
    import tomllib

    import tomli_w

    from harness.targets.real import real_target

    @asynccontextmanager
    async def server(case: Case) -> AsyncIterator[tuple[Conn, Path, Path, Callable[[], list[Any]]]]:
        base = Path(tempfile.mkdtemp(dir=tmp))  # not under /tmp: workspace-write lets a command write in /tmp
        # the run folder is made inside base by real_target: the "outside" folder is its parent's sibling,
        # writable by the confined binary only through its run directory, so it sits in the run root.
        # no frame is validated here: a release not pinned yet (`release learn` pins it into a store) is observed too
        # The flags go in before the launcher wraps the command: appended after it, they reached bwrap's command
        # but not the one the unshare fallback's init runs (which starts the argv it was given).
        async with real_target(
            scenario(base / "placeholder"),
            codex,
            base_dir=base,
            require_pinned_schema=False,
            server_args=flag_args(case),
        ) as target:
            outside = target.workdir.parent / "outside"
            outside.mkdir()
            schedule = target.mock.schedule
            assert schedule is not None  # serve_responses_api gives its mock one
            schedule.scenario = scenario(outside)  # the patch path is known only now
            config = tomllib.loads(target.config_path.read_text())
            config.pop("approval_policy", None)
            config.pop("sandbox_mode", None)
            config.pop("approvals_reviewer", None)
            if case.where == "config":
                config |= config_lines(case)
            target.config_path.write_text(tomli_w.dumps(config))
            async with _session(target.argv, target.env, target.cwd) as conn:
                yield conn, target.workdir, outside, lambda: [r.body for r in target.mock.responses_requests()]

    return server


def fake_server(tmp: Path, release: str | None = None) -> Server:
    """fake-codex playing the same model side: a scenario file in a temporary folder."""
    import tomli_w

    from harness.codex_bin import scrubbed_env
    from harness.targets.fake import fake_codex_argv
    from harness.targets.real import config_toml

    @asynccontextmanager
    async def server(case: Case) -> AsyncIterator[tuple[Conn, Path, Path, Callable[[], list[Any]]]]:
        folder = Path(tempfile.mkdtemp(dir=tmp))
        for sub in ("codex_home", "home", "tmp", "workdir", "outside"):
            (folder / sub).mkdir()
        config = config_toml(ServerConfig(), "http://127.0.0.1:1/v1")
        for key in ("approval_policy", "sandbox_mode", "approvals_reviewer"):
            config.pop(key, None)
        if case.where == "config":
            config |= config_lines(case)
        (folder / "codex_home" / "config.toml").write_text(tomli_w.dumps(config))
        env = scrubbed_env(os.environ, codex_home=folder / "codex_home", tmpdir=folder / "tmp", trace_root=None)
        env["HOME"] = str(folder / "home")
        script = folder / "policy_observe.toml"
        script.write_text(scenario_toml(scenario(folder / "outside")))
        argv = [*fake_codex_argv(), "app-server", "--scenario", str(script), *flag_args(case)]
        if release is not None:
            argv += ["--release", release]
        async with _session(argv, env, folder / "workdir") as conn:
            yield conn, folder / "workdir", folder / "outside", lambda: []

    return server


def inprocess_server(release: str | None = None) -> Server:
    """The fake in this process (settings in thread/start or turn/start need no home): the quick way to observe it."""
    from fake_server.inprocess import serve_in_process

    @asynccontextmanager
    async def server(case: Case) -> AsyncIterator[tuple[Conn, Path, Path, Callable[[], list[Any]]]]:
        workdir, outside = Path("/RUN/workdir"), Path("/RUN/outside")
        async with serve_in_process(scenario(outside), cwd=str(workdir), release=release) as fake:
            conn = Conn(fake)
            init = {"clientInfo": {"name": "observe", "version": "0"}, "capabilities": {"experimentalApi": True}}
            await conn.call("initialize", init)
            await conn.send({"method": "initialized"})
            yield conn, workdir, outside, lambda: []

    return server


def scenario_toml(sc: Scenario) -> str:
    import tomli_w

    turns = []
    for turn in sc.turns:
        responses = []
        for response in turn.responses:
            items: list[dict[str, Any]] = []
            for item in response.items:
                if isinstance(item, MessageItem):
                    items.append({"type": "message", "text": item.text, "deltas": list(item.deltas)})
                elif isinstance(item, CommandItem):
                    items.append(
                        {"type": "command", "command": item.command, "call_id": item.call_id, "approval": item.approval}
                    )
                else:
                    assert isinstance(item, FileChangeItem)  # the observing scenarios hold no reasoning item
                    items.append(
                        {"type": "file_change", "path": item.path, "content": item.content, "call_id": item.call_id}
                    )
            responses.append({"items": items})
        turns.append({"input": turn.input, "responses": responses})
    return tomli_w.dumps({"name": sc.name, "description": sc.description, "turns": turns})


async def observe(server: Server, only: str | None = None, jobs: int = 2) -> dict[str, Any]:
    out: dict[str, Any] = {}
    limit = trio.CapacityLimiter(jobs)

    async def one(case: Case) -> None:
        async with limit:
            try:
                out[case.name] = await play_case(server, case)
            except ServerRefused as exc:
                out[case.name] = {"failed": "the server exited before it answered", "exit": exc.code, "said": exc.said}
            except Exception as exc:  # an observation that failed is recorded as such
                out[case.name] = {"failed": f"{type(exc).__name__}: {exc}"}
            print(case.name, file=sys.stderr)

    async with trio.open_nursery() as nursery:
        for case in cases():
            if only is None or only in case.name:
                nursery.start_soon(one, case)
    return dict(sorted(out.items()))


def scratch_root() -> Path:
    """Where the runs' folders go: not under ``/tmp``, which a workspace-write sandbox lets a command write (a patch
    "outside the workspace" there would not be); ``$XDG_CACHE_HOME/codex-harness`` (else ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = Path(base) / "codex-harness"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def observe_real(codex: Path, only: str | None = None, jobs: int = 2) -> dict[str, Any]:
    """Every case (those whose name contains ``only``) on the real binary ``codex``."""
    with tempfile.TemporaryDirectory(dir=scratch_root(), prefix="policy-observe-") as tmp:
        return trio.run(observe, real_server(Path(codex), Path(tmp)), only, jobs)


def observe_fake(only: str | None = None, jobs: int = 2, release: str | None = None) -> dict[str, Any]:
    """Every case (those whose name contains ``only``) on the fake: the ``thread:`` and ``turn:`` cases in process,
    the ``config:`` and ``flag:`` ones on fake-codex with that home and those flags."""
    with tempfile.TemporaryDirectory(prefix="codex-harness-policy-") as tmp:
        process = fake_server(Path(tmp), release)
        quick = inprocess_server(release)

        @asynccontextmanager
        async def server(case: Case) -> AsyncIterator[tuple[Conn, Path, Path, Callable[[], list[Any]]]]:
            chosen = quick if case.where in ("thread", "turn") else process
            async with chosen(case) as session:
                yield session

        return trio.run(observe, server, only, jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="the real binary (default: observe fake-codex)")
    parser.add_argument("--out", help="write the observations here (default: stdout)")
    parser.add_argument("--only", help="only the cases whose name contains this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--release", help="the release profile fake-codex plays (default: the default release)")
    parser.add_argument("--update", action="store_true", help="replace only the cases played in the --out file")
    args = parser.parse_args()
    observed = (
        observe_real(Path(args.codex), args.only, args.jobs)
        if args.codex
        else observe_fake(args.only, args.jobs, args.release)
    )
    if args.update and args.out and Path(args.out).is_file():
        observed = dict(sorted({**orjson.loads(Path(args.out).read_bytes()), **observed}.items()))
    write_observed(observed, args.out, sort_keys=True)


if __name__ == "__main__":
    main()
