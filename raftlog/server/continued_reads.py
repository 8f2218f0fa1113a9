"""``ContinuedReads``: ``TR``, ``TF`` and ``KK`` reads that stopped passing over unreadable
records (keys) before finding one, continued on the next timer passes, not answered empty.

Why: a read passes over records it must not answer -- superseded copies of a compacted
topic, which stay until log compaction passes them (never, with compaction off), and records
whose own TTL ran out. One read walked all of them in one loop pass (0.6-0.7 s per 200,000,
for any reader), so the topic machine now stops after ``SKIP_SCAN`` of them
(``raftlog.topics.records.SkipBudget``) and says where (``resume`` in the answer's meta).
An answer with records goes as it is (``more``: the client reads on after its last record).
An answer without records must not reach the client: an older one would take it for "no
more records". So the peer rewrites the request to start where the walk stopped and runs
it again on a later pass, at most ``CONTINUE_TIME`` of such reads a pass. Rewriting is exact:
nothing before that position can become readable (a superseded copy stays superseded, an
expired record expired, and new records come after everything applied). Everything runs on
the consensus thread: no locks.

A client that resends the request (same routing id and message id: its transport repeats a
request after silence) is not run again while its read goes on (``holds``): starting the
walk over at every resend, a read longer than the resend interval never ended. At most
``MAX_CONTINUED`` reads are continued at once, ``MAX_PER_CLIENT`` of one connection; past
that a read is answered as it is (zero records, ``more``, ``resume``: a client that knows
``resume`` reads on from it, as ``subscribe`` does).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from raftlog.rpc.frames import TRUE_FRAME, decode_json
from raftlog.rpc.messages import ClientDispatch
from raftlog.topics import wire as rpc
from raftlog.topics import wire_fetch, wire_kv
from raftlog.topics.records import RecordId

MAX_CONTINUED: Final = 10_000
"""Reads continued at once; more are answered as they are."""
MAX_PER_CLIENT: Final = 64
"""Reads of one connection (routing id) continued at once: the queue goes round, so a
client flooding it with long walks would otherwise slow every other client's."""
CONTINUE_TIME: Final = 0.01
"""Seconds one timer pass spends continuing reads at most (it stops after the read that
passes it): each read walks at most ``SKIP_SCAN`` records, so a pass stays near this."""

Answer = Callable[[bytes, bytes, ClientDispatch], None]
"""Run a request again as if it had just come (``InfoService._answer``)."""


def stopped_empty(message: ClientDispatch, answer: Sequence[bytes]) -> RecordId | bytes | None:
    """Where the walk of a successful answer without records (``KK``: keys) stopped: a
    record id (``TR``, ``TF``) or the last key passed (``KK``). None: the answer has
    records, is an error, its walk ended, or its type walks nothing."""
    if len(answer) != 2 or answer[0] != TRUE_FRAME:
        return None
    if message.type == wire_kv.TYPE_KV_KEYS:
        return wire_kv.stopped_keys(answer)
    if message.type not in (rpc.TYPE_READ, wire_fetch.TYPE_FETCH):
        return None
    try:
        meta = decode_json(answer[1], 1)
    except Exception:  # not a read answer's meta: nothing to continue
        return None
    return rpc.resume_of(meta) if isinstance(meta, dict) else None


def resumed(message: ClientDispatch, at: RecordId | bytes) -> ClientDispatch | None:
    """``message`` going on from ``at``: a ``TR`` or ``TF`` starting at record ``at``,
    inclusive; a ``KK`` after key ``at`` (None: anything else)."""
    if isinstance(at, bytes):
        if message.type != wire_kv.TYPE_KV_KEYS:
            return None
        keys = replace(wire_kv.decode_keys_request(message.args), after=at)
        return ClientDispatch(message.type, tuple(wire_kv.encode_keys_request(keys)))
    if message.type == rpc.TYPE_READ:
        read = _from(rpc.decode_read_request(message.args), at)
        return ClientDispatch(message.type, tuple(rpc.encode_read_request(read)))
    if message.type == wire_fetch.TYPE_FETCH:
        fetch = wire_fetch.decode_fetch_request(message.args)
        body = replace(fetch, read=_from(fetch.read, at))
        return ClientDispatch(message.type, tuple(wire_fetch.encode_fetch_request(body)))
    return None


def _from(read: rpc.ReadRequest, at: RecordId) -> rpc.ReadRequest:
    return replace(
        read, from_index=at.index, from_position=at.position, from_time_ms=None, inclusive=True
    )


class ContinuedReads:
    """The reads of one peer that go on where their walk stopped (module docstring)."""

    def __init__(self, answer: Answer, clock: Callable[[], float] = time.perf_counter) -> None:
        self._answer = answer
        self._clock = clock
        self._queue: OrderedDict[tuple[bytes, bytes], ClientDispatch] = OrderedDict()
        self._per_client: Counter[bytes] = Counter()

    def __len__(self) -> int:
        return len(self._queue)

    def holds(self, routing: bytes, msg_id: bytes) -> bool:
        """Whether this request goes on here already (a resend of it is dropped)."""
        return (routing, msg_id) in self._queue

    def offer(
        self, routing: bytes, msg_id: bytes, message: ClientDispatch, answer: Sequence[bytes]
    ) -> bool:
        """Whether ``answer`` stopped without records and its read now waits to go on
        (then it is not answered now)."""
        at = stopped_empty(message, answer)
        if at is None:
            return False
        key = (routing, msg_id)
        if key not in self._queue and (
            len(self._queue) >= MAX_CONTINUED or self._per_client[routing] >= MAX_PER_CLIENT
        ):
            return False
        try:
            again = resumed(message, at)
        except Exception:  # a request that decoded once decodes again: never here
            return False
        if again is None:
            return False
        if self._queue.pop(key, None) is None:
            self._per_client[routing] += 1
        self._queue[key] = again
        return True

    def run(self) -> None:
        """Each timer pass: run queued reads again, oldest first, for ``CONTINUE_TIME``."""
        started = self._clock()
        while self._queue and self._clock() - started < CONTINUE_TIME:
            (routing, msg_id), message = self._queue.popitem(last=False)
            self._per_client[routing] -= 1
            if not self._per_client[routing]:
                del self._per_client[routing]
            self._answer(routing, msg_id, message)

