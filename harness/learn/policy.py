"""The approval table of a release (``policy.json`` of its folder), learned from a policy observation.

``tests/policy_observe.py`` plays the same four tool calls (a plain command, an escalated command, a patch
inside the work directory and one outside it) under each ``approvalPolicy`` × ``sandbox`` × ``approvalsReviewer``
on a binary and writes what each turn did. :func:`table` reduces that to one outcome per setting and tool call,
the fact the fake plays (:mod:`fake_server.policy`):

- ``ask``: the server sends the client an approval request (command or file change);
- ``review``: the approvals reviewer model decides (``item/autoApprovalReview/*``); the client is asked nothing;
- ``run``: the call runs (in the sandbox) with nothing asked;
- ``reject``: the call is refused before it starts: no item, the model is told why and called again.

The ``thread:`` cases (settings in ``thread/start``) make the table, with the settings only ``config.toml`` can
give (``on-failure``); the ``turn:``, ``config:`` and ``flag:`` cases of the same settings must agree with them
(:func:`disagreements`): where a setting is given does not change what it does.
"""

from __future__ import annotations

from typing import Any

OUTCOMES = ("ask", "review", "run", "reject")
ACTIONS = ("command", "command_escalated", "patch_inside", "patch_outside")
FORMAT = 1


def outcome(turn: dict[str, Any]) -> str:
    """One observed turn's outcome (see the module docstring)."""
    if turn.get("requests"):
        return "ask"
    if turn.get("review_notes"):
        return "review"
    told = " ".join(turn.get("model_was_told") or [])
    # A command that ran in the sandbox and failed there still ran (its output says so); it may complete
    # without an item when it fails at once (observed both ways).
    if turn.get("tool") or turn.get("ran") or "Process exited with code" in told:
        return "run"
    return "reject"


def _key(case: str) -> tuple[str, str]:
    where, _, setting = case.partition(": ")
    return where, setting


def table(observed: dict[str, Any], release: str, source: str) -> dict[str, Any]:
    """``policy.json``: ``outcomes["<policy> / <sandbox> / <reviewer>"][action]``."""
    outcomes: dict[str, dict[str, str]] = {}
    # thread/start first; a setting only config.toml can give (on-failure, no longer a policy of the schema's) next
    ordered = sorted(observed.items(), key=lambda kv: _key(kv[0])[0] != "thread")
    for case, turns in ordered:
        _, setting = _key(case)
        if setting in outcomes or "failed" in turns or "error" in turns.get("thread/start", {}):
            continue
        outcomes[setting] = {a: outcome(turns[a]) for a in ACTIONS if a in turns and "error" not in turns[a]}
    return {
        "format": FORMAT,
        "release": release,
        "aliases": aliases(observed),
        "refused_at_start": refused(observed),
        "policies": {"granular": "granular with sandbox_approval", "granular-no-sandbox-approval": "granular without"},
        "outcomes": dict(sorted(outcomes.items())),
        "learned_from": source,
    }


def aliases(observed: dict[str, Any]) -> dict[str, str]:
    """Policy names the binary answers as another (``thread/start``'s ``approvalPolicy`` for a case set otherwise)."""
    out: dict[str, str] = {}
    for case, turns in observed.items():
        where, setting = _key(case)
        answered = turns.get("thread/start", {}).get("approvalPolicy") if "failed" not in turns else None
        name = setting.split(" / ")[0]
        if where in ("thread", "config", "flag") and isinstance(answered, str) and answered != name:
            out[name] = answered
    return dict(sorted(out.items()))


def refused(observed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Policies the binary refuses to start with from config.toml / ``-c``: what it says (stderr's first line,
    without its ``Error: `` prefix) and its exit status."""
    out: dict[str, dict[str, Any]] = {}
    for case, turns in observed.items():
        where, setting = _key(case)
        said = turns.get("said")
        if where in ("config", "flag") and "failed" in turns and isinstance(said, str) and said:
            out[setting.split(" / ")[0]] = {"said": said.removeprefix("Error: "), "exit": turns.get("exit")}
    return dict(sorted(out.items()))


def disagreements(observed: dict[str, Any]) -> list[str]:
    """The ``turn:`` / ``config:`` cases whose outcomes differ from the ``thread:`` case of the same settings."""
    thread = {s: t for c, t in observed.items() for w, s in [_key(c)] if w == "thread"}
    out: list[str] = []
    for case, turns in observed.items():
        where, setting = _key(case)
        base = thread.get(setting)
        if where == "thread" or base is None or "failed" in turns:
            continue
        for action in ACTIONS:
            if action in turns and action in base and outcome(turns[action]) != outcome(base[action]):
                out.append(f"{case}: {action} {outcome(turns[action])}, thread/start: {outcome(base[action])}")
    return out


def main() -> None:
    """Write a release's ``policy.json`` from a policy observation (``tests/data/real/<version>/policy/``)."""
    import argparse
    from pathlib import Path

    import orjson

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("observed", help="observed.json written by harness.learn.policy_observe")
    parser.add_argument("--release", required=True, help="the release observed (its version)")
    parser.add_argument("--out", required=True, help="the policy.json to write")
    args = parser.parse_args()
    observed = orjson.loads(Path(args.observed).read_bytes())
    source = f"the policy observation of codex-cli {args.release} ({args.observed}, harness.learn.policy_observe)"
    body = table(observed, args.release, source)
    Path(args.out).write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    main()
