"""A poll's answer is built within the answer memory it reserved (``raftlog.rest.pages``):
however its payloads encode, the answer never passes the reservation, except that its first
message always goes -- after the reservation was widened to that message's largest
encoding. Before, a poll that reserved 4 MiB built whatever its records encoded to: text of
control characters six times their size, a 10 MiB record past the read budget, all held at
once by clients that did not read."""

from __future__ import annotations

import base64
import json
import random
import weakref

import pytest
from aiohttp.test_utils import make_mocked_request

from raftlog.rest.answer_memory import READ_RESERVE, AnswerMemory
from raftlog.rest.bodies import encode_payload
from raftlog.rest.pages import (
    ESCAPE_GROWTH,
    AnswerPage,
    MessageFormat,
    answer_within,
    largest,
    smallest,
)
from raftlog.web.errors import RestError

MIB = 1024 * 1024


def form(encoding: str) -> MessageFormat[bytes]:
    return MessageFormat(lambda value: {"id": "1-0", "timestamp": 1,
                                        **encode_payload(value, encoding)}, len, encoding)


async def built(payloads: list[bytes], encoding: str,
                memory: AnswerMemory | None = None) -> tuple[AnswerPage[bytes], int]:
    """The page and the bytes its request held reserved when it was built."""
    memory = memory or AnswerMemory(128 * MIB)
    request = make_mocked_request("POST", "/poll")
    await memory.reserve_read(request, 1.0)

    async def again() -> tuple[list[bytes], bool]:
        return payloads, False

    page, _more = await answer_within(request, memory, timeout=1.0, first=(payloads, False),
                                      read_again=again, form=form(encoding))
    return page, memory.reserved(request)


async def test_a_full_read_in_base64_fits_one_answer() -> None:
    payloads = [random.randbytes(100 * 1024) for _ in range(40)]  # a read's 4 MiB
    page, reserved = await built(payloads, "base64")
    assert not page.cut and reserved == READ_RESERVE
    assert [base64.b64decode(m["payload"]) for m in json.loads(page.array())] == payloads


async def test_escaped_text_is_cut_to_the_reservation() -> None:
    payloads = [b"\x01" * MIB] * 4  # 6 MiB each in JSON
    page, reserved = await built(payloads, "text")
    assert page.cut and len(page.parts) == 1  # the first always goes, widened for it
    assert reserved >= len(page.array()) > 6 * MIB
    assert json.loads(page.array())[0]["payload"] == "\x01" * MIB
    small = [b"\x01" * 100_000] * 40  # 24 MB escaped against a 6 MiB reservation
    page, reserved = await built(small, "text")
    assert page.cut and len(page.array()) <= reserved == READ_RESERVE
    assert len(page.array()) + len(page.parts[0]) + 1 > reserved  # one more would not fit


@pytest.mark.parametrize("seed", range(12))
async def test_no_answer_passes_its_reservation(seed: int) -> None:
    rng = random.Random(seed)
    encoding = rng.choice(["base64", "text", "json"])
    payloads = []
    for _ in range(rng.randrange(1, 60)):
        size = rng.choice([0, 10, 1000, 100_000, 700_000, 2 * MIB])
        kind = rng.random()
        if kind < 0.3:
            payloads.append(rng.randbytes(size))  # not text: base64 either way
        elif kind < 0.6:
            payloads.append(bytes(rng.choices(b"\x00\x1f\"\\a", k=size)))
        else:
            payloads.append(json.dumps([1e15] * (size // 20)).encode())
    page, reserved = await built(payloads, encoding)
    assert page.parts and len(page.array()) <= reserved
    for part, payload in zip(page.parts, payloads, strict=False):
        assert smallest(len(payload), encoding) <= len(part) <= largest(len(payload), encoding)


async def test_a_first_message_without_room_is_refused_busy() -> None:
    memory = AnswerMemory(10 * MIB)
    memory.take(4 * MIB)  # another answer being sent
    with pytest.raises(RestError) as refused:
        await built([b"\x01" * MIB], "text", memory)  # needs 6 MiB and more: waits, 503
    assert refused.value.status == 503 and memory.held == 4 * MIB
    memory.give(4 * MIB)
    page, reserved = await built([b"\x01" * (2 * MIB)], "text", memory)  # alone: goes
    assert len(page.parts) == 1 and reserved > memory.limit


class Records(list[bytes]):
    """A read's records that a weak reference can watch."""


async def test_what_was_read_is_dropped_while_the_poll_waits_for_room() -> None:
    """A poll whose first record needs more room than it reserved waits for it holding
    nothing -- neither a reservation nor the records (polls woken together would otherwise
    hold the memory waiting for each other) -- and reads again."""
    memory = AnswerMemory(64 * MIB)
    request = make_mocked_request("POST", "/poll")
    await memory.reserve_read(request, 1.0)
    watches: list[weakref.ref[Records]] = []
    seen: list[bool] = []

    def read() -> tuple[list[bytes], bool]:
        records = Records([b"\x01" * (2 * MIB)])
        watches.append(weakref.ref(records))
        return records, False

    async def again() -> tuple[list[bytes], bool]:
        seen.append(watches[0]() is None and memory.held == memory.reserved(request))
        return [b"\x01" * (2 * MIB)], True

    page, more = await answer_within(request, memory, timeout=1.0, first=read(),
                                     read_again=again, form=form("text"))
    assert seen == [True] and more and len(page.parts) == 1


async def test_an_empty_read_is_an_empty_array() -> None:
    page, _ = await built([], "base64")
    assert page.array() == b"[]\n" and not page.cut


async def test_a_watch_events_key_counts_toward_its_room() -> None:
    """A key-value watch writes each event's key as text: a key of control characters
    takes six times its bytes, and the first event's room must allow for it (``extra``)."""
    memory = AnswerMemory(128 * MIB)
    request = make_mocked_request("POST", "/watch")
    await memory.reserve_read(request, 1.0)
    events = [(b"\x01" * (5 * MIB // 4), b"v")]  # a 7.5 MiB key in JSON, a 1-byte value
    keyed: MessageFormat[tuple[bytes, bytes]] = MessageFormat(
        lambda event: {"key": event[0].decode(), **encode_payload(event[1], "text")},
        lambda event: len(event[1]), "text", lambda event: ESCAPE_GROWTH * len(event[0]))

    async def again() -> tuple[list[tuple[bytes, bytes]], bool]:
        return events, False

    page, _more = await answer_within(request, memory, timeout=1.0, first=(events, False),
                                      read_again=again, form=keyed)
    assert len(page.parts) == 1 and len(page.array()) <= memory.reserved(request)
