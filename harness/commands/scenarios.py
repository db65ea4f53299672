"""``codex-harness scenarios``: the built-in catalogue, one line each, with the targets each supports."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from contracts.exitcodes import FAILED, OK
from contracts.scenario import TARGETS
from contracts.text import one_line
from harness import scenario_lookup
from harness.outside.plan import adapter_plan

NAME = "scenarios"
HELP = "list the built-in scenarios with a one-line description and the targets each supports"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    parser.add_argument("--dir", metavar="DIR", action="append", default=[], help="also list the scenario files of DIR")


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []  # the --json rows: JSON values
    specs = [(n, n) for n in scenario_lookup.builtin_names()]
    for directory in args.dir:
        specs += [(p.stem, str(p)) for p in scenario_lookup.scenario_files(directory)]
    broken = False
    for name, spec in specs:
        try:
            scenario = scenario_lookup.resolve(spec)
        except scenario_lookup.ScenarioError as exc:
            rows.append({"name": name, "targets": [], "description": "", "error": str(exc)})
            broken = True
            continue
        supported = [t for t in TARGETS if scenario.supports(t)[0]]
        faults = sorted({f.kind for f in scenario.faults})
        rows.append(
            {
                "name": scenario.name,
                "targets": supported,
                "description": scenario.description,
                "faults": faults,
                "source": scenario.source,
                # What an adapter for an outside client follows (harness.outside.plan), and the truth it is judged by.
                "plan": adapter_plan(scenario),
                "expect": scenario.expect.to_dict(),
            }
        )
    if args.json:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return FAILED if broken else OK
    if not rows:
        print("no scenarios found")
        return OK
    for r in rows:  # a scenario file's strings, shown one line each (contracts.text)
        r["name"], r["description"] = one_line(r["name"], 80), one_line(r.get("description", ""), 300)
    name_w = max(len(str(r["name"])) for r in rows)
    targets_w = max(len(",".join(r["targets"])) for r in rows)
    for r in rows:
        if "error" in r:
            print(f"{str(r['name']).ljust(name_w)}  {'-'.ljust(targets_w)}  INVALID: {one_line(r['error'], 400)}")
        else:
            print(f"{str(r['name']).ljust(name_w)}  {','.join(r['targets']).ljust(targets_w)}  {r['description']}")
    print(f"\n{len(rows)} scenario(s); fake = in-process fake, fake-process = fake-codex app-server, real = codex")
    return FAILED if broken else OK
