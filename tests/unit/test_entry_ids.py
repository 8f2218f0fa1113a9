"""Request ids (docs/protocol.md §3, §3.1) and log entries (§4.1): the spec's vectors and the
freshness window boundaries the reference was verified with."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from raftlog.entry import (
    ENTRY_HEADER_SIZE,
    MAX_ENTRY_TERM,
    ZERO_REQUEST_ID,
    EntryType,
    LogEntry,
    entries_size,
)
from raftlog.errors import EntryFormatError
from raftlog.ids import (
    RequestIdGenerator,
    is_expired,
    is_fresh,
    machine_id,
    make_request_id,
    request_id_seconds,
)

# --- request ids (§3) ----------------------------------------------------------------------


def test_localhost_vector() -> None:
    assert machine_id("localhost").hex() == "421aa9"
    rid = make_request_id(1_700_000_000, machine_id("localhost"), 0x1234, 0xABCDEF)
    assert rid.hex() == "6553f100421aa91234abcdef"
    assert request_id_seconds(rid) == 1_700_000_000


def test_proto_md_example_timestamp() -> None:
    rid = bytes.fromhex("5956dc8826f27e10dcccab20")
    assert request_id_seconds(rid) == 1_498_864_776
    assert make_request_id(1_498_864_776, bytes.fromhex("26f27e"), 4316, 0xCCAB20) == rid


def test_generator_counts_and_wraps_at_2_24() -> None:
    gen = RequestIdGenerator(machine=b"abc", pid=0x1234, counter_start=2**24 - 1)
    first, second = gen.next(now_seconds=10), gen.next(now_seconds=10)
    assert first[9:].hex() == "ffffff"
    assert second[9:].hex() == "000000"
    assert first[4:9] == b"abc\x12\x34"
    assert request_id_seconds(first) == 10


def test_generator_ids_are_unique() -> None:
    gen = RequestIdGenerator()
    ids = {gen.next() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(len(rid) == 12 for rid in ids)


def test_generators_of_one_process_never_make_the_same_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two clients in one process, in the same second: their ids must differ even when the
    random draw is as unlucky as it can be (the same start for both). With a counter per
    generator they were the same ids, and the second client's updates were taken for
    retries of the first's."""
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, n: 7)
    first, second = RequestIdGenerator(), RequestIdGenerator()
    ids = [gen.next(now_seconds=1_700_000_000) for _ in range(500) for gen in (first, second)]
    assert len(set(ids)) == len(ids)


def test_a_child_forked_while_the_counter_is_taken_can_still_make_ids() -> None:
    """The process counter's lock is shared by every generator of the process: a fork while
    another thread holds it must not leave the child's generators waiting forever."""
    from raftlog import ids  # noqa: PLC0415 -- the module's process counter itself

    with ids._PROCESS_COUNTER._lock:  # another thread in the middle of ``take``
        pid = os.fork()
        if pid == 0:  # the child: make an id (nothing else that could wait), then leave
            RequestIdGenerator(machine=b"abc", pid=1).next(now_seconds=1)
            os._exit(0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child could not make a request id")


# --- freshness (§3.1) ----------------------------------------------------------------------

NOW_MS = 1_700_000_000_000
HOUR = 3600


def _id_at(offset_seconds: int) -> bytes:
    return make_request_id(NOW_MS // 1000 + offset_seconds, b"\x00\x00\x01", 1, 1)


@pytest.mark.parametrize(
    ("offset_seconds", "fresh"),
    [
        (-8 * HOUR, False),  # verified with the reference: past
        (-(7 * HOUR + 45 * 60) + 2, True),
        (-(7 * HOUR + 45 * 60) - 2, False),
        (15 * 60 - 2, True),
        (15 * 60 + 2, False),  # future
        (-(7 * HOUR + 45 * 60), True),  # exact lower bound is inclusive
        (15 * 60, True),  # exact upper bound is inclusive
        (0, True),
    ],
)
def test_acceptance_window(offset_seconds: int, fresh: bool) -> None:
    assert is_fresh(_id_at(offset_seconds), NOW_MS) is fresh


def test_acceptance_edges_are_exact_to_the_millisecond() -> None:
    oldest = _id_at(-(7 * HOUR + 45 * 60))
    assert is_fresh(oldest, NOW_MS)
    assert not is_fresh(oldest, NOW_MS + 1)  # one ms later it is too old
    newest = _id_at(15 * 60)
    assert is_fresh(newest, NOW_MS)
    assert not is_fresh(newest, NOW_MS - 1)  # one ms earlier it is too far in the future


def test_ttl_none_accepts_everything_but_the_zero_id() -> None:
    assert is_fresh(_id_at(-100 * HOUR), NOW_MS, ttl_ms=None)
    assert is_fresh(_id_at(+100 * HOUR), NOW_MS, ttl_ms=None)
    assert not is_fresh(ZERO_REQUEST_ID, NOW_MS, ttl_ms=None)
    assert not is_fresh(b"short", NOW_MS)


def test_expiry_is_a_margin_later_than_acceptance() -> None:
    assert not is_expired(_id_at(-8 * HOUR), NOW_MS)  # t == now - ttl: kept
    assert is_expired(_id_at(-8 * HOUR - 1), NOW_MS)
    assert not is_expired(_id_at(-(7 * HOUR + 45 * 60) - 2), NOW_MS)  # refused, not forgotten
    assert not is_expired(_id_at(-100 * HOUR), NOW_MS, ttl_ms=None)


# --- entries (§4.1) ------------------------------------------------------------------------

REQID = bytes.fromhex("5956dc8826f27e10dcccab20")
ENTRY_VECTORS = [
    (
        LogEntry(REQID, EntryType.STATE, 42, b"foo"),
        "5956dc8826f27e10dcccab20 00 2a000000000000 666f6f",
    ),
    (LogEntry.checkpoint(43), "000000000000000000000000 02 2b000000000000 c0"),
    (
        LogEntry(REQID, EntryType.STATE, 7, b"hello"),
        "5956dc8826f27e10dcccab20 00 07000000000000 68656c6c6f",
    ),
    (LogEntry.checkpoint(8), "000000000000000000000000 02 08000000000000 c0"),
    (
        LogEntry(
            REQID,
            EntryType.CONFIG,
            2**32 + 5,
            bytes.fromhex("9192a131b47463703a2f2f3132372e302e302e313a38303437"),
        ),
        "5956dc8826f27e10dcccab20 01 05000000010000 "
        "9192a131b47463703a2f2f3132372e302e302e313a38303437",
    ),
]


@pytest.mark.parametrize(("entry", "hex_bytes"), ENTRY_VECTORS)
def test_entry_vectors(entry: LogEntry, hex_bytes: str) -> None:
    raw = bytes.fromhex(hex_bytes.replace(" ", ""))
    assert entry.to_bytes() == raw
    assert LogEntry.from_bytes(raw) == entry
    assert entry.size == len(raw)


def test_entry_kinds_and_unknown_types_round_trip() -> None:
    assert LogEntry.checkpoint(1).is_checkpoint
    assert LogEntry(REQID, 1, 1, b"x").is_config
    assert LogEntry(REQID, 0, 1, b"x").is_state
    odd = LogEntry(REQID, 0x7F, MAX_ENTRY_TERM, b"x")  # the type byte is not validated
    assert LogEntry.from_bytes(odd.to_bytes()) == odd


@pytest.mark.parametrize("size", [0, 12, ENTRY_HEADER_SIZE])
def test_entries_without_data_are_rejected(size: int) -> None:
    with pytest.raises(EntryFormatError):
        LogEntry.from_bytes(bytes(size))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"request_id": b"short"},
        {"entry_type": 256},
        {"entry_type": -1},
        {"term": MAX_ENTRY_TERM + 1},
        {"term": -1},
        {"data": b""},
    ],
)
def test_entry_constructor_rejects_what_the_header_cannot_hold(kwargs: dict[str, object]) -> None:
    fields: dict[str, object] = {"request_id": REQID, "entry_type": 0, "term": 1, "data": b"x"}
    fields.update(kwargs)
    with pytest.raises(EntryFormatError):
        LogEntry(**fields)  # type: ignore[arg-type]


def test_entries_size_is_the_sum_of_entry_sizes() -> None:
    entries = [LogEntry(bytes(12), EntryType.STATE, 1, b"x" * n) for n in (1, 100, 4096)]
    assert entries_size(entries) == sum(entry.size for entry in entries)
    assert entries_size([]) == 0


def test_states_builds_what_the_dataclass_builds_with_its_bytes_ready() -> None:
    """``LogEntry.states`` (a proposal batch's entries, the leader's per-update constructor)
    builds exactly what the dataclass builds item by item, serializes the same, and refuses
    what ``__post_init__`` refuses."""
    items = [(bytes(range(k, k + 12)), b"d" * (k + 1)) for k in range(5)]
    for term in (0, 7, MAX_ENTRY_TERM):
        batch = LogEntry.states(term, items)
        slow = [LogEntry(rid, EntryType.STATE, term, data) for rid, data in items]
        assert batch == slow
        assert [e.to_bytes() for e in batch] == [e.to_bytes() for e in slow]
        assert [LogEntry.from_bytes(e.to_bytes()) for e in batch] == slow
    assert LogEntry.states(3, []) == []
    rid = bytes(range(1, 13))
    for term, bad_items in (
        (-1, [(rid, b"x")]),
        (1 << 56, [(rid, b"x")]),
        (7, [(rid, b"x"), (rid[:11], b"x")]),
        (7, [(rid, b"x"), (rid, b"")]),
    ):
        with pytest.raises(EntryFormatError):
            LogEntry.states(term, bad_items)
