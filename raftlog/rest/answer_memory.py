"""``AnswerMemory``: the bytes of large REST answers being sent at once, bounded.

Why: a poll's answer (up to a topic read's 4 MiB of records, base64 in JSON) is built in
memory and held until the client has taken it. Sixty polls from one address whose clients
never read grew a peer from 83 to 742 MiB and kept it there; the listener admits up to a
thousand connections. The connection guard aborts a client that takes nothing for
``[http] send_timeout_ms``; this bounds what all clients can hold meanwhile.

How, for every answer: a middleware (innermost, so that the answer is written inside the
request's handling and the guard sees the connection busy) looks at its body; one of at
least :data:`COUNTED_FROM` bytes is counted while it is written -- ``prepare`` and
``write_eof``, which return once the transport's buffer is below its high-water mark, or
raise when the connection was aborted -- and one that does not fit gets 503 ``Busy`` with
``Retry-After: 1``. While nothing is counted any answer is admitted, so an answer larger
than the whole budget still gets out, alone. Small answers (most) leave through the
kernel's socket buffer at once and are not counted.

And for a poll, before it reads: it reserves a topic read's worth (:data:`READ_RESERVE`),
waiting for room when there is none -- answers being sent finish, or the guard aborts their
stalled clients -- for up to ``[rest] request_timeout_ms``, then 503 ``Busy`` (nothing is
consumed by a plain poll); so polls queue before they read or build anything (sixty at once
grew a peer by 400 MiB of answers being built when only finished answers were counted). The
reservation is given back when the read found nothing and the poll waits (an idle long poll
holds none); a woken poll reserves again before it builds its answer. A poll's answer is
built within its reservation (``raftlog.rest.pages``: what does not fit waits for the next
poll), so the bytes held never pass the limit, however the payloads encode.
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
from raftlog.web.hangups import forget_traceback

COUNTED_FROM: Final = 64 * 1024
"""Answers at least this large are counted (smaller ones fit the socket buffer at once)."""
READ_RESERVE: Final = 6 * 1024 * 1024
"""What a poll reserves before its read: one topic read's record budget (4 MiB) in base64
(5.33 MiB) and the JSON of its messages; the answer is built within it
(``raftlog.rest.pages``)."""
_RESERVED: Final = web.RequestKey("raftlog_answer_reserved", int)


class AnswerMemory(ByteBudget):
    """The REST API's budget of large answer bytes (one per listener, used on its loop)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.refused = 0
        """Answers refused with 503 ``Busy`` since start."""

    def busy(self) -> RestError:
        """The 503 ``Busy`` of a large answer that found no room (counted)."""
        self.refused += 1
        return busy("large answers being sent fill [rest] answer_memory_bytes; retry shortly")

    async def reserve_read(self, request: web.Request, timeout: float) -> None:
        """Before a poll's read: reserve what it may bring, waiting up to ``timeout`` for
        room (answers being sent finish, or their stalled clients are aborted), then 503
        ``Busy``. Given back by :meth:`release_read` or when the handler returns."""
        if not await self.acquire(READ_RESERVE, timeout):
            raise self.busy()
        request[_RESERVED] = request.get(_RESERVED, 0) + READ_RESERVE

    def reserved(self, request: web.Request) -> int:
        """What ``request`` holds reserved now (its answer is built within it)."""
        return int(request.get(_RESERVED, 0))

    async def resize(self, request: web.Request, size: int, timeout: float) -> None:
        """Make ``request``'s reservation ``size`` bytes (its first message is larger than
        what it holds): what it holds is given back and ``size`` taken anew, waiting up to
        ``timeout`` for room, then 503 ``Busy``. The caller dropped what it read first and
        reads again once this returns: a poll never waits for room while it holds records
        or a reservation, so polls cannot hold the memory waiting for each other (160 polls
        woken by one 6 MiB record did, each holding 6 MiB and wanting 8). Alone, any size
        fits."""
        self.give(request.pop(_RESERVED, 0))
        if not await self.acquire(size, timeout):
            raise self.busy()
        request[_RESERVED] = size

    def release_read(self, request: web.Request) -> None:
        """Give back what :meth:`reserve_read` took (a poll that found nothing and waits:
        an idle long poll holds no memory)."""
        self.give(request.pop(_RESERVED, 0))

    def middleware(self) -> Middleware:
        """Writes each large answer itself, counted (module docstring)."""

        @web.middleware
        async def within_memory(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            try:
                response = await handler(request)
            except BaseException:
                self.release_read(request)
                raise
            reserved = request.pop(_RESERVED, 0)
            body = response.body if isinstance(response, web.Response) else None
            size = len(body) if isinstance(body, bytes | bytearray) else 0
            if size < COUNTED_FROM:
                self.give(reserved)
                return response
            if not (reserved or self.fits(size)):
                raise self.busy()  # nothing reserved to give back
            self.take(size)  # a reserved poll's answer is always sent: it waited its turn
            self.give(reserved)
            try:
                await response.prepare(request)
                await response.write_eof()
            except ConnectionError as exc:  # aborted (a client that stopped reading) or gone
                forget_traceback(exc)
            finally:
                self.give(size)
            return response

        return within_memory


class AnswerCollector(Collector):
    """``raftlog_rest_answer_*``: the large answer bytes held against the limit, and the
    answers refused."""

    def __init__(self, memory: AnswerMemory) -> None:
        self._memory = memory

    def collect(self) -> Iterator[Metric]:
        """The gauges and the counter."""
        memory = self._memory
        yield from held_gauges("raftlog_rest_answer", "Bytes of large REST answers being "
                               "sent now.", "[rest] answer_memory_bytes", memory)
        yield CounterMetricFamily("raftlog_rest_answers_refused", "Large REST answers "
                                  "refused with 503 Busy (answer memory full).",
                                  value=memory.refused)


__all__ = ["COUNTED_FROM", "READ_RESERVE", "AnswerCollector", "AnswerMemory"]
