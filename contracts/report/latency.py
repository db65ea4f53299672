"""Latency distributions in a report: the samples of a case, and nearest-rank percentiles over them.

Measured by ``harness.latency`` (each sample a fresh server process); read by the renderers of ``latency``,
``validate-release`` and ``matrix``. Pure data: no clock, no process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

METRICS: tuple[str, ...] = ("interrupt_to_completed", "cancel_to_result", "client_overhead")


@dataclass(slots=True)
class Sample:
    status: str
    interrupt_to_completed_ms: float | None
    cancel_to_result_ms: float | None
    error: str | None = None

    @property
    def client_overhead_ms(self) -> float | None:
        if self.interrupt_to_completed_ms is None or self.cancel_to_result_ms is None:
            return None
        return self.cancel_to_result_ms - self.interrupt_to_completed_ms

    def metric(self, name: str) -> float | None:
        return {
            "interrupt_to_completed": self.interrupt_to_completed_ms,
            "cancel_to_result": self.cancel_to_result_ms,
            "client_overhead": self.client_overhead_ms,
        }[name]


@dataclass(slots=True)
class CaseResult:
    scenario: str
    target: str
    samples: list[Sample] = field(default_factory=list)
    warmups: list[Sample] = field(default_factory=list)

    @property
    def all_aborted(self) -> bool:
        return all(s.status == "aborted" for s in self.samples + self.warmups)

    @property
    def not_aborted(self) -> list[Sample]:
        """Samples (warm-ups included) whose turn did not end ``aborted``: the interrupt did not take."""
        return [s for s in self.samples + self.warmups if s.status != "aborted"]

    def summary(self, metric: str) -> dict[str, Any]:
        values = [v for s in self.samples if (v := s.metric(metric)) is not None]
        return {"metric": metric, "n": len(values), **percentiles(values)}


def nearest_rank(sorted_values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile: the smallest value with at least p% of the values at or below it."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": nearest_rank(ordered, 50),
        "p95": nearest_rank(ordered, 95),
        "p99": nearest_rank(ordered, 99),
        "max": ordered[-1] if ordered else math.nan,
    }


def summary_line(metric: str, summary: dict[str, Any]) -> str:
    def ms(v: float) -> str:
        return "nan" if math.isnan(v) else f"{v:.2f}ms"

    return (
        f"SUMMARY {metric} n={summary['n']} p50={ms(summary['p50'])} p95={ms(summary['p95'])} "
        f"p99={ms(summary['p99'])} max={ms(summary['max'])}"
    )
