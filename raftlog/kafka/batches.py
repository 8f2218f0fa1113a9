"""Kafka record batches (magic v2) to raftlog records and back.

Why not kio's own batch reader: it cannot read a compressed batch and it rounds record
timestamps down to whole seconds; so the batch framing is read here with kio's primitive
readers (varints, integers), the codecs are ``cramjam``'s (gzip, snappy, lz4 frame, zstd:
one maintained library with all four, no system libraries), and the checksum is
``crc32c``'s (kio's own dependency). Only the xerial snappy framing that Java clients wrap
around snappy blocks is unwrapped by hand: no library offers it alone.

A Kafka record maps onto a raftlog ``Record``: key -> key, value -> value (a null value,
Kafka's tombstone, becomes an empty value), headers -> headers (keys are UTF-8; a null
header value becomes empty; a repeated header key keeps its last value), the record's
timestamp -> the producer timestamp.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import cramjam
import crc32c
from kio.serial.readers import read_signed_varint, read_signed_varlong
from kio.serial.writers import write_signed_varint, write_signed_varlong

from raftlog.kafka.offsets import offset_of
from raftlog.topics.records import LoggedRecord, Record

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""base offset, length, leader epoch, magic, crc, attributes, last offset delta, base and max
timestamp, producer id and epoch, base sequence, record count (61 bytes)."""
CRC_FROM: Final = 21
"""The checksum covers the batch from the attributes on."""
COMPRESSION_MASK: Final = 0x07
TRANSACTIONAL: Final = 0x10
CONTROL: Final = 0x20
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
CODECS: Final = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class BatchError(ValueError):
    """A batch that cannot be read: ``code`` is the Kafka error to answer with."""

    def __init__(self, message: str, code: int = 2) -> None:  # 2: CORRUPT_MESSAGE
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    """One batch of a Produce request, its records already raftlog records."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...]
    transactional: bool


def _decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise BatchError(f"cannot decompress {CODECS[codec]} records: {exc}") from None
    raise BatchError(f"unknown compression codec {codec}", code=76)  # UNSUPPORTED_COMPRESSION


def _snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic, version, compatible version
    while pos < len(data):
        if pos + 4 > len(data):
            raise BatchError("truncated xerial snappy block")
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0 or pos + 4 + size > len(data):
            raise BatchError("bad xerial snappy block length")
        out += cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return bytes(out)


def _bytes(buf: bytes, pos: int, what: str) -> tuple[bytes | None, int]:
    size, used = read_signed_varint(buf, pos)
    pos += used
    if size < 0:
        return None, pos
    if pos + size > len(buf):
        raise BatchError(f"{what} runs past the end of its record")
    return buf[pos : pos + size], pos + size


def _records(buf: bytes, count: int, topic: str, base_ts: int) -> Iterator[Record]:
    pos = 0
    for _ in range(count):
        length, used = read_signed_varint(buf, pos)
        pos += used
        end = pos + length
        if length < 6 or end > len(buf):
            raise BatchError("a record's length does not fit its batch")
        pos += 1  # attributes (unused by Kafka today)
        ts_delta, used = read_signed_varlong(buf, pos)
        pos += used
        _offset_delta, used = read_signed_varint(buf, pos)
        pos += used
        key, pos = _bytes(buf, pos, "key")
        value, pos = _bytes(buf, pos, "value")
        n_headers, used = read_signed_varint(buf, pos)
        pos += used
        headers: dict[str, bytes] = {}
        for _h in range(max(n_headers, 0)):
            name, pos = _bytes(buf, pos, "header key")
            hvalue, pos = _bytes(buf, pos, "header value")
            try:
                headers[(name or b"").decode()] = hvalue or b""
            except UnicodeDecodeError:
                raise BatchError("a header key is not UTF-8") from None
        if pos != end:
            raise BatchError("a record's fields do not add up to its length")
        yield Record(topic, value or b"", key, headers, max(base_ts + ts_delta, 0))


def decode_batches(data: bytes, topic: str) -> list[ProducedBatch]:
    """The batches of one partition's ``records`` field (``BatchError`` when corrupt)."""
    out: list[ProducedBatch] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            raise BatchError("truncated record batch")
        (_base, length, _epoch, magic, crc, attrs, _last, base_ts, _max_ts, pid, pepoch,
         seq, count) = HEADER.unpack_from(data, pos)
        if magic != 2:
            raise BatchError(f"record batch magic {magic}: only v2 (Kafka 0.11+) is spoken",
                             code=87)  # INVALID_RECORD
        end = pos + 12 + length
        if length < HEADER.size - 12 or end > len(data):
            raise BatchError("record batch length runs past the request")
        if crc32c.crc32c(data[pos + CRC_FROM : end]) != crc:
            raise BatchError("record batch checksum mismatch")
        if attrs & CONTROL:
            raise BatchError("control batches are written by brokers only", code=87)
        if not 0 <= count <= len(data):
            raise BatchError("record batch count is impossible", code=87)
        body = data[pos + HEADER.size : end]
        codec = attrs & COMPRESSION_MASK
        if codec:
            body = _decompress(codec, body)
        records = tuple(_records(body, count, topic, base_ts))
        out.append(ProducedBatch(pid, pepoch, seq, records, bool(attrs & TRANSACTIONAL)))
        pos = end
    return out


def _record_bytes(item: LoggedRecord, base_ts: int, delta: int) -> bytes:
    rec = item.record
    out = io.BytesIO()
    out.write(b"\x00")
    write_signed_varlong(out, _timestamp(item) - base_ts)
    write_signed_varint(out, delta)
    if rec.key is None:
        write_signed_varint(out, -1)
    else:
        write_signed_varint(out, len(rec.key))
        out.write(rec.key)
    write_signed_varint(out, len(rec.value))
    out.write(rec.value)
    write_signed_varint(out, len(rec.headers))
    for name, value in rec.headers.items():
        raw = name.encode()
        write_signed_varint(out, len(raw))
        out.write(raw)
        write_signed_varint(out, len(value))
        out.write(value)
    body = out.getvalue()
    size = io.BytesIO()
    write_signed_varint(size, len(body))
    return size.getvalue() + body


def _timestamp(item: LoggedRecord) -> int:
    """The producer's timestamp when it gave one, else the append time (CreateTime)."""
    return item.record.timestamp_ms or item.append_time_ms


def encode_batch(items: Sequence[LoggedRecord]) -> bytes:
    """One uncompressed v2 batch of ``items`` (records of one log entry, in order): the base
    offset is the first record's, each record's delta its own offset's distance from it."""
    base = offset_of(items[0].id)
    stamps = [_timestamp(item) for item in items]
    base_ts = min(stamps)
    body = b"".join(
        _record_bytes(item, base_ts, offset_of(item.id) - base) for item in items
    )
    last_delta = offset_of(items[-1].id) - base
    tail = struct.pack(">hiqqqhii", 0, last_delta, base_ts, max(stamps), -1, -1, -1,
                       len(items)) + body
    crc = crc32c.crc32c(tail)
    return struct.pack(">qiibI", base, len(tail) + 9, -1, 2, crc) + tail


def group_by_entry(items: Sequence[LoggedRecord]) -> Iterator[Sequence[LoggedRecord]]:
    """Consecutive records of one log entry (one Kafka batch each)."""
    start = 0
    for n in range(1, len(items) + 1):
        if n == len(items) or items[n].id.index != items[start].id.index:
            yield items[start:n]
            start = n
