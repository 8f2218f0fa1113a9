"""``ParkedReads``: ``TR`` reads with a ``wait`` that found nothing, held until a record
comes or the wait ends (``raftlog.topics.wire``, "TR read").

Why: a caught-up topic follower (``raftlog.topics.client_stream``) used to re-read every
0.1 s; a thousand idle followers were ten thousand reads a second. Now its read parks here
and costs nothing until this peer applies a batch: :meth:`on_applied` (called by the
consensus thread through the peer's ``ApplySignal``) re-runs the parked reads *of the
topics that got records* (a topic's published-record count, from the monitoring totals,
tells; a topic without totals is re-read on every batch) and answers those that now find
records, so a thousand followers of a quiet topic cost nothing while another topic takes
writes; :meth:`sweep` (each timer pass) answers the expired ones with
their empty result. Everything runs on the consensus thread: no locks.

A client that resends the same request (same routing id and message id: its transport
repeats a request after silence) replaces its parked entry instead of adding one. At most
``MAX_PARKED`` reads wait; past that a read is answered at once (the follower then polls).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from raftlog.rpc.frames import TRUE_FRAME
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse
from raftlog.server.interfaces import Replies, RequestHandler
from raftlog.topics import wire as rpc
from raftlog.topics import wire_fetch

MAX_PARKED: Final = 10_000
"""Reads held at once; more are answered at once."""
WAKE_TIME: Final = 0.02
"""Seconds one pass over the parked reads spends at most (it stops after the read that
passes it); the rest wait for the next timer pass. Why, beside ``WAKE_BUDGET``: a wake-up
(``TF`` without credit, how a REST long poll waits) answers a few bytes but still reads the
record it found -- 160 long polls woken by one 6 MiB record read it 160 times in one pass,
3.8 s of the loop (``tests/faults/test_rest_woken_polls.py``; since then the machine keeps
the entry decoded, ``raftlog.topics.decoded_entries``, and the other 159 reads cost little,
but a pass over many topics' reads is still bounded by this)."""
WAKE_BUDGET: Final = 8 * 1024 * 1024
"""Answer bytes one pass over the parked reads sends at most; the reads still owed an answer
wait for the next timer pass. Why: one large record woke 2,000 reads of one client at once,
and reading and answering them all held the loop for 22 s (and the memory for 4 GB of
answers, before ``raftlog.server.answer_backlog`` shed the client); 64 MiB a pass still held
it 0.45 s, past the default election time-out."""


class Totals(Protocol):
    """What tells that a topic got records (``TopicTotals``)."""

    published_records: int


TotalsOf = Callable[[str], "Totals | None"]
"""A topic's totals by name (``TopicCounters.get``); None when unknown."""


def _version(totals: Totals | None) -> tuple[int, int] | None:
    return None if totals is None else (id(totals), totals.published_records)


@dataclass(slots=True)
class _Parked:
    routing: bytes
    msg_id: bytes
    message: ClientDispatch
    deadline: float
    topic: str
    version: tuple[int, int] | None
    """The topic's totals when parked (None: unknown, re-read on every batch)."""
    enough: Callable[[Sequence[bytes]], bool]
    """Whether an answer may go before the wait ends (``TR``: it has records; ``TF``: its
    thresholds, ``raftlog.topics.wire_fetch``)."""


def is_empty_read(answer: Sequence[bytes]) -> bool:
    """Whether ``answer`` is a successful ``TR`` answer without records."""
    return len(answer) == 2 and answer[0] == TRUE_FRAME


def _has_records(answer: Sequence[bytes]) -> bool:
    return not is_empty_read(answer)


Parkable = tuple[rpc.ReadRequest, Callable[[Sequence[bytes]], bool]]


def parkable(message: ClientDispatch, answer: Sequence[bytes]) -> Parkable | None:
    """What to park for a ``TR`` or ``TF`` answer that should wait: the read and the test
    an answer must pass to go before the wait ends (None: answer now)."""
    if message.type == rpc.TYPE_READ:
        request = waiting_read(message)
        return None if request is None or not is_empty_read(answer) else (request, _has_records)
    if message.type == wire_fetch.TYPE_FETCH:
        try:
            fetch = wire_fetch.decode_fetch_request(message.args)
        except Exception:  # answered with its error already
            return None
        if not fetch.read.wait_ms or wire_fetch.enough(fetch, answer):
            return None
        return fetch.read, lambda later: wire_fetch.enough(fetch, later)
    return None


def waiting_read(message: ClientDispatch) -> rpc.ReadRequest | None:
    """The ``TR`` request if it has a ``wait`` (None when it has none or is malformed: a
    malformed one was already answered with its error)."""
    try:
        request = rpc.decode_read_request(message.args)
    except Exception:  # TopicError for a bad request: never parked
        return None
    return request if request.wait_ms else None


class ParkedReads:
    """The waiting ``TR`` reads of one peer (module docstring)."""

    def __init__(self, handler: RequestHandler, replies: Replies,
                 totals: TotalsOf | None = None,
                 unread_over_limit: Callable[[bytes], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._handler = handler
        self._replies = replies
        self._unread_over_limit = unread_over_limit or (lambda _routing: False)
        """Whether a client leaves too many answers unread (its connection is shed then):
        its waiting reads are dropped, not read again (``raftlog.server.answer_backlog``)."""
        self._totals: TotalsOf = totals if totals is not None else (lambda _name: None)
        self._clock = clock
        self._parked: dict[tuple[bytes, bytes], _Parked] = {}
        self._owed = False
        """A pass stopped at ``WAKE_BUDGET``: the next timer pass goes on."""

    def __len__(self) -> int:
        return len(self._parked)

    def holds(self, key: object) -> bool:
        """Is the read ``(routing id, message id)`` still waiting? (The waiting-reads
        quota, ``raftlog.server.quota_gate``, forgets the answered ones by asking.)"""
        return key in self._parked

    def park(self, routing: bytes, msg_id: bytes, message: ClientDispatch,
             request: rpc.ReadRequest,
             enough: Callable[[Sequence[bytes]], bool] = _has_records) -> bool:
        """Hold ``message`` (an empty read, decoded: ``request``) up to its wait, or until
        an answer is ``enough``; False if full (answer now)."""
        key = (routing, msg_id)
        if key not in self._parked and len(self._parked) >= MAX_PARKED:
            return False
        self._parked[key] = _Parked(
            routing, msg_id, message, self._clock() + request.wait_ms / 1000, request.topic,
            _version(self._totals(request.topic)), enough,
        )
        return True

    def on_applied(self, _index: int) -> None:
        """A batch was applied: answer every parked read that now finds records."""
        if self._parked:
            self._retry(self._clock(), found_only=True)

    def sweep(self, now: float) -> None:
        """Answer the reads whose wait ended (their current, probably empty, result), and
        go on with the woken ones a pass left at ``WAKE_BUDGET`` or ``WAKE_TIME``."""
        if self._owed:
            self._owed = False
            self._retry(now, found_only=True)
        if self._parked and not self._owed:
            self._retry(now, found_only=False)

    def _retry(self, now: float, *, found_only: bool) -> None:
        spent, started, read = 0, self._clock(), False
        for key, parked in list(self._parked.items()):
            if spent >= WAKE_BUDGET or (read and self._clock() - started > WAKE_TIME):
                self._owed = True
                return
            if not found_only and now < parked.deadline:
                continue
            if found_only and parked.version is not None and now < parked.deadline:
                version = _version(self._totals(parked.topic))
                if version == parked.version:
                    continue  # nothing new in this topic: no read
                parked.version = version
            if self._unread_over_limit(parked.routing):
                del self._parked[key]  # its client reads nothing: no answer, no read
                continue
            message = parked.message
            answer = self._handler.handle_request(message.type, message.args)
            read = True
            if answer is None or (found_only and not parked.enough(answer)
                                  and now < parked.deadline):
                continue
            del self._parked[key]
            spent += sum(map(len, answer))
            reply = ClientDispatchResponse(tuple(answer))
            self._replies.reply(parked.routing, parked.msg_id, reply)
