"""``codex-harness report merge OUT DIR...``: the reports of a sharded run (``run --shard K/N``) joined into one.

OUT gets what one run of the whole catalogue writes: ``checks.json``, ``junit.xml``, ``run.json``, every
session's record under ``sessions/`` and ``index.html``; the verdict and the exit code are those of one run
(``--baseline``, ``--stale`` and ``--strict`` as ``run`` takes them). Each DIR is read as another program's output:
its files bounded, no link followed; a (scenario, target) that two shards both played is a usage error (the shards
overlap), as is a DIR that is not a run's report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from contracts import bounded_parse, safe_read
from contracts.checks import Check
from contracts.exitcodes import UsageError
from contracts.report import Report, checks_json, judge, load_baseline
from contracts.report.verdict import MAX_BASELINE_BYTES
from contracts.safe_dir import CopyBudget
from harness import report_dir as report_dir_check
from harness.html import write_index_html
from harness.report import junit_xml, render_table

NAME = "report"
HELP = "work on run reports: merge the reports of a sharded run (run --shard K/N) into one"
#: What a merged report copies of the shards' session records, in all.
MAX_MERGE_COPY_BYTES = 2 * 1024 * 1024 * 1024
MAX_RUN_JSON_BYTES = 64 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="report_command", metavar="SUBCOMMAND", parser_class=type(parser))
    merge = sub.add_parser("merge", help="join shard reports into one report, with one run's verdict and exit code")
    merge.add_argument("out", metavar="OUT", help="the merged report folder")
    merge.add_argument("dirs", metavar="DIR", nargs="+", help="the shards' --report folders")
    merge.add_argument("--baseline", metavar="FILE", help="known failures, as run --baseline")
    merge.add_argument("--stale", choices=("fail", "warn"), default="fail", help="as run --stale")
    merge.add_argument("--strict", action="store_true", help="as run --strict")
    merge.add_argument("--ascii", action="store_true", help="plain ASCII statuses in the table")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "report_command", None) != "merge":
        raise UsageError("expected a subcommand: merge OUT DIR...")
    return _merge(args)


def _read_shard(directory: Path) -> tuple[list[Check], dict[str, str]]:
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a report folder")
    try:
        body = safe_read.read_bounded(directory / "checks.json", MAX_BASELINE_BYTES)
        checks = [Check.from_dict(d) for d in bounded_parse.loads_json(body)]
    except OSError as exc:
        raise UsageError(f"{directory}: no readable checks.json ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{directory}/checks.json is not the checks of a run: {exc}") from None
    judged: dict[str, str] = {}
    try:
        raw = bounded_parse.loads_json(safe_read.read_bounded(directory / "run.json", MAX_RUN_JSON_BYTES))
        if isinstance(raw, dict):
            judged = {k: str(v) for k, v in raw.items() if k in ("client", "target", "release", "harness")}
    except (OSError, ValueError):
        pass  # a report of an earlier version: no header to carry
    return checks, judged


def _merge(args: argparse.Namespace) -> int:
    out = Path(args.out)
    baseline = load_baseline(args.baseline) if args.baseline else []
    shards = [Path(d) for d in args.dirs]
    if out.resolve() in {d.resolve() for d in shards}:
        raise UsageError(f"OUT {out} is one of the shards")
    checks: list[Check] = []
    seen: dict[tuple[str, str], Path] = {}
    judged: dict[str, set[str]] = {}
    pairs: list[tuple[Path, str, str]] = []
    for directory in shards:
        mine, header = _read_shard(directory)
        keys = list(dict.fromkeys((c.scenario, c.target) for c in mine))
        for key in keys:
            if key in seen:
                raise UsageError(f"{key[0]} [{key[1]}] is in both {seen[key]} and {directory}: the shards overlap")
            seen[key] = directory
            pairs.append((directory, key[1], key[0]))
        checks += mine
        for k, v in header.items():
            judged.setdefault(k, set()).update(x.strip() for x in v.split(",") if x.strip())
    report = report_dir_check.prepare(out, [(target, scenario) for _d, target, scenario in pairs])
    try:
        budget = CopyBudget(MAX_MERGE_COPY_BYTES)
        for directory, target, scenario in pairs:
            session = directory / "sessions" / target / scenario
            if (session / "record.json").is_file():
                report.target_dir(target).copy_in(session, scenario, budget)
        model = Report(checks=checks, judged={k: ", ".join(sorted(v)) for k, v in judged.items()})
        verdict = judge(model, strict=args.strict, baseline=baseline, stale_fails=args.stale == "fail")
        print(render_table(model, verdict, ascii_only=args.ascii), end="")
        report.write("run.json", orjson.dumps({**model.judged, "result": verdict.result, "shards": len(shards)}))
        report.write("checks.json", checks_json(checks))
        report.write("junit.xml", junit_xml(model, strict=args.strict))
        for note in budget.not_copied[:10]:
            print(f"not copied: {note}")
        page = write_index_html(report.path, model, None, verdict=verdict, into=report.root)
        print(f"merged {len(shards)} report(s) into {report.path}: checks.json, junit.xml, sessions/")
        print(f"HTML report: {page}")
    finally:
        report.close()
    return verdict.exit_code
