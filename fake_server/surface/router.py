"""The method table of every family beyond the turn core, and the one place such a request is answered.

The engine calls :func:`dispatch` after its own checks (the method known, params present, initialized, the
experimental gate). The params are checked against the pinned schema first (:mod:`.params`); a method no
table holds gets the smallest answer its pinned response schema accepts (:mod:`.schema_answer`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.messages import INVALID_REQUEST, NOTSET
from fake_server.surface import config_account, experimental, fs_search, plugins, threads
from fake_server.surface.call import Call
from fake_server.surface.errors import RequestError
from fake_server.surface.params import problem as params_problem
from fake_server.surface.schema_answer import minimal_result

if TYPE_CHECKING:
    from fake_server.outbox import Outbox

Handler = Callable[[Call], Any]

HANDLERS: dict[str, Handler] = {
    **threads.HANDLERS,
    **config_account.HANDLERS,
    **fs_search.HANDLERS,
    **plugins.HANDLERS,
    **experimental.HANDLERS,
}


def answer(call: Call) -> None:
    """Run the handler of ``call.method``: the result goes to ``call.result``, or ``call.error`` holds its refusal."""
    handler = HANDLERS.get(call.method)
    try:
        if handler is not None:
            call.result = handler(call)
        else:
            call.result = minimal_result(call.world.profile.schema_release, call.method)
    except RequestError as err:
        # Kept without its traceback and the error it replaced: both hold the handler's frames, which hold
        # the call (its params, a write's data), a cycle only the collector frees, and it seldom runs when
        # the objects are few but large (refused writes of 1 MiB each piled up, 20 MiB per 20).
        err.__context__ = err.__cause__ = None
        call.error = err.with_traceback(None)


def dispatch(call: Call) -> None:
    """Answer the call's request: the notifications before, the answer, those after (and later)."""
    box = call.world.box
    request = call.request
    refused = params_problem(call.world.profile.schema_release, request.frame)
    if refused is not None:
        box.respond_error(request.id, INVALID_REQUEST, refused)
        return
    answer(call)
    for method, note in call.notes_before:
        box.notify(method, note)
    err = call.error
    if err is None:
        box.respond(request.id, call.result)
    else:
        box.respond_error(request.id, err.code, err.message, NOTSET if err.data is None else err.data)
    if err is None:
        for method, note in call.notes_after:
            box.notify(method, note)
        for delay_ms, method, note in call.notes_later:
            box.after(delay_ms, functools.partial(_notify, box, method, note))


def _notify(box: Outbox, method: str, note: dict[str, Any]) -> None:
    """A notification sent later: a timer's callback (what ``notify`` returns is not wanted there)."""
    box.notify(method, note)
