"""argparse with the project's exit code for usage errors (3, not argparse's 2)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from contracts.exitcodes import USAGE


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")
