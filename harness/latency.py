"""The interrupt latency probe: cancel a running turn, measure on the wire and on the client's clock.

Cases (``docs/client-rules.md`` §2; the real-binary probe): ``long_stream`` is *generation* (cancel a
settle delay after the first message delta), ``running_command`` is *active_tool* (cancel once the
command item has started), ``interrupt_pending_approval`` cancels while an approval is pending. Each
sample runs on a fresh server process; warm-ups are discarded; percentiles are nearest-rank.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from codex_client.events import ItemStarted, TurnEvent
from contracts.checks.wire_index import WireIndex
from contracts.record import SessionRecord
from contracts.report.latency import METRICS, CaseResult, Sample, nearest_rank, percentiles, summary_line
from contracts.scenario import ClientAction, Scenario
from harness.runner import play, without_cancels

CASES: tuple[str, ...] = ("long_stream", "running_command", "interrupt_pending_approval")


def probe_scenario(
    scenario: Scenario, settle_ms: int
) -> tuple[Scenario, tuple[Callable[[TurnEvent], bool], float] | None]:
    """The scenario with the case's cancel point, and a cancel trigger when no plan action can say it."""
    if scenario.name == "long_stream":
        cancel = ClientAction(1, "cancel", at="delta", n=1, delay_ms=settle_ms)
        base = without_cancels(scenario)
        return replace(base, client=replace(base.client, actions=(*base.client.actions, cancel))), None
    if scenario.name == "running_command":

        def command_started(event: TurnEvent) -> bool:
            return isinstance(event, ItemStarted) and event.item_type == "commandExecution"

        return without_cancels(scenario), (command_started, 0.0)
    # interrupt_pending_approval: the scenario itself cancels while its approval is pending
    return scenario, None


def measure(record: SessionRecord) -> Sample:
    """One sample from the first turn of a record: wire interrupt→turn/completed and cancel→Result."""
    if not record.results:
        return Sample("none", None, None, "no Result")
    result = min(record.results, key=lambda r: r.index)
    cancel_to_result = None
    if result.cancel_at is not None and result.ended_at is not None:
        cancel_to_result = (result.ended_at - result.cancel_at) * 1000
    wire = None
    error = None
    index = WireIndex.build(record.wire)
    if result.turn_id is not None and (interrupts := index.interrupts(result.turn_id)):
        first = interrupts[0]
        completions = [e for pos, e in index.turn_completions(result.turn_id) if pos > first.pos]
        if completions:
            wire = (completions[0].t - first.t) * 1000
        else:
            error = "no turn/completed after the interrupt"
    else:
        error = "no turn/interrupt on the wire"
    if record.client_errors:
        error = record.client_errors[0]
    return Sample(result.status, wire, cancel_to_result, error)


def run_case(
    scenario: Scenario,
    target: str,
    *,
    samples: int,
    warmups: int,
    settle_ms: int,
    codex: Path | None = None,
    progress: Callable[[str, int, int, Sample], None] | None = None,
) -> CaseResult:
    probe, trigger = probe_scenario(scenario, settle_ms)
    out = CaseResult(scenario.name, target)
    total = warmups + samples
    for i in range(total):
        with tempfile.TemporaryDirectory(prefix=f"codex-harness-latency-{scenario.name}-") as tmp:
            record = play(probe, target, work_dir=Path(tmp), codex=codex, cancel_trigger=trigger)
            sample = measure(record)
        (out.warmups if i < warmups else out.samples).append(sample)
        if progress is not None:
            progress(scenario.name, i + 1, total, sample)
    return out


# The samples and their statistics are the report model's (contracts.report.latency); named here too, for callers.
__all__ = [
    "CASES",
    "METRICS",
    "CaseResult",
    "Sample",
    "measure",
    "nearest_rank",
    "percentiles",
    "probe_scenario",
    "run_case",
    "summary_line",
]
