"""Fault fuzzing: hypothesis-generated scenarios with derived ground truth, invariants, shrinking to files.

- :mod:`harness.fuzz.strategies` — public hypothesis strategies (``scenarios()`` and its parts);
- :mod:`harness.fuzz.timeline` / :mod:`harness.fuzz.truth` — the model that derives ``[expect]``;
- :mod:`harness.fuzz.coverage` — which fault kinds and client actions a run exercised.
"""
