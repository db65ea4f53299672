"""fake-codex takes the real binary's command line: its options are accepted, any other is refused as clap does.

Observed on 0.171.0: ``codex app-server --bogus`` says ``error: unexpected argument '--bogus' found`` and exits 2
(so do ``codex --full-auto app-server`` and ``codex app-server --search``, while ``codex --search app-server`` serves);
``codex app-server extra`` says ``unrecognized subcommand``; top-level ``-m`` / ``-s`` / ``-a`` are accepted and do
not reach the app-server's threads. Before, the fake ignored every unknown flag and served (exit 0), so a client
passing a flag its release does not know passed on the fake and failed on the binary.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from fake_server.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["app-server", "--bogus"], "error: unexpected argument '--bogus' found"),
        (["app-server", "--scen", "plain"], "error: unexpected argument '--scen' found"),  # no abbreviations
        (["app-server", "extra"], "error: unrecognized subcommand 'extra'"),
        (["--bogus-top", "app-server"], "error: unexpected argument '--bogus-top' found"),
        (["--full-auto", "app-server"], "error: unexpected argument '--full-auto' found"),  # the TUI's, not here
        (["app-server", "--search"], "error: unexpected argument '--search' found"),  # a top-level option
        (["app-server", "-m", "x"], "error: unexpected argument '-m' found"),
    ],
)
def test_an_argument_the_real_binary_refuses_is_refused_with_its_words(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "For more information, try '--help'." in err


def test_the_real_binary_options_are_accepted() -> None:
    argv = [
        "-m", "gpt-x", "-s", "workspace-write", "-a", "never", "-C", "/tmp", "--enable", "feature_c", "--search",
        "--oss", "--add-dir", "/tmp", "--no-daemon", "--dangerously-bypass-approvals-and-sandbox",
        "app-server", "--quiet",
        "--enable", "feature_a", "--disable", "feature_b", "--analytics-default-enabled", "--stdio",
        "--startup-client-info", "{}", "--strict-config",
    ]  # fmt: skip
    command = [sys.executable, "-m", "fake_server.cli", *argv]
    done = subprocess.run(command, input=b"", capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
