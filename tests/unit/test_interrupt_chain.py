"""A Ctrl-C or SIGTERM that Python turned into another exception still ends the run: never a verdict.

CI once sent SIGTERM while the first scenario imported a module lazily: the interrupt, raised inside a dataclass
field's ``__set_name__``, came out as ``RuntimeError: Error calling __set_name__ on 'Field' instance 'client' in
'World'``. The runner judged it (``runner / play`` failed), played the other 62 scenarios and exited 1 with a report,
where an interrupted run exits 143 and writes none.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import orjson
import pytest

from codex_sandbox import interrupts
from contracts.exitcodes import interrupt_in
from contracts.scenario import Scenario
from harness import cli, runner
from harness.scenario_lookup import resolve


class _Interrupting:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _converted_by_class_creation() -> BaseException:
    try:
        type("Made", (), {"field": _Interrupting()})
    except BaseException as exc:  # Python 3.11: RuntimeError from the interrupt; later ones let it through
        return exc
    raise AssertionError("__set_name__ was not called")


def _converted_by_orjson() -> BaseException:
    def default(value: object) -> object:
        raise KeyboardInterrupt

    try:
        orjson.dumps(object(), default=default)
    except BaseException as exc:
        return exc
    raise AssertionError("default was not called")


@pytest.mark.parametrize("made", [_converted_by_class_creation, _converted_by_orjson])
def test_the_interrupt_behind_a_converted_exception_is_found(made: Any) -> None:
    exc = made()
    assert isinstance(interrupt_in(exc), KeyboardInterrupt), repr(exc)


def test_an_exception_with_no_interrupt_behind_it_is_none() -> None:
    try:
        try:
            raise ValueError("first")
        except ValueError as first:
            raise RuntimeError("second") from first
    except RuntimeError as exc:
        assert interrupt_in(exc) is None
    group = BaseExceptionGroup("two", [ValueError("a"), KeyboardInterrupt()])
    assert isinstance(interrupt_in(group), KeyboardInterrupt)
    looped = ValueError("loop")
    looped.__context__ = RuntimeError("back")
    looped.__context__.__context__ = looped  # a cycle ends the walk, not the interpreter
    assert interrupt_in(looped) is None


def _planted(behaviour: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    played: list[str] = []

    def play(scenario: Scenario, *args: Any, **kwargs: Any) -> Any:
        played.append(scenario.name)
        behaviour()

    monkeypatch.setattr(runner, "play", play)
    return played


def _import_interrupted() -> None:
    raise RuntimeError("Error calling __set_name__ on 'Field' instance 'client' in 'World'") from KeyboardInterrupt()


def test_the_runner_lets_a_converted_interrupt_through(monkeypatch: pytest.MonkeyPatch) -> None:
    _planted(_import_interrupted, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        runner.run_one(resolve("plain"), "fake")


def test_the_run_command_ends_as_interrupted_and_writes_no_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    played = _planted(_import_interrupted, monkeypatch)
    assert cli.main(["run", "--quiet", "--report", str(tmp_path / "r")]) == 130
    assert played == [played[0]] and not (tmp_path / "r" / "checks.json").exists()
    assert "interrupted by SIGINT" in capsys.readouterr().err


def test_a_sigterm_swallowed_without_a_trace_still_ends_the_run_at_the_next_scenario(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def swallowed() -> None:  # the handler ran (the signal is on record), its interrupt was lost on the way
        interrupts._received.append(signal.SIGTERM)
        raise RuntimeError("an error with no interrupt behind it")

    played = _planted(swallowed, monkeypatch)
    assert cli.main(["run", "--quiet", "--report", str(tmp_path / "r")]) == 143
    assert len(played) == 1 and not (tmp_path / "r" / "checks.json").exists()
    assert "interrupted by SIGTERM" in capsys.readouterr().err
    assert not interrupts.pending()  # the block's record ends with it: a later call is no command of its own
