"""``fake-codex``: a drop-in for ``codex`` that serves one scripted app-server session on stdio."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.argparsing import ArgumentParser

FAKE_VERSION = "0.171.0"


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="fake-codex", description="Scriptable fake of `codex app-server` 0.171.0.")
    parser.add_argument("--version", action="store_true", help="print the version like the real binary")
    args, _rest = parser.parse_known_args(argv)
    if args.version:
        print(f"codex-cli {FAKE_VERSION}")
        return 0
    parser.print_help()
    return 3


if __name__ == "__main__":
    sys.exit(main())
