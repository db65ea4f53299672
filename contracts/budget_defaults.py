"""The client's default budgets, in one place: a scenario's ``[client]`` plan (:class:`contracts.scenario.ClientPlan`),
the record's :class:`contracts.record.Budgets`, our client's options (``codex_client.options``) and the scenario
builder all read them from here, so a default changes in one line."""

from __future__ import annotations

#: one budget for the interrupt's answer and the turn/completed that follows it
INTERRUPT_BUDGET_MS = 2000
#: each request's answer (initialize, turn/start, turn/steer, the others)
REQUEST_TIMEOUT_MS = 30000
#: a turn, from turn/start to its end
TURN_TIMEOUT_MS = 60000
#: the whole teardown, every step
TEARDOWN_MS = 3000
#: the server's first answer, counted from its process's start
STARTUP_TIMEOUT_MS = 30000
