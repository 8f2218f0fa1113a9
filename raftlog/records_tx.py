"""Transaction entries: records stored under a transaction, then committed or rolled back (#18).

Two more kinds of topic entry (``raftlog.records``; same 15-byte header, so the wire
protocol is untouched and a reference peer replicates them as opaque STATE data):

* kind 04, transaction control: body ``[op: str, txid: str, timeout_ms: uint | nil]``,
  ``op`` one of ``begin`` (``timeout_ms`` required), ``commit``, ``rollback`` (nil);
* kind 05, transactional store: body ``[txid: str, [record, ...]]``, each record exactly as
  in a record batch (``[topic, key, value, headers, timestamp(, ttl_ms)]``). The leader may
  set AUTO_CREATE on it as on a record batch.

A transaction id is 1-128 characters of ``A-Z a-z 0-9 . _ : -``, chosen by the client (the
clients default to a random UUID). Meanings, visibility and message ids: docs/topics.md
"Transactions"; the rules are applied by ``raftlog.statemachine.topic_tx``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import msgpack

from raftlog.records import (
    _HEADER,
    _KNOWN_FLAGS,
    FLAG_AUTO_CREATE,
    HEADER_SIZE,
    MAGIC,
    MAX_UINT,
    VERSION,
    Record,
    RecordFormatError,
    TopicEntry,
    _header,
    _records,
    _unpack,
    decode_entry,
    encode_records,
)

KIND_TX: Final = 4
KIND_TX_STORE: Final = 5  # ``raftlog.records.stamp_append_time`` may flag it AUTO_CREATE

TX_OPS: Final = ("begin", "commit", "rollback")
TxOp: TypeAlias = Literal["begin", "commit", "rollback"]
TXID_RE: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_TX_TIMEOUT_MS: Final = 15 * 60 * 1000
"""Longest transaction timeout (Kafka's ``transaction.max.timeout.ms`` default): an
abandoned transaction pins log compaction at its begin entry until it times out."""
DEFAULT_TX_TIMEOUT_MS: Final = 60_000


def check_txid(txid: object) -> str:
    """A transaction id: 1-128 of ``A-Z a-z 0-9 . _ : -`` (safe in keys, URLs and logs)."""
    if not isinstance(txid, str) or not TXID_RE.fullmatch(txid):
        raise RecordFormatError(
            f"invalid transaction id {repr(txid)[:80]}: use 1-128 characters of "
            "A-Z a-z 0-9 . _ : -",
            "InvalidTransactionId",
        )
    return txid


def check_tx_timeout(timeout_ms: object) -> int:
    """A transaction timeout in ms: 1 .. ``MAX_TX_TIMEOUT_MS``."""
    if type(timeout_ms) is not int or not 1 <= timeout_ms <= MAX_TX_TIMEOUT_MS:
        raise RecordFormatError(
            f"transaction timeout must be an integer in 1 .. {MAX_TX_TIMEOUT_MS} ms, "
            f"got {timeout_ms!r}",
            "InvalidTransactionTimeout",
        )
    return timeout_ms


@dataclass(frozen=True, slots=True)
class TxControl:
    """Begin, commit or roll back transaction ``txid`` (``timeout_ms``: begin only)."""

    op: TxOp
    txid: str
    timeout_ms: int | None = None
    append_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class TxStore:
    """Records stored under transaction ``txid``: replicated and durable like any entry,
    invisible to every reader until the transaction commits."""

    txid: str
    records: tuple[Record, ...]
    append_time_ms: int = 0
    flags: int = 0

    @property
    def auto_create(self) -> bool:
        return bool(self.flags & FLAG_AUTO_CREATE)


TxEntry: TypeAlias = TxControl | TxStore


def encode_tx_control(control: TxControl) -> bytes:
    """The data of a begin / commit / rollback entry (the leader stamps the time)."""
    if control.op not in TX_OPS:
        raise RecordFormatError(f"unknown transaction operation {control.op!r}")
    check_txid(control.txid)
    if control.op == "begin":
        check_tx_timeout(control.timeout_ms)
    elif control.timeout_ms is not None:
        raise RecordFormatError(f"{control.op} takes no timeout")
    body = [control.op, control.txid, control.timeout_ms]
    packed: bytes = msgpack.packb(body, use_bin_type=True)
    return _header(KIND_TX, 0, control.append_time_ms) + packed


def encode_tx_store(txid: str, records: tuple[Record, ...] | list[Record]) -> bytes:
    """The data of a transactional store of ``records`` (validated as a record batch)."""
    check_txid(txid)
    batch = encode_records(records)  # validates; the body is the batch's body
    packed_txid: bytes = msgpack.packb(txid, use_bin_type=True)
    # [txid, records]: a 2-array header (0x92), the txid, then the batch body as is
    return _header(KIND_TX_STORE, 0, 0) + b"\x92" + packed_txid + batch[HEADER_SIZE:]


def decode_tx_body(kind: int, flags: int, append_time: int, body: object) -> TxEntry:
    """The transaction entry of ``kind`` from its unpacked MessagePack body."""
    if kind == KIND_TX:
        if flags:
            raise RecordFormatError("transaction control entries take no flags")
        if not isinstance(body, list) or len(body) != 3:
            raise RecordFormatError("a transaction control body is a 3-element array")
        op, txid, timeout = body
        if op not in TX_OPS:
            raise RecordFormatError(f"unknown transaction operation {op!r}")
        check_txid(txid)
        if op == "begin":
            check_tx_timeout(timeout)
        elif timeout is not None:
            raise RecordFormatError(f"{op} takes no timeout")
        return TxControl(op, txid, timeout, append_time)
    if not isinstance(body, list) or len(body) != 2:
        raise RecordFormatError("a transactional store body is [txid, records]")
    return TxStore(check_txid(body[0]), _records(body[1]), append_time, flags)


def decode_any_entry(data: bytes) -> TopicEntry | TxEntry | None:
    """Any topic entry, transaction kinds included (``raftlog.records.decode_entry``'s
    rules otherwise): None without the magic, ``RecordFormatError`` when malformed."""
    if len(data) <= HEADER_SIZE or data[:4] != MAGIC or data[5] not in (KIND_TX, KIND_TX_STORE):
        return decode_entry(data)
    _, version, kind, flags, append_time = _HEADER.unpack_from(data)
    if version != VERSION:  # the header checks of decode_entry
        raise RecordFormatError(f"unsupported topic entry version {version}")
    if flags & ~_KNOWN_FLAGS:
        raise RecordFormatError(f"unknown flags {flags:#x}")
    if append_time > MAX_UINT:
        raise RecordFormatError(f"append time {append_time} is out of range")
    return decode_tx_body(kind, flags, append_time, _unpack(data[HEADER_SIZE:]))


def tx_records_size(records: tuple[Record, ...]) -> int:
    """What the per-transaction byte limit counts (``Record.size`` summed)."""
    return sum(r.size for r in records)


__all__ = [
    "DEFAULT_TX_TIMEOUT_MS",
    "KIND_TX",
    "KIND_TX_STORE",
    "MAX_TX_TIMEOUT_MS",
    "TxControl",
    "TxEntry",
    "TxStore",
    "check_tx_timeout",
    "check_txid",
    "decode_any_entry",
    "decode_tx_body",
    "encode_tx_control",
    "encode_tx_store",
    "tx_records_size",
]
