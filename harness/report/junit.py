"""``junit.xml``: one testsuite per (scenario, target), one testcase per check.

A testcase's classname is ``scenario[target].contract``, its name the check's.

A failed check is a ``<failure>`` whose type is its citation; a skip is ``<skipped>`` with its reason; a warning
is written to ``<system-out>``. Each testcase carries the check's level (``must`` | ``should``) and status as
properties. A failed ``should`` check is a recommendation: it is a ``<failure>`` (type ``should: <citation>``)
only under ``strict``, as it fails the run only then; otherwise it is written to ``<system-out>`` as a
recommendation not met, so the file's failures are the run's.
What XML 1.0 forbids (C0 controls, even as ``&#27;``, lone surrogates, U+FFFE) and what a terminal obeys is
written out as ``\\x1b`` / ``\\u202e`` (:mod:`contracts.text`): the file stays well-formed and a CI page or log
that shows it shows the escape, not the effect.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from contracts.checks import Check
from contracts.report import Report
from contracts.safe_dir import write_file
from contracts.text import escape, one_line
from harness.report.terminal import as_report


def _xml(text: str) -> str:
    return escape(text, keep_newlines=True)


def junit_xml(subject: Report | Sequence[Check], *, suite_name: str = "codex-harness", strict: bool = False) -> bytes:
    report = as_report(subject)
    root = ET.Element("testsuites", name=_xml(suite_name))
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for group in report.groups():
        mine = group.checks
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
        )
        for c in mine:
            classname = _xml(f"{group.scenario}[{group.target}].{c.contract}")
            case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(c.name or c.contract))
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
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(subject: Report | Sequence[Check], path: str | Path, *, strict: bool = False) -> Path:
    return write_file(path, junit_xml(subject, strict=strict))
