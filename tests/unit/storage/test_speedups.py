"""The compiled storage twins (raftlog/_speedups_records.c) against their pure-Python
definitions.

Both twins get the same generated inputs -- valid records, records with a flipped bit in the
checksum or the body, records too short to hold an entry, records stored under another index
-- and must give the same records, the same results and the same errors. Where the extension
was not built these tests skip and say so, except under ``RAFTLOG_EXPECT_COMPILED=1`` (set by
``.ci/run``), where a missing extension fails: CI must test both twins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog import speedups
from raftlog.entry import (
    REQUEST_ID_SIZE,
    ZERO_REQUEST_ID,
    EntryType,
    LogEntry,
    entries_bytes_py,
    parse_entries_py,
)
from raftlog.errors import EntryFormatError, StorageCorruptionError
from raftlog.storage import _records as rec

compiled = speedups.records
needs_compiled = pytest.mark.skipif(
    compiled is None and os.environ.get("RAFTLOG_EXPECT_COMPILED") != "1",
    reason=f"the compiled twins are not in use here: {speedups.IMPLEMENTATION}",
)


def test_ci_runs_the_compiled_twins() -> None:
    """Under CI (``RAFTLOG_EXPECT_COMPILED=1``) both extensions must have been built and
    chosen."""
    if os.environ.get("RAFTLOG_EXPECT_COMPILED") != "1":
        pytest.skip("only checked where RAFTLOG_EXPECT_COMPILED=1 (CI)")
    assert speedups.IMPLEMENTATION == "records compiled, transport compiled"
    assert rec.take_payloads is not rec.take_payloads_py


def test_pure_python_switch_selects_the_twins() -> None:
    code = (
        "from raftlog import speedups, entry, transport; "
        "from raftlog.storage import _records as r; "
        "from raftlog.consensus import batch; "
        "print(speedups.IMPLEMENTATION, r.take_payloads is r.take_payloads_py, "
        "r.put_entries is r.put_entries_py, entry.parse_entries is entry.parse_entries_py, "
        "transport.recv_bounded is transport.recv_bounded_py, "
        "batch.decide_batch is batch.decide_batch_py, "
        "entry.entries_bytes is entry.entries_bytes_py, "
        "transport.send_update_dones is transport.send_update_dones_py, sep='|')"
    )
    env = dict(os.environ, RAFTLOG_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    pure = "records pure (RAFTLOG_PURE_PYTHON), transport pure (RAFTLOG_PURE_PYTHON)"
    assert out.strip().split("|") == [pure, *["True"] * 7]


class _Recorder:
    """A stand-in for a RocksDB WriteBatch that keeps every ``put`` in order."""

    def __init__(self) -> None:
        self.puts: list[tuple[object, ...]] = []

    def put(self, key: bytes, value: bytes, *family: object) -> None:
        """``family``: the column family of an id record (absent for an entry record)."""
        self.puts.append((key, value, *family))


MIRRORS, REQUESTS = "mirrors-family", "requests-family"
"""Stand-ins for the column families' handles: what matters is which record gets which."""


def _entries(draw: st.DrawFn) -> list[LogEntry]:
    count = draw(st.integers(0, 8))
    out = []
    for _ in range(count):
        rid = draw(st.one_of(st.just(ZERO_REQUEST_ID), st.binary(min_size=12, max_size=12)))
        data = draw(st.binary(min_size=1, max_size=300))
        kind = draw(st.sampled_from([EntryType.STATE, EntryType.CHECKPOINT, EntryType.CONFIG]))
        out.append(LogEntry(rid, kind, draw(st.integers(0, 2**56 - 1)), data))
    return out


entries_strategy = st.composite(_entries)()
index_strategy = st.one_of(st.integers(1, 1000), st.integers(2**63 - 20, 2**64 - 20))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000), start=st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data: bytes, start: int) -> None:
    assert compiled is not None
    assert compiled.crc32(data, start) == zlib.crc32(data, start)  # type: ignore[attr-defined]


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(entries=entries_strategy, first=index_strategy)
def test_put_entries_writes_the_same_records(entries: list[LogEntry], first: int) -> None:
    assert compiled is not None
    pure, fast = _Recorder(), _Recorder()
    rec.put_entries_py(pure, first, entries, MIRRORS, REQUESTS)  # type: ignore[arg-type]
    compiled.put_entries(fast.put, first, entries, MIRRORS, REQUESTS)
    assert fast.puts == pure.puts
    assert len(pure.puts) == sum(1 if e.request_id == ZERO_REQUEST_ID else 3 for e in entries)


@settings(max_examples=200, deadline=None)
@given(entries=entries_strategy, first=index_strategy)
def test_put_entries_queues_entries_then_mirrors_then_ids(
    entries: list[LogEntry], first: int
) -> None:
    """Three runs, each in entry order: the memtable inserts a batch in its order and keys
    that follow each other are the cheap inserts (docs/performance.md §3). The compiled
    twin writes what this one does (the tests above)."""
    recorder = _Recorder()
    rec.put_entries_py(recorder, first, entries, MIRRORS, REQUESTS)  # type: ignore[arg-type]
    indexed = [
        (i.to_bytes(8, "big"), e.request_id)
        for i, e in enumerate(entries, start=first)
        if e.request_id != ZERO_REQUEST_ID
    ]
    expected = (
        [(rec.entry_key(i),) for i in range(first, first + len(entries))]
        + [(rec.REQUEST_BY_INDEX_PREFIX + packed, MIRRORS) for packed, _ in indexed]
        + [(rec.REQUEST_PREFIX + rid, REQUESTS) for _, rid in indexed]
    )
    assert [(put[0], *put[2:]) for put in recorder.puts] == expected


def _copies(entries: list[LogEntry]) -> list[LogEntry]:
    """Equal entries that have not serialized themselves yet (no cached bytes)."""
    return [LogEntry(e.request_id, e.entry_type, e.term, e.data) for e in entries]


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(entries=entries_strategy, first=index_strategy)
def test_put_entries_writes_the_same_records_for_entries_never_serialized(
    entries: list[LogEntry], first: int
) -> None:
    """The compiled twin first, on entries without cached bytes: it must serialize them."""
    assert compiled is not None
    fast = _Recorder()
    compiled.put_entries(fast.put, first, _copies(entries), MIRRORS, REQUESTS)
    pure = _Recorder()
    rec.put_entries_py(pure, first, entries, MIRRORS, REQUESTS)  # type: ignore[arg-type]
    assert fast.puts == pure.puts


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(entries=entries_strategy, source=st.sampled_from(["new", "serialized", "parsed"]))
def test_entries_bytes_gives_each_entrys_bytes(entries: list[LogEntry], source: str) -> None:
    """Entries built here (no cached bytes), serialized before, or parsed from the wire (bytes
    cached by the parse): the compiled twin gives what ``to_bytes`` gives, in order."""
    assert compiled is not None
    expected = entries_bytes_py(_copies(entries))
    given_entries = _copies(entries)
    if source == "serialized":
        entries_bytes_py(given_entries)
    elif source == "parsed":
        given_entries = list(parse_entries_py(expected))
    got = compiled.entries_bytes(given_entries)
    assert got == expected and all(type(b) is bytes for b in got)
    assert compiled.entries_bytes(tuple(given_entries)) == expected


@needs_compiled
def test_entries_bytes_calls_to_bytes_where_nothing_is_cached() -> None:
    assert compiled is not None

    class Duck:
        def __init__(self, out: object) -> None:
            self.out = out

        def to_bytes(self) -> object:
            return self.out

    assert compiled.entries_bytes([Duck(b"one"), Duck(b"two")]) == [b"one", b"two"]  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must return bytes"):
        compiled.entries_bytes([Duck("text")])  # type: ignore[list-item]
    with pytest.raises(AttributeError):  # as the pure twin: no to_bytes
        compiled.entries_bytes([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        compiled.entries_bytes(5)  # type: ignore[arg-type]


def _stored(first: int, entries: list[LogEntry]) -> list[bytes]:
    recorder = _Recorder()
    rec.put_entries_py(recorder, first, entries)  # type: ignore[arg-type]
    return [put[1] for put in recorder.puts if put[0][:1] == rec.ENTRY_PREFIX]  # type: ignore[index, misc]


def _damage(draw: st.DrawFn, first: int, values: list[bytes]) -> list[bytes]:
    """One record damaged in one of the ways a disk or a bug could, or none."""
    if not values or not draw(st.booleans()):
        return values
    at = draw(st.integers(0, len(values) - 1))
    value = values[at]
    how = draw(st.sampled_from(["flip", "short", "empty", "swap", "sealed_short"]))
    if how == "flip":
        pos = draw(st.integers(0, len(value) - 1))
        flipped = value[pos] ^ (1 << draw(st.integers(0, 7)))
        value = value[:pos] + bytes([flipped]) + value[pos + 1 :]
    elif how == "short":
        value = value[: draw(st.integers(0, rec.CRC_SIZE + 20))]
    elif how == "empty":
        value = b""
    elif how == "sealed_short":  # a checksum that matches, over a body with no entry data
        body = value[rec.CRC_SIZE : rec.CRC_SIZE + draw(st.integers(0, 20))]
        value = rec.seal(rec.entry_key(first + at), body)
    elif at + 1 < len(values):  # the next record under this one's key
        value = values[at + 1]
    return [*values[:at], value, *values[at + 1 :]]


@st.composite
def stored_ranges(draw: st.DrawFn) -> tuple[int, list[bytes], int | None]:
    first = draw(index_strategy)
    values = _damage(draw, first, _stored(first, _entries(draw)))
    beyond_64_bits = st.sampled_from([2**70, -(2**70)])
    max_bytes = draw(st.one_of(st.none(), st.integers(-1, 3000), beyond_64_bits))
    return first, values, max_bytes


def _outcome(take: object, first: int, values: list[bytes], max_bytes: int | None) -> object:
    try:
        return take(iter(values), first, max_bytes)  # type: ignore[operator]
    except StorageCorruptionError as exc:
        return ("error", str(exc))


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(case=stored_ranges())
def test_take_payloads_gives_the_same_bodies_and_errors(
    case: tuple[int, list[bytes], int | None],
) -> None:
    assert compiled is not None
    first, values, max_bytes = case

    def fast(values: object, first: int, max_bytes: int | None) -> object:
        assert compiled is not None
        return compiled.take_payloads(values, first, max_bytes, rec.entry_payload)  # type: ignore[arg-type]

    assert _outcome(fast, first, values, max_bytes) == _outcome(
        rec.take_payloads_py, first, values, max_bytes
    )


@needs_compiled
def test_take_payloads_names_the_damaged_index() -> None:
    assert compiled is not None
    entries = LogEntry.states(1, [(bytes([n]) * REQUEST_ID_SIZE, b"x" * 30) for n in range(1, 5)])
    values = _stored(7, entries)
    values[2] = values[2][:-1] + bytes([values[2][-1] ^ 1])
    with pytest.raises(StorageCorruptionError, match="entry 9: checksum mismatch"):
        compiled.take_payloads(iter(values), 7, None, rec.entry_payload)


@needs_compiled
def test_take_payloads_stops_at_the_byte_limit_but_takes_one() -> None:
    assert compiled is not None
    entries = LogEntry.states(1, [(bytes([n]) * REQUEST_ID_SIZE, b"y" * 80) for n in range(1, 6)])
    values = _stored(1, entries)
    bodies, limited = compiled.take_payloads(iter(values), 1, 250, rec.entry_payload)
    assert (len(bodies), limited) == (2, True)  # 100 + 100 <= 250 < 300
    bodies, limited = compiled.take_payloads(iter(values), 1, 10, rec.entry_payload)
    assert (len(bodies), limited) == (1, True)
    bodies, limited = compiled.take_payloads(iter(values), 1, None, rec.entry_payload)
    assert bodies == [e.to_bytes() for e in entries] and limited is False


@needs_compiled
def test_wrong_argument_types_are_errors_not_crashes() -> None:
    assert compiled is not None
    with pytest.raises(TypeError):
        compiled.take_payloads(iter(["text"]), 1, None, rec.entry_payload)  # type: ignore[list-item]
    with pytest.raises(OverflowError):
        compiled.take_payloads(iter([]), -1, None, rec.entry_payload)
    with pytest.raises(AttributeError):  # as the pure twin: no to_bytes
        compiled.put_entries(_Recorder().put, 1, [object()], None, None)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        compiled.put_entries(_Recorder().put, 1, 5, None, None)  # type: ignore[arg-type]


frame_strategy = st.one_of(
    entries_strategy.map(lambda es: [e.to_bytes() for e in es]),
    st.lists(st.binary(max_size=40), max_size=4),  # short frames among them: errors
)


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(frames=frame_strategy, as_bytearray=st.booleans())
def test_parse_entries_gives_the_same_entries_and_errors(
    frames: list[bytes], as_bytearray: bool
) -> None:
    assert compiled is not None
    wire: list[Any] = [bytearray(f) for f in frames] if as_bytearray else frames

    def outcome(parse: Callable[[list[Any]], tuple[LogEntry, ...]]) -> object:
        try:
            got = parse(wire)
        except EntryFormatError:
            return "EntryFormatError"
        return [(type(e), e, e.to_bytes(), type(e.to_bytes()), e.entry_type, e.term) for e in got]

    pure = outcome(parse_entries_py)
    fast = outcome(lambda fs: compiled.parse_entries(LogEntry, fs, EntryFormatError))
    assert fast == pure
    assert pure == "EntryFormatError" or len(pure) == len(frames)  # type: ignore[arg-type]
