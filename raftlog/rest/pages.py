"""``AnswerPage``: a poll's JSON answer built within the answer memory it reserved.

Why: a poll reserves answer memory before it reads (``raftlog.rest.answer_memory``), and
that reservation is all the budget knew of the answer being built. The answer itself was
whatever the records encoded to: base64 makes a payload ~1.37x, ``text`` escapes each
control character to six bytes, and a read that passed its 4 MiB budget still took the
record that passed it (up to 10 MiB). So polls that each reserved 4 MiB built answers many
times larger, all of them held at once by clients that did not read: the limit held the
reservations, not the bytes (sixteen unread polls held 100.7 MB against 16 MiB).

Now an answer holds what fits its reservation. Messages are encoded one by one and the page
stops before the one that would pass it -- before encoding it when even its smallest
encoding (base64's exact length, a text payload's own bytes) cannot fit -- and says so with
``X-Raftlog-More: true``; the client asks again from the last id (a queue group's leases
not shown stay leased to the member and come first in its next poll). The first message
always goes, so a poll always progresses: when even its largest encoding may not fit the
reservation (a record larger than a read's reservation), :func:`answer_within` drops what
was read, resizes the reservation to that encoding -- waiting for room while it holds
nothing, so polls never hold the memory waiting for each other -- and reads again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from aiohttp import web

from raftlog.rest.answer_memory import AnswerMemory
from raftlog.rest.context import RestContext
from raftlog.security.policy import Principal
from raftlog.topics.wire import MAX_READ_WAIT_MS
from raftlog.web.errors import from_cluster

T = TypeVar("T")

MESSAGE_OVERHEAD: Final = 256
"""JSON bytes of one message besides its payload (and a watch event's key, counted apart:
``MessageFormat.extra``), at most: its id, timestamp, delivery count or type, field names
and punctuation."""
ESCAPE_GROWTH: Final = 6
"""The most a ``text`` or ``json`` payload grows when written in JSON: a control character
becomes ``\\u0001``."""


def smallest(size: int, encoding: str) -> int:
    """The fewest bytes a payload of ``size`` bytes can take in an answer: base64's exact
    length; a text payload's own bytes (or base64's, larger, when it is not text); a JSON
    one may shrink when written again (its blanks and escapes go)."""
    if encoding == "base64":
        return 4 * ((size + 2) // 3)
    return size if encoding == "text" else 0


def largest(size: int, encoding: str) -> int:
    """The most bytes a payload of ``size`` bytes, with its message, can take."""
    if encoding == "base64":
        return 4 * ((size + 2) // 3) + MESSAGE_OVERHEAD
    # text or json; a payload that is not valid text goes as base64, which is smaller
    return ESCAPE_GROWTH * size + MESSAGE_OVERHEAD


def _nothing(_item: object) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class MessageFormat(Generic[T]):
    """How a poll writes its items: ``render`` makes one item's JSON value,
    ``payload_size`` gives its payload's bytes, ``encoding`` is the payloads' encoding, and
    ``extra`` the most bytes an item's other variable fields take (a watch event's key,
    written as text: up to six times its bytes)."""

    render: Callable[[T], object]
    payload_size: Callable[[T], int]
    encoding: str
    extra: Callable[[T], int] = _nothing


class AnswerPage(Generic[T]):
    """The messages of ``items`` that fit the request's reserved answer memory, encoded."""

    def __init__(self, items: Sequence[T], form: MessageFormat[T]) -> None:
        self.items = items
        """What the poll read: the page holds the first ``len(parts)`` of them."""
        self._form = form
        self.parts: list[bytes] = []
        """The encoded messages that fit."""

    @property
    def cut(self) -> bool:
        """Whether messages were left out (the client asks again after the last one)."""
        return len(self.parts) < len(self.items)

    def first_room(self) -> int:
        """The room the first message may need at most (0: no messages)."""
        if not self.items:
            return 0
        form, first = self._form, self.items[0]
        return largest(form.payload_size(first), form.encoding) + form.extra(first) + 2

    def fill(self, reserved: int) -> None:
        """Encode the messages that fit ``reserved`` bytes (module docstring); the first
        one always (the caller made room for it: :meth:`first_room`)."""
        room, form = reserved - 2, self._form  # the brackets
        for item in self.items:
            floor = smallest(form.payload_size(item), form.encoding)
            if self.parts and floor > room:
                break
            part = json.dumps(form.render(item), ensure_ascii=False).encode()
            if self.parts and len(part) + 1 > room:
                break
            self.parts.append(part)
            room -= len(part) + 1

    def array(self) -> bytes:
        """The messages as one JSON array, ending in a newline."""
        return b"[" + b",".join(self.parts) + b"]\n"

    def response(self, headers: Mapping[str, str], *, more: bool = False) -> web.Response:
        """The answer: the array, ``X-Raftlog-More`` true when ``more`` or the page cut."""
        return web.Response(
            body=self.array(), content_type="application/json", charset="utf-8",
            headers={**headers, "X-Raftlog-More": str(more or self.cut).lower()},
        )


Read = Callable[[], Awaitable[tuple[Sequence[T], bool]]]
"""A poll's read: its items and whether more follow them."""
REREADS: Final = 3
"""Reads a poll makes at most before 503 ``Busy``: the first, and one after each resize
(a second resize means its first record changed meanwhile, e.g. retention)."""


async def answer_within(
    request: web.Request, memory: AnswerMemory, *, timeout: float,
    first: tuple[Sequence[T], bool], read_again: Read[T], form: MessageFormat[T],
) -> tuple[AnswerPage[T], bool]:
    """The answer page of a poll whose read gave ``first`` (items, more), within the
    request's reservation, and whether more follow; when its first message may need more
    room than reserved, the items are dropped, the reservation resized (waiting, holding
    nothing) and the items read again with ``read_again`` (module docstring). The caller
    keeps no reference to what it read (it passes it here and forgets it), or the drop
    would free nothing."""
    items, more = first
    del first  # the only reference left is ``items``: dropped before any wait for room
    for attempt in range(REREADS):
        if attempt:
            items, more = await read_again()
        page = AnswerPage(items, form)
        needed = page.first_room()
        if needed <= memory.reserved(request):
            page.fill(memory.reserved(request))
            return page, more
        del page, items  # what was read is not held while it waits for room
        if attempt < REREADS - 1:
            await memory.resize(request, needed, timeout)
    raise memory.busy()


async def own_records_arrive(ctx: RestContext, topic: str, wait_ms: int, **start: Any) -> bool:
    """Whether ``topic`` holds records from ``start`` (``records_arrive``'s keywords) on
    this peer, waiting up to ``wait_ms`` -- a ``long_poll``'s ``wake`` (its time-out is the
    client's plus the wait); a cluster error is a REST error."""
    gateway = ctx.gateway
    try:
        return await gateway.topics.records_arrive(
            topic, gateway.own_url, wait_ms=wait_ms, **start)
    except Exception as exc:
        raise from_cluster(exc) from exc


async def long_poll(
    ctx: RestContext, request: web.Request, who: Principal | None, deadline: float, *,
    wake: Callable[[int], Awaitable[bool]], read: Callable[[], Awaitable[bool]],
) -> bool:
    """After a poll's read found nothing: wait until ``deadline`` (``time.monotonic``) for
    records, and read them once they came (``read``: whether it found some). An idle long
    poll holds no answer memory and one of its principal's ``waiting_reads``; it waits with
    ``wake`` (a ``TF`` wake-up of at most ``MAX_READ_WAIT_MS`` at a time: the peer holds it
    until it applies a record of the topic, ``raftlog.server.parked_reads``), which brings
    no records, and reserves room before it reads them -- so polls woken together queue
    nothing ahead of the answer memory (``tests/faults/test_rest_woken_polls.py``)."""
    timeout = ctx.settings.request_timeout_ms / 1000
    ctx.answers.release_read(request)
    with ctx.quotas.long_poll(request, who):
        while (left := int((deadline - time.monotonic()) * 1000)) > 0:
            if await wake(min(left, MAX_READ_WAIT_MS)):
                await ctx.answers.reserve_read(request, timeout)
                if await read():
                    return True
                ctx.answers.release_read(request)  # gone meanwhile (retention): wait again
    return False


__all__ = [
    "ESCAPE_GROWTH", "MESSAGE_OVERHEAD", "REREADS", "AnswerPage", "MessageFormat",
    "answer_within", "largest", "long_poll", "own_records_arrive", "smallest",
]
