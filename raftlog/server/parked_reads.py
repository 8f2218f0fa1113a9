"""``ParkedReads``: ``TR`` reads with a ``wait`` that found nothing, held until a record
comes or the wait ends (``raftlog.rpc.topics``, "TR read").

Why: a caught-up topic follower (``raftlog.client.topic_stream``) used to re-read every
0.1 s; a thousand idle followers were ten thousand reads a second. Now its read parks here
and costs nothing until this peer applies a batch: :meth:`on_applied` (called by the
consensus thread through the peer's ``ApplySignal``) re-runs the parked reads and answers
those that now find records; :meth:`sweep` (each timer pass) answers the expired ones with
their empty result. Everything runs on the consensus thread: no locks.

A client that resends the same request (same routing id and message id: its transport
repeats a request after silence) replaces its parked entry instead of adding one. At most
``MAX_PARKED`` reads wait; past that a read is answered at once (the follower then polls).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.rpc import topics as rpc
from raftlog.rpc.frames import TRUE_FRAME
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse
from raftlog.server.interfaces import Replies, RequestHandler

MAX_PARKED: Final = 10_000
"""Reads held at once; more are answered at once."""


@dataclass(slots=True)
class _Parked:
    routing: bytes
    msg_id: bytes
    message: ClientDispatch
    deadline: float


def is_empty_read(answer: Sequence[bytes]) -> bool:
    """Whether ``answer`` is a successful ``TR`` answer without records."""
    return len(answer) == 2 and answer[0] == TRUE_FRAME


def read_wait_ms(message: ClientDispatch) -> int:
    """The ``wait`` of a ``TR`` request (0 when absent or the request is malformed: a
    malformed one was already answered with its error)."""
    try:
        return rpc.decode_read_request(message.args).wait_ms
    except Exception:  # TopicError for a bad request: never parked
        return 0


class ParkedReads:
    """The waiting ``TR`` reads of one peer (module docstring)."""

    def __init__(self, handler: RequestHandler, replies: Replies,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._handler = handler
        self._replies = replies
        self._clock = clock
        self._parked: dict[tuple[bytes, bytes], _Parked] = {}

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, routing: bytes, msg_id: bytes, message: ClientDispatch, wait_ms: int) -> bool:
        """Hold ``message`` (an empty read) up to ``wait_ms``; False if full (answer now)."""
        key = (routing, msg_id)
        if key not in self._parked and len(self._parked) >= MAX_PARKED:
            return False
        self._parked[key] = _Parked(routing, msg_id, message, self._clock() + wait_ms / 1000)
        return True

    def on_applied(self, _index: int) -> None:
        """A batch was applied: answer every parked read that now finds records."""
        if self._parked:
            self._retry(self._clock(), found_only=True)

    def sweep(self, now: float) -> None:
        """Answer the reads whose wait ended (their current, probably empty, result)."""
        if self._parked:
            self._retry(now, found_only=False)

    def _retry(self, now: float, *, found_only: bool) -> None:
        for key, parked in list(self._parked.items()):
            if not found_only and now < parked.deadline:
                continue
            message = parked.message
            answer = self._handler.handle_request(message.type, message.args)
            if answer is None or (found_only and is_empty_read(answer)
                                  and now < parked.deadline):
                continue
            del self._parked[key]
            reply = ClientDispatchResponse(tuple(answer))
            self._replies.reply(parked.routing, parked.msg_id, reply)
