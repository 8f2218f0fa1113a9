"""The topic state's one versioned codec (``raftlog.topics.state``, issue #26).

The legacy byte strings below were produced by the code before #26 (``topic_index._pack_state``
and ``topic_snapshot.build_snapshot`` at commit 4ff736a): an index or a snapshot written by an
older peer must decode to the same state.
"""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from raftlog.topics.index import _pack_state, _unpack_state
from raftlog.topics.records import PROPERTY_KINDS, RecordId, TopicProperties
from raftlog.topics.snapshot import SNAPSHOT_VERSION, parse_snapshot
from raftlog.topics.state import (
    PROPERTY_FIELDS,
    STATE_VERSION,
    StateFormatError,
    TopicState,
    decode_state,
    encode_state,
)

FULL = TopicState(TopicProperties(86_400_000, 1 << 20, 4096), 17, RecordId(23, 4))
BARE = TopicState(TopicProperties(), 5)

V2_ROW_FULL = bytes.fromhex("96ce05265c00ce0010000011cd10001704")
V2_ROW_BARE = bytes.fromhex("96c0c005c00000")
V1_ROW = bytes.fromhex("93cdea60cd040009")  # [retention, max record bytes, created]
V2_SNAPSHOT = bytes.fromhex(
    "83a17602a6746f7069637382a66f726465727396ce05265c00ce0010000011cd10002303a561756469"
    "7496c0c01ec00000a474696d65cf0000018bcfe56800"
)


def test_index_rows_written_before_the_codec_still_decode() -> None:
    assert _unpack_state(V2_ROW_FULL) == FULL
    assert _unpack_state(V2_ROW_BARE) == BARE
    assert _unpack_state(V1_ROW) == TopicState(TopicProperties(60_000, None, 1024), 9)
    assert _unpack_state(b"") is None  # a deleted topic


def test_a_snapshot_written_before_the_codec_still_restores() -> None:
    topics, clock, transactions = parse_snapshot(V2_SNAPSHOT)
    assert topics == {
        "orders": TopicState(TopicProperties(86_400_000, 1 << 20, 4096), 17, RecordId(35, 3)),
        "audit": TopicState(TopicProperties(), 30),
    }
    assert clock == 1_700_000_000_000
    assert transactions == []


def test_rows_and_snapshots_are_now_written_as_named_maps() -> None:
    body = msgpack.unpackb(_pack_state(FULL))
    assert body == {
        "v": STATE_VERSION,
        "retention_ms": 86_400_000,
        "max_bytes": 1 << 20,
        "max_record_bytes": 4096,
        "created_index": 17,
        "low_water": [23, 4],
    }
    assert _unpack_state(_pack_state(FULL)) == FULL
    assert _unpack_state(_pack_state(BARE)) == BARE
    assert _pack_state(None) == b""
    assert SNAPSHOT_VERSION == 4  # 4 = 3 + optional sections (#27 groups)


def test_every_property_goes_through_the_codec() -> None:
    """The codec follows the dataclass: a property added there is stored without touching
    the codec (what keeps a new topic property to few files)."""
    assert tuple(f.name for f in dataclasses.fields(TopicProperties)) == PROPERTY_FIELDS
    every = TopicProperties(
        **{n: "x" if PROPERTY_KINDS[n] == "text" else 7 for n in PROPERTY_FIELDS}
    )
    state = dataclasses.replace(FULL, properties=every)
    body = encode_state(state)
    assert {n: body[n] for n in PROPERTY_FIELDS} == every.as_dict()
    assert decode_state(msgpack.unpackb(msgpack.packb(body))) == state


def test_unknown_keys_are_ignored_and_missing_properties_are_unset() -> None:
    body = encode_state(FULL) | {"colour": "blue"}
    del body["max_bytes"]
    assert decode_state(body) == TopicState(
        TopicProperties(86_400_000, None, 4096), 17, RecordId(23, 4)
    )


@pytest.mark.parametrize(
    "value",
    [
        None,
        "x",
        [1, 2],
        [1, 2, 3, 4, 5, 6, 7],
        {"v": 2, "created_index": 1},
        {"created_index": 1},
        {"v": 3, "created_index": -1},
        {"v": 3, "created_index": True},
        {"v": 3, "created_index": 1, "low_water": [1]},
        [None, None, "x", None, 0, 0],
    ],
)
def test_unreadable_states_raise_a_clear_error(value: object) -> None:
    with pytest.raises(StateFormatError):
        decode_state(value)


def test_a_snapshot_of_an_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported topic snapshot format"):
        parse_snapshot(msgpack.packb({"v": 99, "topics": {}, "time": 0}))
