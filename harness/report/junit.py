"""``junit.xml``: one testsuite per (scenario, target), one testcase per check.

A testcase's classname is ``scenario[target].contract``, its name the check's.

A failed check is a ``<failure>`` whose type is its citation; a skip is ``<skipped>`` with its reason; a warning
is written to ``<system-out>``. Each testcase carries the check's level (``must`` | ``should``) and status as
properties. A failed ``should`` check is a recommendation: it is a ``<failure>`` (type ``should: <citation>``)
only under ``strict``, as it fails the run only then; otherwise it is written to ``<system-out>`` as a
recommendation not met, so the file's failures are the run's.
A check that could not apply to this kind of run by construction (:attr:`Check.applies` False: an outside
client's own trace, say) is not a testcase of its scenario: one testsuite ``not judged for this kind of run``
holds one skipped testcase per reason, with how many checks in how many scenarios. ``times`` gives each
scenario's wall time: its testsuite's ``time``, shared evenly by its testcases (so they add up to it).
What XML 1.0 forbids (C0 controls, even as ``&#27;``, lone surrogates, U+FFFE) and what a terminal obeys is
written out as ``\\x1b`` / ``\\u202e`` (:mod:`contracts.text`): the file stays well-formed and a CI page or log
that shows it shows the escape, not the effect.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from contracts.checks import Check
from contracts.report import Report
from contracts.safe_dir import write_file
from contracts.text import escape, one_line
from harness.report.terminal import as_report


def _xml(text: str) -> str:
    return escape(text, keep_newlines=True)


def junit_xml(
    subject: Report | Sequence[Check],
    *,
    suite_name: str = "codex-harness",
    strict: bool = False,
    times: Mapping[tuple[str, str], float] | None = None,
) -> bytes:
    report = as_report(subject)
    root = ET.Element("testsuites", name=_xml(suite_name))
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    structural: dict[str, list[Check]] = {}
    total_time = 0.0
    for group in report.groups():
        mine = []
        for c in group.checks:
            if c.status == "skip" and not c.applies:
                structural.setdefault(c.detail, []).append(c)
            else:
                mine.append(c)
        if not mine:
            continue
        wall = (times or {}).get((group.scenario, group.target), 0.0)
        total_time += wall
        share = f"{wall / len(mine):.3f}"
        failing = [c for c in mine if c.status == "fail" and (strict or c.level != "should")]
        skipped = sum(c.status == "skip" for c in mine)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_xml(f"{group.scenario}[{group.target}]"),
            tests=str(len(mine)),
            failures=str(len(failing)),
            skipped=str(skipped),
            errors="0",
            time=f"{wall:.3f}",
        )
        for c in mine:
            classname = _xml(f"{group.scenario}[{group.target}].{c.contract}")
            case = ET.SubElement(
                suite, "testcase", classname=classname, name=_xml(c.name or c.contract), time=share
            )
            properties = ET.SubElement(case, "properties")
            ET.SubElement(properties, "property", name="level", value=c.level)
            ET.SubElement(properties, "property", name="status", value=c.status)
            message = one_line(c.detail, 1000)
            if c.status == "fail" and (strict or c.level != "should"):
                kind = f"should: {c.citation}" if c.level == "should" else c.citation or "contract"
                failure = ET.SubElement(case, "failure", message=message, type=_xml(kind))
                failure.text = _xml(c.detail)
            elif c.status == "fail":
                ET.SubElement(case, "system-out").text = _xml(f"recommendation not met (should): {c.detail}")
            elif c.status == "skip":
                ET.SubElement(case, "skipped", message=message)
            elif c.status == "warn":
                ET.SubElement(case, "system-out").text = _xml(f"warning: {c.detail}")
        totals["tests"] += len(mine)
        totals["failures"] += len(failing)
        totals["skipped"] += skipped
    if structural:
        suite = ET.SubElement(
            root,
            "testsuite",
            name="not judged for this kind of run",
            tests=str(len(structural)),
            failures="0",
            skipped=str(len(structural)),
            errors="0",
            time="0.000",
        )
        for reason, checks in structural.items():
            contracts = ", ".join(sorted({c.contract for c in checks}))
            scenarios = len({(c.scenario, c.target) for c in checks})
            case = ET.SubElement(suite, "testcase", classname="not-judged", name=_xml(contracts), time="0.000")
            text = f"{len(checks)} check(s) in {scenarios} scenario(s): {one_line(reason, 1000)}"
            ET.SubElement(case, "skipped", message=_xml(text))
        totals["tests"] += len(structural)
        totals["skipped"] += len(structural)
    root.set("time", f"{total_time:.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(subject: Report | Sequence[Check], path: str | Path, *, strict: bool = False) -> Path:
    return write_file(path, junit_xml(subject, strict=strict))
