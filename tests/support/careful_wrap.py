"""careful.py (the reference outside client) playing a plan a script rewrote first: a client that templates its
prompts, or keeps budgets of its own, is careful.py with a line or two of Python before it reads the plan."""

from __future__ import annotations

from support import paths

CAREFUL = paths.REPO / "conformance" / "clients" / "careful.py"


def careful_on_rewritten_plan(rewrite: str, after_import: str = "") -> str:
    """A Python script: it loads the plan (``plan``; ``texts``: each turn's input), runs ``rewrite`` on it, hands the
    rewritten plan to careful.py through a temporary file (removed at the end), runs ``after_import`` once careful
    is imported (a patch), then careful.main(), exiting with its code."""
    return (
        "import json, os, sys, tempfile\n"
        f"sys.path.insert(0, {str(CAREFUL.parent)!r})\n"
        "plan = json.load(open(os.environ['CODEX_HARNESS_PLAN']))\n"
        "texts = [t['input'] for t in plan['turns']]\n"
        f"{rewrite}\n"
        "fd, path = tempfile.mkstemp(suffix='.json')\n"
        "os.write(fd, json.dumps(plan).encode()); os.close(fd)\n"
        "os.environ['CODEX_HARNESS_PLAN'] = path\n"
        "import careful\n"
        f"{after_import}"
        "try:\n"
        "    code = careful.main()\n"
        "finally:\n"
        "    os.unlink(path)\n"
        "sys.exit(code)\n"
    )
