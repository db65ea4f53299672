"""``codex-harness schema``: pin a release's wire schema, diff two pinned releases."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Final

import orjson

from codex_sandbox import confine
from contracts import schema_store
from contracts.exitcodes import FAILED, OK, UsageError
from contracts.protocol_index import Union, build_index
from contracts.releases import default_version
from contracts.schema_diff import Change, ChangeKind, SchemaDiff, diff_bundles
from harness.codex_bin import CodexNotFound, codex_version, find_codex
from harness.schema_pin import generate_both, same_as_pinned, user_store_to_write

NAME = "schema"
HELP = "pin the wire schema of a codex binary, or diff two pinned releases"

DEFAULT_TIMEOUT = 60.0
_WIDTH = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="schema_command", metavar="SUBCOMMAND", parser_class=type(parser))
    sub.required = True
    pin = sub.add_parser(
        "pin",
        help="generate and store the schema bundles of a codex binary under its version",
        description=(
            "Run `codex app-server generate-json-schema` (stable and --experimental) and store both bundles "
            "under codex-cli-<version>/ of your schema store: --store DIR, else $CODEX_HARNESS_STORE, else "
            "${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas. The pins shipped with the package are "
            "read-only: a release they hold is compared, not written again. Exit 0 when pinned (or identical to "
            "the shipped pin), 1 when the binary failed to generate them or its schema differs from the pin "
            "shipped for its version (your pin is written and reported; the shipped one is used), 3 on a usage "
            "error, a binary that does not run or a store that is not writable."
        ),
    )
    pin.add_argument("--codex", metavar="PATH", help="the codex binary (default: $CODEX_BIN)")
    confine.add_argument(pin)
    pin.add_argument(
        "--store", "--out", dest="store", metavar="DIR", type=Path, help="your schema store (default: see above)"
    )
    pin.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per generation (default 60)")
    pin.set_defaults(_schema_run=run_pin)

    diff = sub.add_parser(
        "diff",
        help="methods and fields added, removed and changed between two releases",
        description=(
            f"Compare two schemas; OLD and NEW are pinned versions (e.g. {default_version()}: the pins shipped with "
            "the package, then your store) or directories (a pinned release directory, or what "
            "generate-json-schema --out wrote). Exit 1 when a change can break a client (removed method, field, "
            "enum value or variant; a type change; a newly required field in something the client sends), 0 "
            "otherwise, 3 when a side cannot be read."
        ),
    )
    diff.add_argument("--store", metavar="DIR", type=Path, help="your schema store (default: as for `schema pin`)")
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.add_argument("--experimental", action="store_true", help="compare the experimental bundles")
    diff.add_argument("--json", action="store_true", help="print the changes as JSON")
    diff.add_argument("--limit", type=int, default=12, help="non-breaking lines shown per section (default 12)")
    diff.set_defaults(_schema_run=run_diff)


def run(args: argparse.Namespace) -> int:
    return int(args._schema_run(args))


# --- pin --------------------------------------------------------------------------------------------


def run_pin(args: argparse.Namespace) -> int:
    try:
        binary = find_codex(args.codex)
    except CodexNotFound as exc:
        raise UsageError(str(exc)) from exc
    if binary is None:
        raise UsageError("no codex binary: pass --codex PATH or set CODEX_BIN")
    root = user_store_to_write(args.store)
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    try:
        confine.current()
    except confine.ConfinementUnavailable as exc:
        raise UsageError(str(exc)) from None
    try:
        version = codex_version(binary)
    except CodexNotFound as exc:
        raise UsageError(str(exc)) from exc
    try:
        stable, experimental = generate_both(binary, args.timeout)
    except (RuntimeError, schema_store.SchemaStoreError) as exc:
        print(f"codex-harness schema pin: {exc}", file=sys.stderr)
        return FAILED
    if version in schema_store.shipped_releases():
        shipped = schema_store.load_meta(version, schema_store.SHIPPED_ROOT).get("bundles", {})
        if same_as_pinned(shipped, stable, experimental):
            print(f"codex-cli {version} is shipped with the package, identical: nothing to pin")
            return OK
    previous = None
    if version in schema_store.pinned_releases(root):
        previous = schema_store.load_meta(version, root).get("bundles", {})
    produced_by = {
        "binary_version": version,
        "commands": [
            "codex app-server generate-json-schema --out DIR",
            "codex app-server generate-json-schema --experimental --out DIR",
        ],
        "format": "zstd-compressed JSON object: path under DIR -> parsed schema (keys sorted)",
    }
    try:
        target = schema_store.write_release(version, stable, experimental, root, produced_by)
    except schema_store.SchemaStoreError as exc:
        raise UsageError(str(exc)) from exc
    digests = schema_store.load_meta(version, root)["bundles"]
    state = "new" if previous is None else ("unchanged" if previous == digests else "updated")
    print(
        f"pinned codex-cli {version} ({state}): {len(stable)} stable and {len(experimental)} experimental "
        f"schema files -> {target}"
    )
    note = schema_store.shadowed_note(version, root)
    if note:
        print(f"codex-harness schema pin: {note}", file=sys.stderr)
        return FAILED
    return OK


# --- diff -------------------------------------------------------------------------------------------


def _require_app_server_schema(label: str, bundle: schema_store.Bundle) -> None:
    """A directory of unrelated JSON files is not a schema: diffing it would report every method removed."""
    try:
        methods = build_index(bundle).methods
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise UsageError(f"{label}: not a codex app-server schema ({exc})") from None
    if not any(methods[union] for union in Union):
        raise UsageError(f"{label}: not a codex app-server schema (no ClientRequest or ServerNotification methods)")


def run_diff(args: argparse.Namespace) -> int:
    sides = []
    with schema_store.using_user_store(args.store):
        for spec in dict.fromkeys((args.old, args.new)):
            note = schema_store.shadowed_note(spec) if schema_store.is_version(spec) else None
            if note:
                print(f"codex-harness schema diff: {note}", file=sys.stderr)
        for spec in (args.old, args.new):
            try:
                sides.append(schema_store.open_bundle(spec, args.experimental))
            except schema_store.SchemaStoreError as exc:
                raise UsageError(str(exc)) from exc
    for spec, (label, bundle) in zip((args.old, args.new), sides, strict=True):
        if Path(spec).is_dir() and not (Path(spec) / schema_store.META_FILE).is_file():  # any *.json files
            _require_app_server_schema(label, bundle)
    (old_label, old), (new_label, new) = sides
    result = diff_bundles(old, new, old_label, new_label)
    if args.json:
        payload = {
            "old": old_label,
            "new": new_label,
            "experimental": args.experimental,
            "breaking": result.is_breaking,
            "changes": [
                {
                    "kind": c.kind.value,
                    "where": c.where,
                    "name": c.name,
                    "old": c.old,
                    "new": c.new,
                    "breaking": c.breaking,
                    "hurts": c.hurts,
                }
                for c in result.changes
            ],
        }
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(format_diff(result, args.experimental, max(args.limit, 0)))
    return FAILED if result.is_breaking else OK


def _wrapped(prefix: str, names: list[str]) -> list[str]:
    return textwrap.wrap(
        ", ".join(names),
        width=_WIDTH,
        initial_indent=prefix,
        subsequent_indent=" " * len(prefix),
        break_on_hyphens=False,
    )


def _capped(names: list[str], cap: int) -> list[str]:
    return names if len(names) <= cap else [*names[:cap], f"… {len(names) - cap} more"]


_WHO: Final = {
    "reader": "(clients that read it)",
    "writer": "(clients that send it)",
    "reader+writer": "(clients that read or send it)",
}


def _line(change: Change) -> str:
    mark = f"  BREAKING {_WHO.get(change.hurts, '')}".rstrip() if change.breaking else ""
    k = change.kind
    if k is ChangeKind.SHAPE_CHANGED:
        return f"  ~ {change.where}: {change.old} -> {change.new}{mark}"
    if k is ChangeKind.FIELD_REMOVED:
        return f"  - {change.where}.{change.name} ({change.old}){mark}"
    if k is ChangeKind.FIELD_ADDED:
        return f"  + {change.where}.{change.name}: {change.new}{mark}"
    if k is ChangeKind.FIELD_TYPE_CHANGED:
        return f"  ~ {change.where}.{change.name}: {change.old} -> {change.new}{mark}"
    if k is ChangeKind.FIELD_NOW_REQUIRED:
        return f"  ! {change.where}.{change.name} is now required{mark}"
    if k is ChangeKind.FIELD_NOW_OPTIONAL:
        return f"  ? {change.where}.{change.name} is now optional{mark}"
    if k is ChangeKind.ENUM_VALUES_REMOVED:
        return f"  - {change.where}: {change.name}{mark}"
    if k is ChangeKind.ENUM_VALUES_ADDED:
        return f"  + {change.where}: {change.name}{mark}"
    if k is ChangeKind.VARIANT_REMOVED:
        return f"  - {change.where} variant {change.name}{mark}"
    if k is ChangeKind.VARIANT_ADDED:
        return f"  + {change.where} variant {change.name}{mark}"
    return f"  {k.value} {change.where} {change.name}{mark}"


def _section(title: str, changes: list[Change], limit: int) -> list[str]:
    if not changes:
        return []
    breaking = [c for c in changes if c.breaking]
    other = [c for c in changes if not c.breaking]
    lines = [f"{title} ({len(changes)}, {len(breaking)} breaking)"]
    # Breaking changes are what a reviewer must see: three times the room of the others.
    lines += [_line(c) for c in breaking[: limit * 3]]
    lines += [_line(c) for c in other[:limit]]
    hidden = max(len(breaking) - limit * 3, 0) + max(len(other) - limit, 0)
    if hidden:
        lines.append(f"  … {hidden} more (--limit N or --json for all)")
    return lines


def format_diff(result: SchemaDiff, experimental: bool = False, limit: int = 12) -> str:
    """The reviewer's screen: verdict first, then methods, fields, enums and variants, types."""
    bundle = "experimental" if experimental else "stable"
    verdict = f"BREAKING ({len(result.breaking)} changes can break a client)" if result.is_breaking else "compatible"
    lines = [f"schema diff {result.old_label} -> {result.new_label} ({bundle} bundle): {verdict}"]
    if not result.changes:
        lines.append("no changes")
        return "\n".join(lines) + "\n"
    removed = result.of_kind(ChangeKind.METHOD_REMOVED)
    added = result.of_kind(ChangeKind.METHOD_ADDED)
    if removed or added:
        lines.append(f"methods ({len(added)} added, {len(removed)} removed)")
        for union in dict.fromkeys(c.where for c in removed + added):
            gone = [c.name for c in removed if c.where == union]
            new = [c.name for c in added if c.where == union]
            if gone:
                lines += _wrapped(f"  - {union} (BREAKING): ", _capped(gone, limit * 6))
            if new:
                lines += _wrapped(f"  + {union}: ", _capped(new, limit * 3))
    lines += _section(
        "fields",
        result.of_kind(
            ChangeKind.FIELD_REMOVED,
            ChangeKind.FIELD_TYPE_CHANGED,
            ChangeKind.SHAPE_CHANGED,
            ChangeKind.FIELD_NOW_REQUIRED,
            ChangeKind.FIELD_ADDED,
            ChangeKind.FIELD_NOW_OPTIONAL,
        ),
        limit,
    )
    lines += _section("enums", result.of_kind(ChangeKind.ENUM_VALUES_REMOVED, ChangeKind.ENUM_VALUES_ADDED), limit)
    lines += _section("variants", result.of_kind(ChangeKind.VARIANT_REMOVED, ChangeKind.VARIANT_ADDED), limit)
    types_added = [c.name for c in result.of_kind(ChangeKind.TYPE_ADDED)]
    types_removed = [c.name for c in result.of_kind(ChangeKind.TYPE_REMOVED)]
    if types_added or types_removed:
        lines.append(f"types ({len(types_added)} added, {len(types_removed)} removed)")
        for sign, names in (("-", types_removed), ("+", types_added)):
            if names:
                lines += _wrapped(f"  {sign} ", _capped(names, limit * 2))
    return "\n".join(lines) + "\n"
