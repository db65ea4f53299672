"""Outside clients: any program that drives ``codex app-server``, judged from what the fake saw.

``codex-harness run --client-cmd CMD`` starts CMD with a ``codex`` shim that runs ``fake-codex`` on the
scenario and records the wire (:mod:`fake_server.recording`), hands it the plan (:mod:`.plan`) and a
place for its result file (:mod:`.result`), bounds it by a deadline, kills whatever it left running
(:mod:`.procs`), and builds the session record from the recording (:mod:`.record`), judged by the same
contracts plus :mod:`contracts.checks.client_run` (:mod:`.runner`).
"""
