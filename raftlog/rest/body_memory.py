"""``BodyMemory``: the bytes of REST request bodies being read or handled at once, bounded.

Why: a body is read whole before it is parsed (``raftlog.rest.bodies``), up to ``[rest]
max_body_bytes`` (4 MiB) and for up to ``[http] body_timeout_ms`` (30 s), and the listener
admits ``[http] max_connections`` (1,000). Forty-eight connections from four addresses, each
sending all but the last byte of a 4 MiB publish body and starting over when answered 408,
grew a peer from 65 to 1,026 MiB (``tests/faults/test_rest_trickled_bodies.py``); a thousand
would take any machine down.

How: a body larger than :data:`SMALL_BODY_BYTES` holds its size -- its ``Content-Length``
before a byte of it is read; a chunked body, once it passes that size, the whole
``max_body_bytes`` it may reach, given back down to its real size once read -- from the
moment it is read until its request's handler returns (the parsed body lives that long).
One that does not fit waits, unread, within its body time-out, then gets 503 ``Busy`` with
``Retry-After: 1``. While nothing is held any body fits, so one as large as the whole budget
still gets through, alone. Small bodies (most: a publish of a few records, an ack, a poll's
options) are not counted: one request per connection at a time, so the connection limit
bounds them, and a client that fills the budget with large bodies never holds them up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.web.byte_budget import ByteBudget, held_gauges
from raftlog.web.errors import RestError, busy

SMALL_BODY_BYTES: Final = 64 * 1024
"""Bodies of at most this many bytes are not counted (module docstring)."""
_HELD: Final = web.RequestKey("raftlog_body_held", int)


class BodyMemory(ByteBudget):
    """The REST API's budget of request body bytes (one per listener, used on its loop)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, exempt=SMALL_BODY_BYTES)
        self.waited = 0
        """Bodies that had to wait for room since start."""
        self.refused = 0
        """Bodies refused with 503 ``Busy`` since start (no room within their time-out)."""

    async def hold(self, request: web.Request, size: int, timeout: float) -> None:
        """Hold ``size`` bytes of ``request``'s body (nothing for a small one), waiting up to
        ``timeout`` seconds for room, then 503 ``Busy``. Given back when the handler
        returns (:meth:`middleware`) or by :meth:`shrink`."""
        counted = self.counted(size)
        if not self.fits(counted):
            self.waited += 1
        if not await self.acquire(counted, timeout):
            raise self.busy()
        request[_HELD] = request.get(_HELD, 0) + counted

    def busy(self) -> RestError:
        """The 503 ``Busy`` of a body that found no room in time (counted as refused)."""
        self.refused += 1
        return busy("request bodies being read fill [rest] body_memory_bytes; retry shortly")

    def shrink(self, request: web.Request, size: int) -> None:
        """Hold no more than ``size`` bytes for ``request`` (a chunked body, once read: it
        held the most it could reach)."""
        held = request.get(_HELD, 0)
        keep = self.counted(size)
        if held > keep:
            request[_HELD] = keep
            self.give(held - keep)

    def middleware(self) -> Middleware:
        """Gives back a request's body bytes once its handler returned or failed."""

        @web.middleware
        async def releases_bodies(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            try:
                return await handler(request)
            finally:
                self.give(request.pop(_HELD, 0))

        return releases_bodies


BODY_MEMORY: Final = web.AppKey("body_memory", BodyMemory)
"""Where the REST application keeps its :class:`BodyMemory` (``raftlog.rest.bodies`` finds
it through the request's ``config_dict``)."""


class BodyCollector(Collector):
    """``raftlog_rest_body_*``: the body bytes held against the limit, the bodies that waited
    for room and those refused."""

    def __init__(self, memory: BodyMemory) -> None:
        self._memory = memory

    def collect(self) -> Iterator[Metric]:
        """The gauges and the counters."""
        memory = self._memory
        yield from held_gauges("raftlog_rest_body", "Bytes of REST request bodies larger "
                               "than 64 KiB being read or handled now.",
                               "[rest] body_memory_bytes", memory)
        yield CounterMetricFamily("raftlog_rest_body_waits", "REST request bodies that "
                                  "waited for room in the body memory.", value=memory.waited)
        yield CounterMetricFamily("raftlog_rest_bodies_refused", "REST request bodies "
                                  "refused with 503 Busy (body memory full).",
                                  value=memory.refused)


__all__ = ["BODY_MEMORY", "SMALL_BODY_BYTES", "BodyCollector", "BodyMemory"]
