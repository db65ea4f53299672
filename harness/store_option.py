"""``--store DIR``, the user's release store, as every command that reads releases takes it: one argument, one
check, one way to make every release lookup of the command read it (:func:`contracts.schema_store.using_user_store`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path

from contracts import schema_store
from contracts.exitcodes import UsageError

HELP = (
    "your release store, read for the binary's pin and the fake's learned profiles (default: $CODEX_HARNESS_STORE, "
    "else ${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas)"
)


def add_argument(parser: argparse.ArgumentParser, help: str = HELP) -> None:
    parser.add_argument("--store", metavar="DIR", type=Path, help=help)


@contextlib.contextmanager
def using(args: argparse.Namespace) -> Iterator[None]:
    """The block with ``--store`` (when given, a directory, else exit 3) as the store every release lookup reads."""
    store = getattr(args, "store", None)
    if store is not None and not Path(store).expanduser().is_dir():
        raise UsageError(f"--store {store}: not a directory (a release store: codex-cli-<version>/ folders)")
    with schema_store.using_user_store(store):
        yield
