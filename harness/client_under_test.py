"""The client under test: one seam between the runners and whoever plays the scenarios.

Two clients sit behind it: ours (the trio client of ``codex_client``, driven in this process by
:func:`harness.runner.run_many`) and anyone's command (``--client-cmd``, a process tree of its own per scenario
behind the shim, :func:`harness.outside.command.run_clients`). ``run`` and ``fuzz`` ask the seam for a client
and play through it; which client it is decides how a scenario is played, never how it is judged: both hand
back :class:`harness.runner.ScenarioRun` values judged by the same contracts.

A new kind of client (an adapter in another language, a client over another transport) is one more class with
the two methods of :class:`ClientUnderTest`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from contracts.scenario import Scenario
from harness.outside.command import StartGate, run_clients
from harness.outside.runner import ClientSpec, run_outside_one
from harness.report_dir import ReportDir
from harness.runner import ScenarioRun, run_many, run_one

#: told each (scenario, target) as it starts
Started = Callable[[str, str], None]
#: told each run as it ends, with its number and the total
Ended = Callable[[ScenarioRun, int, int], None]


class ClientUnderTest(Protocol):
    """What a runner needs of the client it judges."""

    def play(
        self,
        scenarios: Sequence[Scenario],
        targets: Sequence[str],
        *,
        report: ReportDir | None = None,
        ended: Ended | None = None,
        started: Started | None = None,
    ) -> list[ScenarioRun]:
        """Every (scenario, target), target by target, in the catalogue's order; records saved into ``report``."""
        ...

    def play_one(self, scenario: Scenario, target: str, *, work_root: Path | None = None) -> ScenarioRun:
        """One scenario, not saved (the fuzzer's example); ``work_root``: where its work directory goes."""
        ...


@dataclass(frozen=True, slots=True)
class OurClient:
    """The project's trio client, in this process. ``codex``: the real binary of target ``real``."""

    transport: str = "stdio"
    codex: Path | None = None

    def play(
        self,
        scenarios: Sequence[Scenario],
        targets: Sequence[str],
        *,
        report: ReportDir | None = None,
        ended: Ended | None = None,
        started: Started | None = None,
    ) -> list[ScenarioRun]:
        return run_many(
            scenarios,
            targets,
            codex=self.codex,
            report_dir=report,
            progress=ended,
            transport=self.transport,
            started=started,
        )

    def play_one(self, scenario: Scenario, target: str, *, work_root: Path | None = None) -> ScenarioRun:
        return run_one(scenario, target, codex=self.codex, work_root=work_root, transport=self.transport)


@dataclass(frozen=True, slots=True)
class CommandClient:
    """Anyone's client, as a command (``--client-cmd``). ``jobs``: scenarios at once; ``real``: the real binary
    and its version (target ``real``)."""

    spec: ClientSpec
    jobs: int = 1
    real: tuple[Path, str] | None = None

    def play(
        self,
        scenarios: Sequence[Scenario],
        targets: Sequence[str],
        *,
        report: ReportDir | None = None,
        ended: Ended | None = None,
        started: Started | None = None,
    ) -> list[ScenarioRun]:
        runs: list[ScenarioRun] = run_clients(
            self.spec,
            scenarios,
            report_dir=report,
            progress=ended,
            jobs=self.jobs,
            targets=targets,
            codex=self.real,
            started=started,
        )
        return runs

    def play_one(self, scenario: Scenario, target: str, *, work_root: Path | None = None) -> ScenarioRun:
        if target != self.spec.target:
            raise ValueError(f"this client is played on {self.spec.target}, not {target}")
        run: ScenarioRun = run_outside_one(scenario, self.spec, work_root=work_root)
        return run


def play_one_staggered(client: ClientUnderTest, scenario: Scenario, target: str, gate: StartGate | None) -> ScenarioRun:
    """One scenario; with a ``gate``, its start waits its turn as ``run --jobs`` staggers starts."""
    if gate is None:
        return client.play_one(scenario, target)
    return gate.play(
        f"codex-harness-fuzz-{scenario.name}-", lambda root: client.play_one(scenario, target, work_root=root)
    )
