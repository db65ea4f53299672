"""Every client request after the handshake, answered as the real binary answers it offline.

One module per family, each a method table (``HANDLERS``: method -> handler(:class:`~.call.Call`)):
:mod:`.core` (thread/start, thread/resume and the turn requests: they answer through the outbox themselves),
then :mod:`.threads`, :mod:`.config_account`, :mod:`.fs_search`, :mod:`.plugins`, :mod:`.experimental`, whose
handlers return the result and which :mod:`.router` answers; a method no table holds gets the smallest answer
its pinned response schema accepts (:mod:`.schema_answer`): those are the methods the real binary only answers
with a model, an account or the network. Recorded answers and the schema are the release's (its folder,
:mod:`contracts.releases`). ``[[methods]]`` entries of the scenario take a request before all that
(:mod:`.overrides`).

A handler gets the connection's :class:`~fake_server.world.World` through its call and never the engine: the
engine (above) owns the dispatch, the world (below) the state both share (:mod:`fake_server.state`).

Sans-IO like the engine, except that the fs methods read the session's work directory (bounded,
:mod:`.fs_search`); nothing is ever written to disk or run on the host.
"""
