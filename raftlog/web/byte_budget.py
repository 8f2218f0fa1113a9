"""``ByteBudget``: bytes a listener may hold at once for its clients, with waiting for room.

Why one class: the REST API's large answers (``raftlog.rest.answer_memory``) and the Kafka
listener's request frames (``raftlog.kafka.listener``) both hold client-sized buffers that
many connections can ask for at once; each bounds them with a budget that a request waits
on (its connection not served meanwhile) rather than growing the peer's memory. Used on one
event loop; not thread-safe.

Small holds can be exempt (``exempt``): a listener serves one request per connection at a
time and bounds its connections, so holds of at most ``exempt`` bytes are bounded by
``connections x exempt`` already; counting them would let a few clients that fill the budget
with large, slowly sent requests hold up every small one (a heartbeat, a one-record publish).
"""

from __future__ import annotations

import asyncio

from prometheus_client.core import GaugeMetricFamily


class ByteBudget:
    """At most ``limit`` bytes held, except that anything fits while nothing is held (so a
    request larger than the whole budget still gets through, alone)."""

    def __init__(self, limit: int, *, exempt: int = 0) -> None:
        self.limit = limit
        self.exempt = exempt
        """Holds of at most this many bytes are not counted (module docstring)."""
        self.held = 0
        """Bytes held now."""
        self._waiters: list[asyncio.Future[None]] = []

    def counted(self, size: int) -> int:
        """What a hold of ``size`` bytes counts against the budget: 0 when it is exempt.
        Callers acquire and give back this figure, not ``size``."""
        return size if size > self.exempt else 0

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes may be held now."""
        return not self.held or self.held + size <= self.limit

    def take(self, size: int) -> None:
        """Hold ``size`` bytes now, whether they fit or not (the caller decided)."""
        self.held += size

    def give(self, size: int) -> None:
        """Release ``size`` bytes and wake whoever waits for room."""
        self.held -= size
        if size:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def acquire(self, size: int, timeout: float | None = None) -> bool:
        """Hold ``size`` bytes once they fit, waiting up to ``timeout`` seconds (None: as
        long as it takes); False if the time ran out (nothing held then)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.fits(size):
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            left = None if deadline is None else deadline - loop.time()
            try:
                async with asyncio.timeout(left):  # not wait_for: on 3.11 it keeps a cycle
                    await waiter
            except TimeoutError:
                return False
        self.take(size)
        return True


def held_gauges(name: str, what: str, setting: str,
                budget: ByteBudget) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    """``{name}_held_bytes`` (help ``what``) and ``{name}_held_bytes_limit`` (help
    ``setting``): the pair every listener's budget shows in ``/metrics``."""
    return (GaugeMetricFamily(f"{name}_held_bytes", what, value=budget.held),
            GaugeMetricFamily(f"{name}_held_bytes_limit", f"{setting}.", value=budget.limit))


__all__ = ["ByteBudget", "held_gauges"]
