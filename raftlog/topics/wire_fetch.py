"""``TF`` push fetch (issue #27): a ``TR`` read that waits for enough data and never sends
more than the consumer's credit.

    request   [id, "TF", ident, json {...TR's keys..., min_records?, min_bytes?, max_bytes?}]
    response  exactly ``TR``'s: [id, 01, json {applied, leader, more}, json record ...]

* ``wait`` (ms): the peer holds the answer until it has at least ``min_records`` records
  (default 1) *or* ``min_bytes`` bytes of records (``Record.size``; default: no byte
  threshold) to send, or the wait ends (then it sends what there is, possibly nothing).
  It is woken by the apply of a batch that brought the topic records (the peer's
  ``ApplySignal`` / ``ParkedReads``), never by a timer: TANK's fetch with max wait and
  min bytes.
* ``max_bytes``: the credit (ZEPS' flow control): the answer carries records up to that
  many bytes; only a first record larger than the whole credit is sent alone (so a
  consumer always progresses), with ``more`` set. The consumer grants the next credit with
  its next fetch.
* ``max_bytes`` 0: a *wake-up*: the answer carries no records, and ``more`` says records
  are there -- sent as soon as they are (with ``wait``), or when the wait ends (``more``
  false). Why: a REST long poll waits this way and reads its records only once it has
  reserved answer memory for them; woken with its records, a thousand long polls of a
  topic queued a thousand copies of one large record in the peer ahead of that memory
  (``tests/faults/test_rest_woken_polls.py``).

Without these keys ``TF`` is ``TR``. A peer that does not know ``TF`` drops it (docs/
protocol.md §10.6), so clients use it only against raftlog peers that do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import msgpack

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import decode_json, pack_json
from raftlog.topics import wire as rpc
from raftlog.topics.records import MAX_UINT, records_within

TYPE_FETCH: Final = b"TF"
_FETCH_KEYS: Final = ("min_records", "min_bytes", "max_bytes")


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A ``TR`` read plus the fetch thresholds and the credit (module docstring)."""

    read: rpc.ReadRequest
    min_records: int = 1
    min_bytes: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in _FETCH_KEYS:
            value = getattr(self, name)
            low = 0 if name in ("min_records", "max_bytes") else 1
            if value is not None and (type(value) is not int or not low <= value <= MAX_UINT):
                raise rpc.bad_request(f"{name} must be an integer in {low} .. 2^53-1")

    def satisfied(self, result: rpc.ReadResult) -> bool:
        """Enough to answer before the wait ends?"""
        if self.min_records and len(result.records) >= self.min_records:
            return True
        size = sum(item.record.size for item in result.records)
        return self.min_bytes is not None and size >= self.min_bytes and size > 0

    def within_credit(self, result: rpc.ReadResult) -> rpc.ReadResult:
        """``result`` cut to the credit (``max_bytes``; 0: none of its records, ``more``
        when it had some)."""
        if self.max_bytes is None:
            return result
        if self.max_bytes == 0:  # records found: nothing to go on with (``resume_at``)
            resume = None if result.records else result.resume_at
            more = bool(result.records) or result.more
            return replace(result, records=(), more=more, resume_at=resume)
        kept, cut = records_within(result.records, self.max_bytes)
        return replace(result, records=tuple(kept), more=True) if cut else result


def encode_fetch_request(req: FetchRequest) -> list[bytes]:
    body = msgpack.unpackb(rpc.encode_read_request(req.read)[0], raw=False)
    for name in _FETCH_KEYS:
        value = getattr(req, name)
        if value is not None:
            body[name] = value
    return [pack_json(body)]


def enough(req: FetchRequest, answer: Sequence[bytes]) -> bool:
    """Whether a ``TF`` answer may go now: it meets the thresholds, or it fills the credit
    (waiting could not add to it); an error answer always goes."""
    try:
        result = rpc.decode_read_response(answer)
        if req.max_bytes == 0:  # a wake-up: records are there
            return result.more
        # cut by the credit (or the read's limits) with records: nothing more could be sent
        return req.satisfied(result) or (result.more and bool(result.records))
    except Exception:  # an error answer (TopicError) or anything odd: answer it now
        return True


def decode_fetch_request(args: Sequence[bytes]) -> FetchRequest:
    """The server side (``TopicError`` ``BadRequest`` when malformed)."""
    if len(args) != 1:
        raise rpc.bad_request(f"a fetch request has one argument frame, got {len(args)}")
    try:
        body = decode_json(args[0], 3)
    except RemoteProtocolError as exc:
        raise rpc.bad_request(str(exc)) from None
    if not isinstance(body, dict):
        raise rpc.bad_request("a fetch request is a map")
    extra = {name: body.pop(name) for name in _FETCH_KEYS if name in body}
    read = rpc.decode_read_request([pack_json(body)])
    return FetchRequest(read, **extra)
