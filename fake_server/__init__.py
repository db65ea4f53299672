"""The fake app-server, faithful to the codex-cli releases it has folders of, with scriptable scenarios and faults.

- :mod:`fake_server.engine` — the sans-IO engine: the inputs and the dispatch to the handlers of
  :mod:`~fake_server.surface` (one module per family of requests), which share :mod:`~fake_server.world` with it
  (:mod:`~fake_server.turns`, :mod:`~fake_server.programs`,
  :mod:`~fake_server.outbox`, :mod:`~fake_server.state`, :mod:`~fake_server.faults` (the fault registry's
  strike functions; its table is :mod:`contracts.faults`), :mod:`~fake_server.shapes`,
  :mod:`~fake_server.methods`, :mod:`~fake_server.ids`); :mod:`~fake_server.ledger` — which faults struck;
- :mod:`fake_server.inprocess` — ``serve_in_process(scenario, trace_root=None)``: a Transport on trio memory streams;
- :mod:`fake_server.cli` — the ``fake-codex`` executable: its arguments, ``--version``; the sessions it serves
  (stdio, or a ``ws://`` / ``unix://`` listener) are :mod:`fake_server.serving`, on :mod:`fake_server.runtime`;
- :mod:`contracts.scenario`, :mod:`contracts.scenario_file`, :mod:`fake_server.builder`,
  :mod:`fake_server.catalogue` — scenarios, their TOML format, the Python builder, the built-in catalogue;
- :mod:`fake_server.server_trace` — the server's rollout trace bundle.

The fake's self-checks on a virtual clock (the engine without trio, transcript replay, a plan player on raw
frames) are test code: ``tests/support/``.
"""
