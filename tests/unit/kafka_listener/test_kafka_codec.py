"""Kafka record batches, offsets and settings without a cluster (issue #30)."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from kio.records.readers import read_batch

from raftlog.errors import ConfigError
from raftlog.kafka.batches import (
    HEADER,
    XERIAL_MAGIC,
    BatchError,
    decode_batches,
    encode_batch,
    group_by_entry,
)
from raftlog.kafka.offsets import MAX_POSITION, offset_of, record_at
from raftlog.kafka.produce import batch_request_id, new_producer_id
from raftlog.kafka.protocol import (
    SUPPORTED,
    MalformedRequestError,
    Unsupported,
    parse_request,
    unsupported_response,
)
from raftlog.kafka.settings import kafka_settings, node_id
from raftlog.topics.records import LoggedRecord, Record, RecordId


def _items(index: int = 7, n: int = 3) -> list[LoggedRecord]:
    return [LoggedRecord(RecordId(index, p), 1000 + p,
                         Record("t", b"v%d" % p, b"k" if p % 2 else None, {"h": b"%d" % p},
                                1_700_000_000_000 + p)) for p in range(n)]


def test_offsets_are_record_ids_and_back() -> None:
    for rid in (RecordId(1, 0), RecordId(123456789, MAX_POSITION), RecordId(2**40, 5)):
        assert record_at(offset_of(rid)) == rid
    assert offset_of(RecordId(5, 9)) < offset_of(RecordId(6, 0))  # log order
    with pytest.raises(ValueError):
        record_at(-1)


def test_fetched_batches_are_valid_kafka_batches_that_round_trip() -> None:
    items = _items()
    data = encode_batch(items)
    batch, size = read_batch(data, 0)  # kio, an independent reader, checks the CRC too
    assert size == len(data)
    assert [r.offset for r in batch.records] == [offset_of(i.id) for i in items]
    assert [r.value for r in batch.records] == [b"v0", b"v1", b"v2"]
    (again,) = decode_batches(data, "t")
    assert list(again.records) == [i.record for i in items]


def _compressed(codec: int, records: bytes, body_count: int) -> bytes:
    """A v2 batch whose records section is ``records`` compressed with ``codec``."""
    fields = [0, 0, -1, 2, 0, codec, body_count - 1, 0, 0, -1, -1, -1, body_count]
    tail = HEADER.pack(*fields)[21:] + records
    fields[1] = len(tail) + 9
    fields[4] = crc32c.crc32c(tail)
    return HEADER.pack(*fields)[:21] + tail


@pytest.mark.parametrize("codec", [1, 2, 3, 4, 22])
def test_every_codec_decodes(codec: int) -> None:
    items = _items(n=5)
    plain = encode_batch(items)[HEADER.size:]  # the records section
    if codec == 1:
        packed = bytes(cramjam.gzip.compress(plain))
    elif codec in (2, 22):  # raw snappy (librdkafka) and xerial-framed (Java clients)
        raw = bytes(cramjam.snappy.compress_raw(plain))
        packed = raw if codec == 2 else (
            XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw)
        codec = 2
    elif codec == 3:
        packed = bytes(cramjam.lz4.compress(plain))
    else:
        packed = bytes(cramjam.zstd.compress(plain))
    (batch,) = decode_batches(_compressed(codec, packed, 5), "t")
    assert [r.value for r in batch.records] == [b"v%d" % p for p in range(5)]


def test_corrupt_batches_are_refused_with_a_kafka_code() -> None:
    data = bytearray(encode_batch(_items()))
    data[-1] ^= 0xFF
    with pytest.raises(BatchError, match="checksum") as bad:
        decode_batches(bytes(data), "t")
    assert bad.value.code == 2  # CORRUPT_MESSAGE
    with pytest.raises(BatchError, match="truncated"):
        decode_batches(bytes(data[:30]), "t")
    old = bytearray(encode_batch(_items()))
    old[16] = 1  # magic 1
    with pytest.raises(BatchError) as magic:
        decode_batches(bytes(old), "t")
    assert magic.value.code == 87
    with pytest.raises(BatchError, match="decompress"):
        decode_batches(_compressed(4, b"not zstd", 1), "t")


def test_records_of_one_entry_share_a_batch() -> None:
    items = _items(3, 2) + _items(4, 3)
    assert [len(g) for g in group_by_entry(items)] == [2, 3]


def test_idempotent_request_ids_are_stable_and_distinct() -> None:
    pid = new_producer_id(1_800_000_000)
    assert pid >> 24 == 1_800_000_000
    first = batch_request_id(pid, 0, 0)
    assert first == batch_request_id(pid, 0, 0)  # a retry
    assert len(first) == 12 and int.from_bytes(first[:4], "big") == 1_800_000_000
    assert len({first, batch_request_id(pid, 0, 5), batch_request_id(pid, 1, 0),
                batch_request_id(pid ^ 1, 0, 0)}) == 4


def test_requests_outside_the_table_are_answered() -> None:
    assert isinstance(parse_request(struct.pack(">hhih", 18, 99, 4, 0)), Unsupported)
    answer = unsupported_response(Unsupported(29, 1, 4))
    assert answer == struct.pack(">iih", 6, 4, 35)
    with pytest.raises(MalformedRequestError):
        parse_request(b"\x00\x03")
    _lo, hi = SUPPORTED[3]
    with pytest.raises(MalformedRequestError):
        parse_request(struct.pack(">hhih", 3, hi, 1, 0) + b"\xff" * 9)


def test_settings_off_without_kafka_url_and_refused_on_a_secure_cluster() -> None:
    peers = [{"id": "1", "kafka_url": "tcp://127.0.0.1:9092"}, {"id": "2"}]
    assert kafka_settings({}, "f", peers, "2", secure=False) is None
    mine = kafka_settings({"kafka": {"auto_create_topics": True}}, "f", peers, "1",
                          secure=False)
    assert mine is not None and mine.auto_create_topics and mine.brokers == (
        ("1", "tcp://127.0.0.1:9092"),)
    with pytest.raises(ConfigError, match=r"plaintext kafka_url .* on a secure cluster"):
        kafka_settings({}, "f", peers, "1", secure=True)
    sasl = [{"id": "1", "kafka_url": "sasl_ssl://127.0.0.1:9092"}]
    found = kafka_settings({}, "f", sasl, "1", secure=True)
    assert found is not None and found.sasl
    with pytest.raises(ConfigError, match="plaintext cluster"):
        kafka_settings({}, "f", sasl, "1", secure=False)
    with pytest.raises(ConfigError, match="unknown key"):
        kafka_settings({"kafka": {"sasl": 1}}, "f", peers, "1", secure=False)
    with pytest.raises(ConfigError, match="name the host"):
        kafka_settings({}, "f", [{"id": "1", "kafka_url": "tcp://0.0.0.0:1"}], "1",
                       secure=False)
    assert node_id("3") == 3 and 0 <= node_id("peer-a") < 2**31
