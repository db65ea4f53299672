"""``fake-codex``: a drop-in for ``codex`` that serves one scripted app-server session on stdio.

``fake-codex --version`` answers like the real binary of the release played: ``--release X`` (or
``FAKE_CODEX_RELEASE``, else the scenario's ``release``, else the default release) picks one of
:func:`fake_server.profiles.names`; an unknown release exits 3 and lists them.
``fake-codex app-server [--scenario NAME|PATH]`` plays a built-in scenario or a scenario file
(``FAKE_CODEX_SCENARIO`` when no flag, ``plain`` when neither), so a client that spawns ``codex app-server``
with fixed arguments can point its codex path here. Real-binary flags (``-c key=value``) are accepted.
``--listen ws://IP:PORT`` / ``unix://[PATH]`` serve as ``codex app-server`` does (its banner, ``/readyz`` and
``/healthz``, ``--ws-auth``, one session per connection until SIGTERM: :mod:`fake_server.ws_serve`,
``docs/transports.md``). ``--record DIR`` records the session
(:mod:`fake_server.recording`); ``FAKE_CODEX_RECORD`` wins over the flag.

Process faults are real here: a crash flushes what the fault says (half a frame for mid-line) and
leaves with ``os._exit(K)`` (no cleanup, the trace stays unclosed); ``grandchild_holds_stdout``
starts a ``sleep`` that inherits stdout and outlives the server by up to ``hold_ms``, in the server's
process group so a group kill takes it down. stdin EOF and SIGTERM shut down gracefully.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts import releases
from contracts.argparsing import ArgumentParser
from contracts.exitcodes import INVALID_INPUT, USAGE, UsageError, exit_code
from contracts.pipes import quiet_after_broken_pipe
from contracts.text import escaped_output
from fake_server import profiles
from fake_server.recording import RECORD_ENV
from fake_server.say import QUIET_ENV, say, set_quiet

# The rest (the engine, trio, the scenario model: fake_server.serving) is imported once a session is to be
# served: `fake-codex --version` and a usage error answer without it (bench/fake_start.py).

SCENARIO_ENV = "FAKE_CODEX_SCENARIO"


def _seconds(value: str) -> int:
    """A number of seconds, 0 or more (the real binary's u64)."""
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"invalid digit found in string: {value!r}")
    return int(value)


#: the websocket-auth flags of app-server (a listener's: stdio takes none), as (flag attribute, AuthFlags field)
_AUTH_FLAGS = (
    ("ws_auth", "mode"),
    ("ws_token_file", "token_file"),
    ("ws_token_sha256", "token_sha256"),
    ("ws_shared_secret_file", "shared_secret_file"),
    ("ws_issuer", "issuer"),
    ("ws_audience", "audience"),
    ("ws_max_clock_skew_seconds", "max_clock_skew_seconds"),
)


def _auth_flags(args: argparse.Namespace) -> Any:
    from fake_server.ws_auth import AuthFlags

    return AuthFlags(**{field: getattr(args, flag) for flag, field in _AUTH_FLAGS})


#: The real binary's options (``codex --help`` / ``codex app-server --help`` of the default release) that change
#: nothing the fake plays: accepted and ignored, each with whether it takes a value. Any other option is refused
#: as the real binary refuses it (exit 2), so a client passing a flag the release does not know fails here as it
#: would there.
TOP_LEVEL_FLAGS = {
    ("--remote",): True,
    ("--remote-auth-token-env",): True,
    ("--strict-config",): False,
    ("-i", "--image"): True,
    ("-m", "--model"): True,  # observed: top-level -m / -s / -a do not reach app-server's threads
    ("--oss",): False,
    ("--local-provider",): True,
    ("-p", "--profile"): True,
    ("-s", "--sandbox"): True,
    ("--approve-for-me",): False,
    ("--dangerously-bypass-approvals-and-sandbox",): False,
    ("--dangerously-bypass-hook-trust",): False,
    ("-C", "--cd"): True,
    ("--worktree",): False,
    ("--add-dir",): True,
    ("-a", "--ask-for-approval"): True,
    ("--search",): False,
    ("--no-alt-screen",): False,
    ("--no-daemon",): False,
}
APP_SERVER_FLAGS: dict[tuple[str, ...], bool] = {
    ("--startup-sign-out",): False,
    ("--print-startup-config",): False,
    ("--startup-client-info",): True,
    ("--cloud-skills-snapshot",): True,
    ("--code-mode-host",): True,
    ("--strict-config",): False,
    ("--analytics-default-enabled",): False,
}
#: clap's exit code for a command line it cannot parse
BAD_ARGUMENTS = 2


def _accept(parser: ArgumentParser, flags: dict[tuple[str, ...], bool], level: str) -> None:
    for names, takes_value in flags.items():
        # a dest of each level's own: argparse lets a subcommand's default overwrite what the top level parsed
        dest = f"{level}_{names[-1].lstrip('-').replace('-', '_')}"
        if takes_value:
            parser.add_argument(*names, dest=dest, action="append", metavar="VALUE", help="accepted, ignored")
        else:
            parser.add_argument(*names, dest=dest, action="store_true", help="accepted, ignored")


def _refused(unknown: list[str], command: str | None) -> int:
    """What the real binary says of an argument it does not know (clap), and its exit code."""
    first = unknown[0]
    usage = "codex app-server [OPTIONS] [COMMAND]" if command == "app-server" else "codex [OPTIONS] <COMMAND>"
    what = f"unexpected argument '{first}' found" if first.startswith("-") else f"unrecognized subcommand '{first}'"
    print(f"error: {what}\n\nUsage: {usage}\n\nFor more information, try '--help'.", file=sys.stderr)
    return BAD_ARGUMENTS


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="fake-codex",
        allow_abbrev=False,  # clap takes no abbreviation: --scen is refused there, so here
        description=f"Scriptable fake of `codex app-server` {', '.join(profiles.names())} "
        f"(default {releases.default_version()}).",
    )
    parser.add_argument("--version", "-V", action="store_true", help="print the version like the real binary")
    parser.add_argument(
        "--harness", action="store_true", help="with --version: the version of codex-harness that ships this fake"
    )
    parser.add_argument(
        "--release",
        metavar="X",
        help=f"the release to play: {', '.join(profiles.names())} (default: ${profiles.RELEASE_ENV}, "
        f"else the scenario's release, else {releases.default_version()})",
    )
    parser.add_argument(
        "-c", "--config", action="append", default=[], metavar="KEY=VALUE", help="a config override, as codex takes it"
    )
    parser.add_argument("--record", dest="record_top", metavar="DIR", help="as app-server --record")
    _accept(parser, TOP_LEVEL_FLAGS, "top")
    parser.add_argument("--enable", dest="top_enable", action="append", default=[], metavar="FEATURE", help="as -c")
    parser.add_argument("--disable", dest="top_disable", action="append", default=[], metavar="FEATURE", help="as -c")
    sub = parser.add_subparsers(dest="command")
    app = sub.add_parser(
        "app-server", allow_abbrev=False, help="serve app-server sessions on stdio, a websocket or a unix socket"
    )
    app.add_argument("--scenario", help=f"built-in scenario name or scenario file (default: ${SCENARIO_ENV} or plain)")
    app.add_argument(
        "--listen",
        default="stdio://",
        help="stdio:// (default), unix://, unix://PATH or ws://IP:PORT (one connection, one session; see "
        "docs/transports.md)",
    )
    app.add_argument(
        "--ws-auth", choices=("capability-token", "signed-bearer-token"), help="auth of websocket upgrades"
    )
    app.add_argument("--ws-token-file", metavar="PATH")
    app.add_argument("--ws-token-sha256", metavar="HEX")
    app.add_argument("--ws-shared-secret-file", metavar="PATH")
    app.add_argument("--ws-issuer", metavar="ISSUER")
    app.add_argument("--ws-audience", metavar="AUDIENCE")
    app.add_argument("--ws-max-clock-skew-seconds", metavar="SECONDS", type=_seconds)
    app.add_argument("--record", metavar="DIR", help=f"record the session into DIR/<n>-<pid>/ (or ${RECORD_ENV})")
    app.add_argument("-c", "--config", dest="app_config", action="append", default=[], metavar="KEY=VALUE")
    app.add_argument("--release", dest="app_release", metavar="X", help="as fake-codex --release")
    app.add_argument("--enable", action="append", default=[], metavar="FEATURE", help="as -c features.FEATURE=true")
    app.add_argument("--disable", action="append", default=[], metavar="FEATURE", help="as -c features.FEATURE=false")
    app.add_argument("--stdio", action="store_true", help="as --listen stdio://")
    _accept(app, APP_SERVER_FLAGS, "app")
    app.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:param=value,...][@POINT[:N]][#TURN]",
        help="add a fault to the scenario played, e.g. crash:exit_code=101@delta:2 (repeatable; validated as a "
        "scenario file's [[turns.faults]], docs/scenarios.md)",
    )
    app.add_argument(
        "--quiet",
        action="store_true",
        help=f"say nothing on stderr of the scenario, the faults that strike, the recording (or ${QUIET_ENV}=1)",
    )
    return parser


def _require_readable(spec: str | None) -> None:
    """A spec that names a path (or something here that is not a built-in) must be a readable regular file:
    a FIFO, a directory or a device is named as what it is, never opened."""
    if not spec:
        return
    from contracts import paths
    from fake_server.catalogue import builtin_names

    path = Path(spec)
    looks_like_path = path.suffix == ".toml" or "/" in spec or "\\" in spec
    if looks_like_path or (os.path.lexists(spec) and spec not in builtin_names()):
        paths.require_file(path, "scenario file")


def _source(*given: tuple[str, object]) -> str:
    """The name of the first input that is set (the precedence of ``_main``), else ``default``."""
    return next((name for name, value in given if value), "default")


def _play_sources(
    args: argparse.Namespace, flag: str | None, env_release: str | None, own: str | None
) -> dict[str, str]:
    """Where each input of :func:`fake_server.recording.play_identity` came from."""
    return {
        "scenario": _source(("--scenario", args.scenario), (f"${SCENARIO_ENV}", os.environ.get(SCENARIO_ENV))),
        "release": _source(("--release", flag), (f"${profiles.RELEASE_ENV}", env_release), ("the scenario", own)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with escaped_output(stdout=False):  # stdout is the wire; what we say on stderr is escaped (contracts.text)
            code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, where it is handled, not at interpreter exit
        return code
    except BrokenPipeError:  # `fake-codex --help | head -1`: no traceback
        return quiet_after_broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return _refused(unknown, args.command)
    env_release = os.environ.get(profiles.RELEASE_ENV)
    try:  # flag and environment are checked before anything else, --version included
        flag = getattr(args, "app_release", None) or args.release
        profile = profiles.select(flag, env_release)
    except UsageError as exc:  # an unknown release, or a release folder that cannot be read
        print(f"fake-codex: {exc}", file=sys.stderr)
        return exit_code(exc)
    if args.version:
        if args.harness:
            from contracts.version import version_line  # importlib.metadata: only when asked (start-up time)

            print(version_line())
        else:
            print(profile.version_line)
        return 0
    if args.command != "app-server":
        parser.print_help()
        return USAGE
    from contracts.scenario_file import ScenarioError, with_faults
    from fake_server import serving
    from fake_server.catalogue import resolve
    from fake_server.recording import open_recorder

    enabled, disabled = [*args.top_enable, *args.enable], [*args.top_disable, *args.disable]
    features = [f"features.{name}=true" for name in enabled] + [f"features.{name}=false" for name in disabled]
    serving.CONFIG_OVERRIDES[:] = [*args.config, *args.app_config, *features]
    if args.stdio:
        args.listen = "stdio://"
    listen = policy = None
    if args.listen != "stdio://" or any(getattr(args, flag) is not None for flag, _ in _AUTH_FLAGS):
        # Imported only for a listener (wsproto and h11 are a tenth of a second on a loaded machine: stdio starts
        # within its clients' handshake timeouts without them).
        from fake_server import ws_auth, ws_http

        try:
            listen = ws_http.parse_listen(args.listen, serving.codex_home())
            policy = ws_auth.policy_from_flags(_auth_flags(args), read_secrets=listen.scheme != "stdio")
            ws_http.check_listener(listen, policy)
        except ws_http.ListenUsageError as exc:  # the real binary's argument parser: exit 2
            print(exc, file=sys.stderr)
            return INVALID_INPUT
        except (ws_http.ListenRefused, ws_auth.AuthConfigError) as exc:  # refused at start: exit 1
            print(f"Error: {exc}", file=sys.stderr)
            return 1
    spec = args.scenario or os.environ.get(SCENARIO_ENV) or None
    try:
        _require_readable(spec)
        scenario = resolve(spec)
        if args.fault:
            scenario = with_faults(scenario, args.fault)
        profile = profiles.select(flag, env_release, scenario.release)
        profile.verify()  # a release folder that cannot be used: 3, naming the file
        sources = _play_sources(args, flag, env_release, scenario.release)
    except (UsageError, ScenarioError) as exc:  # an unreadable path, an unusable release folder: 3; a scenario: 2
        print(f"fake-codex: {exc}", file=sys.stderr)
        return exit_code(exc)
    refusal = serving.refused_setting(profile)
    if refusal is not None:  # as the release refuses a setting it no longer takes (its policy.json)
        said, code = refusal
        print(f"Error: {said}", file=sys.stderr)
        return code
    # The variable wins over the flag: a wrapper that records every server (the --client-cmd shim) must not lose
    # one to a client that passes --record.
    record_root = os.environ.get(RECORD_ENV) or args.record or args.record_top
    if listen is not None and listen.scheme != "stdio":
        return serving.run_socket(listen, policy, scenario, spec, profile, sources, record_root)
    set_quiet(args.quiet or os.environ.get(QUIET_ENV, "") not in ("", "0"))
    faults = ", ".join(sorted({f.kind for f in scenario.faults})) or "no fault"
    say(f"playing scenario {scenario.name} as codex-cli {profile.release} ({faults}); --quiet says nothing")
    recorder = open_recorder(record_root, scenario, spec, profile.release, sources)
    if recorder is not None:
        recorder.keep_signals()
    # trio makes the shared stdin/stdout descriptions non-blocking; give a terminal back as it was.
    blocking = {fd: serving.get_blocking(fd) for fd in (0, 1)}
    try:
        code, crashed = serving.run_stdio(scenario, recorder, profile)
    finally:
        for fd, was in blocking.items():
            serving.set_blocking(fd, was)
    if recorder is not None:
        recorder.finish(code, crashed)
        say(f"recorded into {recorder.folder}; see it with: codex-harness show {recorder.folder}")
    if crashed:
        os._exit(code & 0xFF)  # like a dying process: no flushing of Python buffers, no atexit
    return code


if __name__ == "__main__":
    sys.exit(main())
