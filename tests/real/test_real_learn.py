"""``release learn`` on releases the package has no folder for (0.160.0, 0.150.0), then ``diff`` on scenarios it
did not learn from.

Both are older than every shipped profile and differ from the closest (0.163.0) in two ways the learning has
to find: a steer lets the streamed reply finish before the steer's input goes to the model, and the release has
no ``thread/readState/changed``; each pin also lacks methods the closest profile has, which the learned folder
must not take. 0.150.0 is the oldest release the project supports (docs/releases.md). The suite learns from a
part of the reference set (:data:`LISTING`: a turn, an
approval cancelled, a model error, experimental opt-outs, the request probe and two pending-input probes; plus
the file change :data:`harness.learn.sessions.EXTRA` adds) to stay cheap, about 40 s; the held-out scenarios
(a steer, an interrupted running command) must then diff empty with the learned folder, which the fake plays
as the binary's own release.

The binaries: ``CODEX_BIN_0_160_0``, ``CODEX_BIN_0_150_0`` (``make test`` installs them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from contracts import releases, schema_store
from fake_server import profiles
from harness import scenario_lookup
from harness.codex_bin import codex_version
from harness.fidelity_run import fidelity_diff
from harness.learn import learner

LISTING = """\
transcripts plain                        plain_two_turns
transcripts approval_cancel              approval_cancel
transcripts model_error                  model_error
transcripts experimental_optout          experimental_optout
probes      misc_requests                tests/data/real/scenarios/misc_requests.toml
probes      pending_start_then_steer     tests/data/real/scenarios/pending_start_then_steer.toml
probes      pending_steer_during_command tests/data/real/scenarios/pending_steer_during_command.toml
"""
HELD_OUT = ("steer", "running_command_interrupt")
#: The learning's own budget here (its target on the whole reference set is 4 minutes on 2 cores), with the policy
#: observation (33 sessions of four turns, harness.learn.policy_observe) it plays too.
BUDGET_S = 300


#: What each release's learning must find. A release learned here is in the Makefile's LEARNED_RELEASES.
#: (release, methods its pin lacks that the closest profile has)
RELEASES = {
    "0.160.0": ("thread/attachmentOwner/list",),
    "0.150.0": ("thread/items/read", "thread/attachmentOwner/list"),
}


def binary(release: str) -> Path:
    variable = "CODEX_BIN_" + release.replace(".", "_")
    value = os.environ.get(variable)
    if not value:
        if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
            pytest.fail(f"{variable} is not set (make test installs codex {release})")
        pytest.skip(f"codex {release} not selected (set {variable})")
    return Path(value)


@pytest.mark.real_codex
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_learned_release_plays_its_own_turn_flow(release: str, tmp_path: Path) -> None:
    codex = binary(release)
    assert codex_version(codex) == release
    listing = tmp_path / "reference.txt"
    listing.write_text(LISTING)
    for attempt in range(2):
        # Once more in a fresh store when a session still differs: on a loaded machine the real binary can stream
        # one more delta before a steer lands (docs/releases.md names the race); twice is a finding.
        store = tmp_path / f"store-{attempt}"
        with schema_store.using_user_store(store):
            assert attempt or release not in profiles.names()
            started = time.monotonic()
            learned = learner.learn(codex, store, reference=listing)
            took = time.monotonic() - started
            assert took < BUDGET_S, f"learning took {took:.0f} s"
        if not learned.remaining:
            break
    assert not learned.remaining, learned.remaining
    with schema_store.using_user_store(store):
        assert learned.base == "0.163.0"
        switches = learned.description["fake"]["switches"]
        assert switches["input_while_streaming"] == "waits"
        assert switches["diff_after_tools"] is True
        assert switches["abort_leaves_tools_open"] is True
        assert learned.description["trace"]["schema"] == 1
        assert release in profiles.names()
        played = releases.get(release)
        assert "thread/readState/changed" not in played.notifications
        for method in RELEASES[release]:
            assert method not in played.methods.known, f"{method}: not in codex-cli {release}'s pin"
        table = played.data("policy.json")
        assert table["release"] == release and table["outcomes"], "the approval table is learned too"
        for name in HELD_OUT:
            result = fidelity_diff(scenario_lookup.resolve(name), codex)
            assert result.profile == release and result.profile_note == "the binary's own release"
            assert result.equal, f"{name}: {result.to_json()}"
