"""Fault fuzzing: hypothesis-generated scenarios with derived ground truth, invariants, shrinking to files.

- :mod:`harness.fuzz.strategies` — public hypothesis strategies (``scenarios()`` and its parts), for
  users testing their own clients: ``from harness.fuzz.strategies import scenarios``;
- :mod:`harness.fuzz.table` — the fault table (``contracts.faults``) as placements, parameter strategies
  and effects: the fuzzer's only source of per-kind facts (it names no kind);
- :mod:`harness.fuzz.walk` / :mod:`harness.fuzz.truth` — the model of the fake's timeline that
  derives each scenario's ``[expect]`` from its steps (never from a client), one rule per effect course;
- :mod:`harness.fuzz.invariants` — what must hold on every example, and playing one;
- :mod:`harness.fuzz.driver` — ``fuzz()``: generate, play, judge, shrink a failure to files
  (:mod:`harness.fuzz.shrink`); ``codex-harness fuzz`` is its command line;
- :mod:`harness.fuzz.stateful` — ``SessionMachine``, a rule-based state machine over the session API;
- :mod:`harness.fuzz.coverage` — which fault kinds and client actions a run exercised.
"""
