"""Every client request beyond the turn core, answered as the real binary answers it offline.

One module per family holds a method table (``HANDLERS``: method -> handler(:class:`Call`) -> result):
:mod:`.threads`, :mod:`.config_account`, :mod:`.fs_search`, :mod:`.plugins`, :mod:`.experimental`. A
method no table holds gets the smallest answer its pinned response schema accepts
(:mod:`.schema_answer`): those are the methods the real binary only answers with a model, an account or
the network. Recorded answers and the schema are the release's (its folder, :mod:`contracts.releases`).
The engine calls :func:`dispatch` from one place, after its own checks (params present, initialized,
experimental gate); params are checked against the schema first (:mod:`.params`).
``[[methods]]`` entries of the scenario take a request before all that (:mod:`.overrides`).

Sans-IO like the engine, except that the fs methods read the session's work directory (bounded,
:mod:`.fs_search`); nothing is ever written to disk or run on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.messages import INVALID_REQUEST
from fake_server.surface import config_account, experimental, fs_search, overrides, plugins, threads
from fake_server.surface.call import Call
from fake_server.surface.errors import SurfaceError
from fake_server.surface.params import problem as params_problem
from fake_server.surface.schema_answer import minimal_result
from fake_server.surface.state import SurfaceState

if TYPE_CHECKING:
    from fake_server.engine import Engine

__all__ = [
    "HANDLERS",
    "Call",
    "SurfaceError",
    "SurfaceState",
    "answer",
    "decorate_thread",
    "overrides",
]

Handler = Callable[[Call], Any]

HANDLERS: dict[str, Handler] = {
    **threads.HANDLERS,
    **config_account.HANDLERS,
    **fs_search.HANDLERS,
    **plugins.HANDLERS,
    **experimental.HANDLERS,
}


def answer(engine: Engine, method: str, params: Any) -> Call:
    """Run the handler of ``method``: the result is in ``call.result``, or ``call.error`` holds its refusal.

    The caller writes ``call.notes_before``, then the answer, then ``call.notes_after``.
    """
    call = Call(engine, method, params if isinstance(params, dict) else {})
    handler = HANDLERS.get(method)
    try:
        call.result = handler(call) if handler is not None else minimal_result(engine.profile.schema_release, method)
    except SurfaceError as err:
        # Kept without its traceback and the error it replaced: both hold the handler's frames, which hold
        # the call (its params, a write's data), a cycle only the collector frees, and it seldom runs when
        # the objects are few but large (refused writes of 1 MiB each piled up, 20 MiB per 20).
        err.__context__ = err.__cause__ = None
        call.error = err.with_traceback(None)
    return call


def decorate_thread(engine: Engine, thread: Any, body: dict[str, Any]) -> dict[str, Any]:
    return threads.decorate(engine, thread, body)


def dispatch(engine: Engine, request: Any, params: Any) -> None:
    """Answer ``request`` (a method no engine handler holds): notifications before, the answer, those after."""
    box = engine.box
    refused = params_problem(engine.profile.schema_release, request.frame)
    if refused is not None:
        box.respond_error(request.id, INVALID_REQUEST, refused)
        return
    call = answer(engine, request.method, params)
    for method, note in call.notes_before:
        box.notify(method, note)
    err = call.error
    if err is None:
        box.respond(request.id, call.result)
    elif err.data is None:
        box.respond_error(request.id, err.code, err.message)
    else:
        box.respond_error(request.id, err.code, err.message, err.data)  # the real errors carry data: null
    if err is None:
        for method, note in call.notes_after:
            box.notify(method, note)
        for delay_ms, method, note in call.notes_later:
            box.after(delay_ms, lambda method=method, note=note: box.notify(method, note))


def resumable(engine: Engine, thread: Any) -> bool:
    """thread/resume finds a rollout: a turn ran, or the thread was named, forked or archived."""
    return not thread.ephemeral and (bool(thread.turns) or threads.materialised(engine, thread))


def reload(engine: Engine, thread: Any, result: dict[str, Any]) -> None:
    """thread/resume of a thread this server had unloaded (archived, then unarchived) loads it again.

    Observed: the status change comes after the history deprecation notice, just before the answer,
    and the answer then carries ``serviceTier: "default"`` (read back from the rollout).
    """
    extra = engine.surface.threads.get(thread.thread_id)
    if extra is not None and not extra.loaded and not extra.archived:
        extra.loaded = True
        engine.box.notify("thread/status/changed", {"threadId": thread.thread_id, "status": thread.status})
        result["serviceTier"] = "default"
