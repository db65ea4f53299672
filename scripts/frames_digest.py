#!/usr/bin/env python3
"""One line per (release, scenario): a sha256 of the wire frames its record holds and its checks' verdicts.

A refactoring that keeps behaviour keeps these lines byte for byte. Run the script on two checkouts (say a
``git worktree`` of the commit before a change, and the working tree) and diff the outputs:

    git worktree add /tmp/before COMMIT
    python scripts/frames_digest.py /tmp/before > before.txt
    python scripts/frames_digest.py . > after.txt
    diff before.txt after.txt          # nothing printed: frames and verdicts identical

It drives each checkout through its public command line (``codex-harness run --report DIR --release X``,
imported from the checkout with ``PYTHONPATH``), so it works on an older layout of the packages too. The
catalogue is played on the in-process fake, on virtual time: the same checkout gives the same frames at every
run. Each release with a folder under the checkout's ``contracts/releases/`` is played (the profiled releases:
``$FAKE_CODEX_RELEASE`` makes the fake play it, ``--release`` makes the command check it first).

The frames are the lines of the record's ``wire.jsonl`` (each frame both ways with its virtual timestamp,
lines that were not frames and the harness's notes included) and ``model.jsonl`` when the record has one. The
fake's thread and turn ids, its ``emittedAtMs`` and its paths (``/RUN/...``) are derived from the virtual clock,
not from wall time or a random source, and are hashed as they are. One thing is normalised, and only it: the
order of the lines that share one virtual instant. trio runs the tasks that are ready at one instant in an
order it shuffles on purpose, so what several tasks write at the same virtual time comes in either order from
run to run: the client's reply and the server's next frame, the client's answers to two approvals it holds at
once, the ``exit N`` and ``stdout EOF`` notes of one ending. The lines of each virtual instant are sorted;
which frames were sent, their bytes and their virtual times are compared as they are. Two runs of one checkout
then print the same lines; ``--twice`` shows it.

``--transport ws`` (or ``unix``) has our client reach the fake over a socket: the websocket faults' scenarios
are played only there (the lines are labelled ``RELEASE/ws``). ``--release X`` plays one release only.

With ``--client-cmd "CMD ARGS"`` an outside client is judged instead, on ``--target fake-process`` (real
processes, real time): its frames vary from run to run, so only the verdicts are printed (``frames=-``).

    python scripts/frames_digest.py . --client-cmd "python conformance/clients/careful.py"

One ``codex-harness run`` at a time (a catalogue takes a few seconds on the in-process fake).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: A whole catalogue run is bounded: a hang is a finding, not a wait.
RUN_TIMEOUT_S = 1800.0
#: The files of a record that hold frames, in the order they are hashed.
FRAME_FILES = ("wire.jsonl", "model.jsonl")


def releases(checkout: Path) -> list[str]:
    """The releases the checkout has a folder for (``contracts/releases/codex-cli-X``)."""
    folders = (checkout / "contracts" / "releases").glob("codex-cli-*")
    return sorted((p.name.removeprefix("codex-cli-") for p in folders if p.is_dir()), key=_version_key)


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in release.split("."))


def run_catalogue(checkout: Path, release: str, report: Path, client_cmd: str | None, transport: str) -> None:
    """One ``codex-harness run`` of the checkout's built-in catalogue into ``report``."""
    argv = [sys.executable, "-m", "harness.cli", "run", "--quiet", "--report", str(report), "--release", release]
    if transport != "stdio":  # our client reaches the in-process fake over a websocket (or a unix socket)
        argv += ["--transport", transport]
    if client_cmd is not None:
        argv += ["--client-cmd", client_cmd, "--target", "fake-process", "--jobs", "1"]
    env = {**os.environ, "PYTHONPATH": str(checkout), "FAKE_CODEX_RELEASE": release}
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if not (report / "checks.json").is_file():  # exit 1 (a failing check) is a verdict; no report is not
        raise SystemExit(f"{release}: no report (exit {done.returncode}): {done.stderr[-2000:]}")


def normalised(jsonl: bytes) -> list[bytes]:
    """The lines, those of one virtual instant sorted (the module's docstring says why)."""
    out: list[bytes] = []
    for _t, same_instant in itertools.groupby(jsonl.splitlines(), key=lambda line: json.loads(line)["t"]):
        out += sorted(same_instant)
    return out


def frames_sha(session: Path) -> str:
    digest = hashlib.sha256()
    for name in FRAME_FILES:
        path = session / name
        if path.is_file():
            digest.update(name.encode() + b"\0")
            for line in normalised(path.read_bytes()):
                digest.update(line + b"\n")
    return digest.hexdigest()


def verdicts(session: Path) -> list[tuple[str, str]]:
    """(contract / check, status) of each check the record was given, in the report's order."""
    rows = json.loads((session / "checks.json").read_text())
    return [(f"{r['contract']} / {r['name']}", r["status"]) for r in rows]


def lines(label: str, report: Path, with_frames: bool) -> list[str]:
    out = []
    for target in sorted(p for p in (report / "sessions").iterdir() if p.is_dir()):
        for session in sorted(p for p in target.iterdir() if p.is_dir()):
            sha = frames_sha(session) if with_frames else "-"
            checks = json.dumps(verdicts(session), separators=(",", ":"))
            out.append(f"{label} {target.name} {session.name} frames={sha} checks={checks}")
    return out


def digest(
    checkout: Path, client_cmd: str | None, only: list[str] | None = None, transport: str = "stdio"
) -> list[str]:
    out: list[str] = []
    for release in only or releases(checkout):
        with tempfile.TemporaryDirectory(prefix="frames-digest-") as tmp:
            report = Path(tmp) / "report"
            print(f"{release}: playing the catalogue of {checkout}", file=sys.stderr, flush=True)
            run_catalogue(checkout, release, report, client_cmd, transport)
            label = release if transport == "stdio" else f"{release}/{transport}"
            out += lines(label, report, with_frames=client_cmd is None)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("checkout", type=Path, help="the checkout to play (its packages are imported from it)")
    parser.add_argument("--client-cmd", help="judge this outside client on fake-process (verdicts only)")
    parser.add_argument("--release", action="append", help="play only this release (repeatable)")
    parser.add_argument(
        "--transport", default="stdio", help="how our client reaches the fake: stdio (default), ws or unix (the "
        "websocket faults' scenarios are played only over a socket)"
    )
    parser.add_argument("--twice", action="store_true", help="play each release twice; exit 1 if they differ")
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    first = digest(checkout, args.client_cmd, args.release, args.transport)
    print("\n".join(first))
    if args.twice:
        second = digest(checkout, args.client_cmd, args.release, args.transport)
        differ = [a for a, b in zip(first, second, strict=False) if a != b] + (
            ["(the line counts differ)"] if len(first) != len(second) else []
        )
        print(f"second run: {len(differ)} line(s) differ", file=sys.stderr)
        for line in differ:
            print(f"  {' '.join(line.split()[:3])}", file=sys.stderr)
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
