"""``GuardedSite``: the aiohttp site of the HTTP listener, accepting through its guard.

Why apart from :mod:`raftlog.observability.guard`: the guard is the connection policy
(caps, time-outs, eviction, reaping); this is only the adapter aiohttp's runner needs to
start and stop a listener whose accept loop is the guard's own, not ``loop.create_server``.
"""

from __future__ import annotations

from aiohttp import web

from raftlog.observability.guard import BACKLOG, ConnectionGuard


class GuardedSite(web.BaseSite):
    """An aiohttp site that accepts through a :class:`ConnectionGuard`."""

    def __init__(self, runner: web.BaseRunner, guard: ConnectionGuard, host: str,
                 port: int) -> None:
        super().__init__(runner, ssl_context=guard.ssl_context, backlog=BACKLOG)
        self._guard = guard
        self._host = host
        self._port = port

    @property
    def name(self) -> str:
        """The URL served."""
        scheme = "https" if self._guard.ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        """Register with the runner and bind."""
        await super().start()
        server = self._runner.server
        assert server is not None
        self._port = self._guard.listen(server, self._host, self._port)

    async def stop(self) -> None:
        """Stop accepting."""
        self._guard.close()
        await super().stop()
