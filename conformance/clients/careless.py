#!/usr/bin/env python3
"""A careless outside client, standard library only: what ``run --client-cmd`` must catch.

It starts the server, plays the plan's turns (their input only: it ignores the plan's actions and
capabilities) without ever answering a server request, stops waiting after two seconds of silence (but waits
generously for the server's first answer: its process start is slow on a loaded machine), never
ends the server (a helper it leaves behind holds the server's stdin open) and writes no result file. The
harness must fail it on exactly that: unanswered requests, a server it did not end, processes left
running, and, where the plan cancels, steers, resumes or asks for experimentalApi, the plan not followed.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

SILENCE_S = 2.0
#: The first answer comes once the server's process started: on a loaded machine that alone can take seconds.
STARTUP_S = 60.0


def main() -> int:
    with open(os.environ["CODEX_HARNESS_PLAN"], encoding="utf-8") as fh:
        plan = json.load(fh)
    server = subprocess.Popen(
        [os.environ["CODEX_BIN"], "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    stdin, stdout = server.stdin, server.stdout  # as locals, the functions below see them narrowed
    # The helper keeps the server's stdin open after we are gone, so the server never sees EOF.
    subprocess.Popen(["sleep", "60"], pass_fds=(server.stdin.fileno(),), start_new_session=True)

    def send(frame: dict) -> None:
        stdin.write(json.dumps(frame).encode() + b"\n")
        stdin.flush()

    def read_until(done: str, first_s: float = SILENCE_S) -> bytes:
        # Linear in what it reads (a 40 MiB line is 640 reads): appending to bytes and searching the whole
        # buffer each time took a minute of CPU, so its verdict (the deadline) depended on the machine's load.
        buffered = bytearray()
        needle = done.encode()
        while True:
            ready, _, _ = select.select([stdout], [], [], first_s if not buffered else SILENCE_S)
            if not ready:
                return bytes(buffered)
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                return bytes(buffered)
            seen = max(0, len(buffered) - len(needle) + 1)
            buffered += chunk
            if buffered.find(needle, seen) >= 0:
                return bytes(buffered)

    send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "careless", "version": "0"}}})
    send({"method": "initialized"})
    send({"id": 2, "method": "thread/start", "params": {}})
    thread_id = None
    for line in read_until('"id":2', STARTUP_S).splitlines():
        if line.startswith(b'{"id":2,'):
            thread_id = json.loads(line)["result"]["thread"]["id"]
    for n, turn in enumerate(plan["turns"], 3):
        text = [{"type": "text", "text": turn["input"]}]
        send({"id": n, "method": "turn/start", "params": {"threadId": thread_id, "input": text}})
        read_until('"turn/completed"')
    time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
