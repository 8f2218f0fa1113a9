"""``AnswerPage``: a poll's JSON answer built within the answer memory it reserved.

Why: a poll reserves answer memory before it reads (``raftlog.rest.answer_memory``), and
that reservation is all the budget knew of the answer being built. The answer itself was
whatever the records encoded to: base64 makes a payload ~1.37x, ``text`` escapes each
control character to six bytes, and a read that passes its 4 MiB budget still takes the
record that passes it (up to 10 MiB). So polls that each reserved 4 MiB built answers many
times larger, all of them held at once by clients that did not read: the limit held the
reservations, not the bytes.

Now an answer holds what fits its reservation. Messages are encoded one by one and the page
stops before the one that would pass it -- before encoding it when even its smallest
encoding (base64's exact length, a text payload's own bytes) cannot fit -- and says so with
``X-Raftlog-More: true``; the client asks again from the last id (a queue group's leases
not shown stay leased to the member and come first in its next poll). The first message
always goes, so a poll always progresses: when even it may not fit (a record larger than
the reservation), the poll first widens its reservation to that message's largest
encoding, waiting for room like any reservation (503 ``Busy`` when none comes in time).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Generic, TypeVar

from aiohttp import web

from raftlog.rest.answer_memory import AnswerMemory

T = TypeVar("T")

MESSAGE_OVERHEAD: Final = 256
"""JSON bytes of one message besides its payload, at most: its id, timestamp, delivery
count or key (a key is at most 64 bytes, escaped up to six times), names and punctuation."""
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


class AnswerPage(Generic[T]):
    """The messages of ``items`` that fit the request's reserved answer memory, encoded.
    ``render`` makes one item's JSON value, ``payload_size`` gives its payload's bytes."""

    def __init__(self, items: Sequence[T], render: Callable[[T], object],
                 payload_size: Callable[[T], int], encoding: str) -> None:
        self._items = items
        self._render = render
        self._size = payload_size
        self._encoding = encoding
        self.parts: list[bytes] = []
        """The encoded messages that fit."""

    @property
    def cut(self) -> bool:
        """Whether messages were left out (the client asks again after the last one)."""
        return len(self.parts) < len(self._items)

    async def build(self, request: web.Request, memory: AnswerMemory, timeout: float) -> None:
        """Encode what fits the request's reservation (module docstring); 503 ``Busy`` when
        the first message's room does not come within ``timeout`` seconds."""
        if not self._items:
            return
        first = largest(self._size(self._items[0]), self._encoding)
        await memory.widen(request, first + 2, timeout)
        room = memory.reserved(request) - 2  # the brackets
        for item in self._items:
            floor = smallest(self._size(item), self._encoding)
            if self.parts and floor > room:
                break
            part = json.dumps(self._render(item), ensure_ascii=False).encode()
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


__all__ = ["ESCAPE_GROWTH", "MESSAGE_OVERHEAD", "AnswerPage", "largest", "smallest"]
