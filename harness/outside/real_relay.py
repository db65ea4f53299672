"""One server of an outside client on the real binary: the sealed real target behind the recorder relay.

The shim (:func:`write_real_shim`) execs ``python -m harness.outside.real_relay SPEC.json "$@"``; :func:`serve`
claims a recording folder (as ``fake-codex --record`` does), prepares the real target for the scenario
(:func:`harness.targets.real.real_target`: private ``CODEX_HOME`` / ``HOME`` / ``TMPDIR``, the environment
scrubbed, the mock Responses API playing the model side, the confined launcher the harness already chose),
starts ``codex ARGS`` with the client's own arguments, and relays (:mod:`.relay`). The mock runs in a trio
loop of its own thread, so the relay's threads never wait on it; its traffic is left in ``model.jsonl``
(monotonic times), the third lane of the report.

Each server the client starts gets its own relay, folder and mock; the run's servers share one run directory
(``shared_run``: one ``CODEX_HOME``, so a later server resumes the threads an earlier one left) and one turn count
(``turns``: :class:`fake_server.responses_api.RunTurnCounter`), so a client that starts a server per turn gets
turn N of the scenario on the run's N-th turn, as fake-codex plays it from the ``CODEX_HOME`` it is given.

SPEC (written by the harness, never by the client): ``scenario_file``, ``record_dir``, ``codex``, ``version``,
``confinement`` / ``tool`` (the launcher), ``scratch`` (where a run directory goes without ``shared_run``),
``shared_run`` (the run's directory, :func:`harness.targets.real.shared_run`), ``turns`` (the run's turn count
file), ``marker``.
"""

from __future__ import annotations

import os
import queue
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse
from contracts.exitcodes import USAGE
from contracts.scenario import Scenario
from fake_server.recording import claim_folder, play_identity, scenario_hash
from harness.outside.relay import RELAY_ENV, Relay, exit_as, start_json, write_json

#: Bound on preparing the run (the mock's start, the config): past it the relay gives up (exit 126).
PREPARE_TIMEOUT_S = 60.0
#: How long the mock may take to wind down after the server exited.
MOCK_STOP_S = 5.0
SPEC_BYTES = 64 * 1024
MAX_MODEL_ENTRIES = 100_000
#: Exit status when the server could not be prepared (the shell's "cannot execute").
CANNOT_RUN = 126


def write_real_shim(directory: Path, spec: dict[str, Any], version_line: str, starts: Path | None = None) -> Path:
    """``directory/codex``: answers ``--version`` with the binary's own line, else execs the relay. ``starts``: the
    file each start is noted in (:func:`harness.outside.shim.start_log`)."""
    from harness.outside.shim import start_log

    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "relay-spec.json"
    spec_path.write_bytes(orjson.dumps(spec))
    q = shlex.quote
    relay = " ".join(q(a) for a in (sys.executable, "-m", "harness.outside.real_relay", str(spec_path)))
    script = f"""#!/bin/sh
# codex shim written by codex-harness: runs the real codex sealed, behind a relay that records the wire.
{start_log(starts) if starts is not None else ":"}
case "$1" in
  --version|-V) echo {q(version_line)}; exit 0 ;;
esac
export {RELAY_ENV}={q(str(spec["record_dir"]))}
exec {relay} "$@"
"""
    path = directory / "codex"
    path.write_text(script, encoding="utf-8")
    os.chmod(path, 0o755)
    return path


def model_provider(args: list[str]) -> tuple[str, str]:
    """The model provider the binary will use with these arguments, and what set it: the mock's
    (:data:`~harness.targets.real.PROVIDER_ID`, from the run's config.toml) unless a ``-c`` / ``--config`` override
    of ``model_provider`` or ``model_providers.*`` takes the binary away from it (the fake serves no model: there it
    changes nothing)."""
    from harness.targets.real import PROVIDER_ID

    for k, arg in enumerate(args):
        if arg in ("-c", "--config"):
            value = args[k + 1] if k + 1 < len(args) else ""
        elif arg.startswith("--config="):
            value = arg.removeprefix("--config=")
        elif arg.startswith("-c") and len(arg) > 2:
            value = arg[2:]
        else:
            continue
        key = value.split("=", 1)[0].strip()
        if key == "model_provider" or key.startswith("model_providers"):
            return f"{value[:80]} (not the mock)", f"-c {key[:40]}"
    return PROVIDER_ID, "config.toml"


def _say(text: str) -> None:
    try:
        os.write(2, f"codex-harness relay: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def _mock_thread(
    scenario: Scenario, spec: dict[str, Any], folder: Path, args: list[str], ready: queue.Queue[Any]
) -> threading.Event:
    """The real target prepared in a trio loop of its own thread; ``ready`` gets it (or the exception). Setting
    the returned event ends the block (the mock stops, the run directory goes; its traffic is in ``model.jsonl``
    as it came: :class:`ModelFile`); the thread then puts None."""
    import trio

    from fake_server.responses_api import RunTurnCounter
    from harness.codex_bin import RunDir
    from harness.targets.real import real_target

    done = threading.Event()
    shared = None
    if isinstance(spec.get("shared_run"), str):
        root = Path(spec["shared_run"])
        shared = RunDir(root, root / "codex_home", root / "home", root / "tmp", root / "workdir")
    counter = RunTurnCounter(spec["turns"]) if isinstance(spec.get("turns"), str) else None

    async def hold() -> None:
        offset = time.monotonic() - trio.current_time()  # the mock stamps trio's clock
        try:
            async with real_target(
                scenario,
                Path(spec["codex"]),
                trace_root=folder / "server-trace",
                require_pinned_schema=False,
                base_dir=Path(spec["scratch"]),
                version=spec["version"],
                command=tuple(args),
                shared=shared,
                turn_counter=counter,
            ) as target:
                ready.put(target)
                model = ModelFile(folder / "model.jsonl", offset)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(model.follow, target.mock.traffic)
                    await trio.to_thread.run_sync(done.wait, abandon_on_cancel=True)
                    nursery.cancel_scope.cancel()
                model.flush(target.mock.traffic)
        except BaseException as exc:  # handed to the relay's thread, which says it
            ready.put(exc)
            return
        ready.put(None)

    thread = threading.Thread(target=trio.run, args=(hold,), name="relay-mock", daemon=True)
    thread.start()
    return done


def serve(spec_path: Path, args: list[str]) -> int:
    """Run one server for the client and record it; the server's exit status."""
    from codex_client.process import child_environment
    from codex_sandbox import confine
    from contracts.scenario_file import load

    try:
        with open(spec_path, "rb") as fh:
            spec = bounded_parse.loads_json(fh.read(SPEC_BYTES))
        scenario = load(spec["scenario_file"])
        confine.adopt(spec["confinement"], spec.get("tool"))
        folder = claim_folder(Path(spec["record_dir"]))
    except Exception as exc:
        _say(f"cannot start: {exc}")
        return CANNOT_RUN
    if folder is None:
        _say(f"{spec['record_dir']} holds too many recordings")
        return CANNOT_RUN
    version = str(spec["version"])
    provider, provider_source = model_provider(args)
    start_json(
        folder,
        {
            "scenario": scenario.name,
            "scenario_ref": str(spec["scenario_file"]),
            "scenario_hash": scenario_hash(scenario),
            "profile": version,
            "play": {**play_identity(scenario, version), "model_provider": provider},
            "play_sources": {"scenario_hash": "harness", "release": "--codex", "model_provider": provider_source},
            "run_marker": spec.get("marker"),
            "relay": {"codex": str(spec["codex"]), "args": args[:32], "confinement": spec["confinement"]},
        },
    )
    relay = Relay(folder)
    ready: queue.Queue[Any] = queue.Queue()
    done = _mock_thread(scenario, spec, folder, args, ready)
    try:
        target = ready.get(timeout=PREPARE_TIMEOUT_S)
    except queue.Empty:
        target = TimeoutError(f"the real target was not ready within {PREPARE_TIMEOUT_S:g} s")
    if isinstance(target, BaseException):
        done.set()
        _say(f"the real binary cannot run this scenario: {target}")
        relay.abandon(f"server could not start: {target}"[:2000], CANNOT_RUN)
        return CANNOT_RUN
    env = child_environment(dict(target.env), spec.get("marker"))
    env[RELAY_ENV] = str(spec["record_dir"])
    try:
        code = relay.run(target.argv, env, target.cwd)
    finally:
        done.set()
        try:  # the mock's last events written, its run directory removed
            ready.get(timeout=MOCK_STOP_S)
        except queue.Empty:
            pass
    return code


#: How often the mock's new events go to model.jsonl: a relay killed with its client loses at most this much.
MODEL_FLUSH_S = 0.1


class ModelFile:
    """``model.jsonl``, appended as the mock's traffic grows (whole lines per write, at most
    :data:`MAX_MODEL_ENTRIES`), times rebased from trio's clock to monotonic seconds."""

    def __init__(self, path: Path, offset: float) -> None:
        self.path, self.offset, self.done = path, offset, 0

    async def follow(self, traffic: list[dict[str, Any]]) -> None:
        import trio

        while True:
            self.flush(traffic)
            await trio.sleep(MODEL_FLUSH_S)

    def flush(self, traffic: list[dict[str, Any]]) -> None:
        new = traffic[self.done : MAX_MODEL_ENTRIES]
        if not new:
            return
        data = b"".join(
            orjson.dumps({"t": round(e["t"] + self.offset, 6), "dir": e["dir"], "msg": e["msg"]}) + b"\n" for e in new
        )
        self.done += len(new)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
            try:
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError:
            self.done = MAX_MODEL_ENTRIES  # a disk that refuses stops the model lane, never the relay


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.outside.real_relay SPEC.json CLIENT-ARGS...``: the shim's line."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("harness.outside.real_relay: usage: real_relay SPEC.json [ARGS...]", file=sys.stderr)
        return USAGE
    return exit_as(serve(Path(args[0]), args[1:]))


__all__ = ["main", "serve", "write_json", "write_real_shim"]

if __name__ == "__main__":
    sys.exit(main())
