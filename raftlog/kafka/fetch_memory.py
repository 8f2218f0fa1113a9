"""``FetchMemory``: the bytes of Fetch answers the Kafka listener holds at once, bounded.

Why: a Fetch answer is built in memory and held until the client has taken it, and a
client chooses how large it may be. Before this bound one Fetch naming the same partition
100 times with ``max_bytes`` of 2 GiB made the leader build a 420 MB answer (RSS 93 ->
1,310 MiB, 19.6 s of the listener's thread); a few connections doing that, or not reading
their answers, would exhaust the peer's memory. Kafka caps an answer with the broker's
``fetch.max.bytes``; raftlog does too (``[kafka] fetch_max_bytes``) and also bounds what all
connections' answers hold together (``[kafka] fetch_memory_bytes``).

How: every read of a partition first *reserves* a whole read answer
(:data:`READ_RESERVE`, what one topic read may return) and, once its records are cut to
the Fetch's limits, keeps only what it kept. A read that finds no room is skipped (the part
answers no records, the Fetch waits for its ``max_wait_ms`` as for any short answer, and the
client simply fetches again). What a request holds is released once its answer was handed
to the socket and drained (the listener), or when the Fetch re-reads after a wait; the
connection guard aborts a connection whose client takes none of its answer for ``[kafka]
send_timeout_ms``, so one that stops reading cannot keep the memory (and starve the others)
for long. The per-request count lives in a context variable: each connection is one asyncio
task, and a handler runs in its connection's task, so the listener sees what its handler
held. The bytes themselves are a :class:`~raftlog.web.byte_budget.ByteBudget`, as the REST
answers' and the Kafka request frames' are (a read never waits for room: it is skipped).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

from raftlog.topics.reads import READ_BUDGET
from raftlog.web.byte_budget import ByteBudget

READ_RESERVE: Final = READ_BUDGET
"""Bytes reserved while a partition is read: one topic read answer's record budget."""

_HELD: ContextVar[int] = ContextVar("kafka_fetch_held", default=0)
"""What the current request (its connection's task) holds."""


class FetchMemory(ByteBudget):
    """The listener's budget of Fetch answer bytes (one per listener, used on its loop);
    ``held`` is what all connections reserved or kept."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.deferred = 0
        """Partition reads skipped for want of room since start (``/metrics``)."""

    def reserve(self) -> bool:
        """Reserve :data:`READ_RESERVE` for one partition read; False (and counted) when the
        budget has no room for it (``limit`` holds at least one: the settings check it)."""
        if not self.fits(READ_RESERVE):
            self.deferred += 1
            return False
        self._add(READ_RESERVE)
        return True

    def keep(self, kept: int) -> None:
        """A reserved read is done and its answer keeps ``kept`` bytes (more than reserved
        only when a first record alone is larger: Kafka always sends one)."""
        self._add(kept - READ_RESERVE)

    def release_request(self) -> None:
        """Give back everything the current request holds (its answer was sent, or it
        reads again)."""
        self.give(_HELD.get())
        _HELD.set(0)

    def _add(self, n: int) -> None:
        if n >= 0:
            self.take(n)
        else:
            self.give(-n)
        _HELD.set(_HELD.get() + n)


__all__ = ["READ_RESERVE", "FetchMemory"]
