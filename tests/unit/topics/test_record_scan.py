"""The publish fast path (raftlog.topics.record_scan) never decides unlike the full decoder.

``summarize_batch`` may decline (None) whatever it likes, but when it answers, the full
decoder must accept the same bytes and its records must give the same per-topic positions,
sizes, largest records and TTLs; ``batch_fits`` must agree with ``check_entry``.
"""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.topics.machine import check_entry
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.record_scan import BatchSummary, TopicShare, batch_fits, summarize_batch
from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    MAGIC,
    Record,
    RecordBatch,
    RecordFormatError,
    TopicCommand,
    TopicProperties,
    encode_command,
    encode_records,
)
from raftlog.topics.stamp import stamp_append_time
from raftlog.topics.state import TopicState


def _expected(batch: RecordBatch) -> BatchSummary:
    """The summary, computed the slow way from the decoded records."""
    positions: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    largest: dict[str, int] = {}
    for position, record in enumerate(batch.records):
        positions.setdefault(record.topic, []).append(position)
        sizes[record.topic] = sizes.get(record.topic, 0) + record.size
        largest[record.topic] = max(largest.get(record.topic, 0), record.size)
    shares = {name: TopicShare(p, sizes[name], largest[name]) for name, p in positions.items()}
    ttls = [r.ttl_ms for r in batch.records if r.ttl_ms is not None]
    return BatchSummary(shares, ttls, batch.append_time_ms, batch.flags)


def _data(items: list[object], flags: int = 0, append_time: int = 77) -> bytes:
    header = MAGIC + bytes((1, 1, flags)) + append_time.to_bytes(8, "big")
    return header + msgpack.packb(items, use_bin_type=True)


def _agrees(data: bytes) -> BatchSummary | None:
    summary = summarize_batch(data)
    try:
        entry = decode_entry(data)
    except RecordFormatError:
        assert summary is None, "the fast path accepted what the decoder refuses"
        return None
    if summary is not None:
        assert isinstance(entry, RecordBatch)
        assert summary == _expected(entry)
    return summary


def test_a_plain_batch_is_summarised_like_its_records() -> None:
    records = [
        Record("a", b"x" * 10, None, {}, 5),
        Record("b", b"yy", b"key", {"h": b"12"}, 6, 1000),
        Record("a", b"z" * 30, b"k", {}, 7),
    ]
    data = stamp_append_time(encode_records(records), 1234, auto_create=True)
    summary = _agrees(data)
    assert summary is not None
    assert summary.topics == {
        "a": TopicShare([0, 2], 10 + 31, 31),
        "b": TopicShare([1], 2 + 3 + 1 + 2, 8),
    }
    assert summary.ttls == [1000]
    assert summary.append_time_ms == 1234
    assert summary.auto_create


def test_commands_ticks_and_foreign_data_are_left_to_the_decoder() -> None:
    assert summarize_batch(encode_command(TopicCommand("create", "t", {}))) is None
    assert summarize_batch(b"plain data") is None
    assert summarize_batch(MAGIC + b"\x01") is None


_FIELD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=(1 << 53) + 1),
    st.binary(max_size=8),
    st.sampled_from(["t", "u", ".", "..", "", "bad name", "x" * 250]),
    st.dictionaries(
        st.sampled_from(["h", "i"]), st.one_of(st.binary(max_size=4), st.integers(0, 9))
    ),
)
_GOOD = st.builds(
    lambda topic, key, value, headers, ts: [topic, key, value, headers, ts],
    st.sampled_from(["t", "u", "v"]),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.binary(max_size=16),
    st.dictionaries(st.sampled_from(["h", "é"]), st.binary(max_size=4), max_size=2),
    st.integers(min_value=0, max_value=(1 << 53) - 1),
)
_ITEM = st.one_of(
    _GOOD,
    _GOOD.map(lambda r: [*r, 1]),
    st.tuples(_GOOD, st.integers(min_value=0, max_value=5), _FIELD).map(
        lambda t: [*t[0][: t[1]], t[2], *t[0][t[1] + 1 :]]
    ),
    st.lists(_FIELD, max_size=7),
    _FIELD,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_ITEM, max_size=6), st.sampled_from([0, FLAG_AUTO_CREATE, 2]))
def test_never_accepts_what_the_decoder_refuses_and_counts_the_same(
    items: list[object], flags: int
) -> None:
    _agrees(_data(items, flags))


_STATES = st.dictionaries(
    st.sampled_from(["t", "u", "v"]),
    st.one_of(st.none(), st.integers(min_value=1, max_value=30)).map(
        lambda limit: TopicState(TopicProperties(max_record_bytes=limit), 1)
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_GOOD, min_size=1, max_size=6), _STATES, st.booleans())
def test_batch_fits_agrees_with_check_entry(
    items: list[object], topics: dict[str, TopicState], auto_create: bool
) -> None:
    data = _data(items)
    summary = summarize_batch(data)
    assert summary is not None
    entry = decode_entry(data)
    assert entry is not None
    assert batch_fits(summary, topics, auto_create) == (
        check_entry(entry, topics, auto_create) is None
    )


def test_flags_beyond_auto_create_always_take_the_full_decoder() -> None:
    # Even once a new flag becomes known to the decoder (it would carry meaning for how a
    # batch applies), the fast path must not summarise such a batch as a plain one.
    item = ["t", None, b"v", {}, 1]
    assert summarize_batch(_data([item], FLAG_AUTO_CREATE)) is not None
    for flag in (0x02, 0x04, 0x80):
        assert summarize_batch(_data([item], flag)) is None
