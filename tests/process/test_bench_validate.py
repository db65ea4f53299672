"""bench/validate.py runs end to end and prints its rates next to the orjson.loads baseline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support import paths

BENCH = paths.REPO / "bench" / "validate.py"


def test_validate_benchmark_prints_the_ratio(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--seconds", "0.2"], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = proc.stdout.decode()
    assert "orjson.loads alone" in out and "x orjson.loads" in out
    # The corpus is the whole reference set, the probes' deliberately wrong requests included.
    corpus = re.search(r"corpus: (\d+) frames from .* \((\d+) invalid", out)
    assert corpus is not None, out
    assert int(corpus.group(1)) > 300 and 0 < int(corpus.group(2)) < int(corpus.group(1)) // 4
