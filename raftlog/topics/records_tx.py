"""Transaction entries: records stored under a transaction, then committed or rolled back (#18).

Two more kinds of topic entry (``raftlog.topics.records``; same 15-byte header, so the wire
protocol is untouched and a reference peer replicates them as opaque STATE data):

* kind 04, transaction control: body ``[op: str, txid: str, timeout_ms: uint | nil(,
  actor)]``, ``op`` one of ``begin`` (``timeout_ms`` required), ``commit``, ``rollback`` (nil);
* kind 05, transactional store: body ``[txid: str, [record, ...](, actor)]``, each record
  exactly as in a record batch (``[topic, key, value, headers, timestamp(, ttl_ms)]``). The
  leader may set AUTO_CREATE on it as on a record batch.

``actor`` (issue #25) is ``[principal name: str, admin: bool]``: who sent the entry. On a
CURVE cluster the receiving peer's request guard writes it from the connection's
authenticated key, replacing whatever a client put there (``raftlog.security.guard``); only
a member may assert one (a peer's REST gateway acting for a token's client). The begin's
actor becomes the transaction's owner, replicated with it, and every later store, commit or
rollback must come from the owner or an admin (``TransactionNotOwned`` otherwise). Without
an actor (a plaintext cluster, or older entries) a transaction has no owner.

A transaction id is 1-128 characters of ``A-Z a-z 0-9 . _ : -``, chosen by the client (the
clients default to a random UUID). Meanings, visibility and message ids: docs/topics.md
"Transactions"; the rules are applied by ``raftlog.topics.tx``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import msgpack

from raftlog.topics.groups.entry import KIND_GROUP, GroupCommand, decode_group_body
from raftlog.topics.record_decode import _records, _unpack, decode_entry
from raftlog.topics.records import (
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
    encode_records,
)
from raftlog.topics.records_kv import KIND_CONDITIONAL, decode_conditional

KIND_TX: Final = 4
KIND_TX_STORE: Final = 5  # ``raftlog.topics.stamp.stamp_append_time`` may flag it AUTO_CREATE
_KINDS: Final = (KIND_TX, KIND_TX_STORE, KIND_CONDITIONAL, KIND_GROUP)
"""The kinds ``decode_any_entry`` decodes beyond ``decode_entry``'s."""

TX_OPS: Final = ("begin", "commit", "rollback")
TxOp: TypeAlias = Literal["begin", "commit", "rollback"]
TXID_RE: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_TX_TIMEOUT_MS: Final = 15 * 60 * 1000
"""Longest transaction timeout (Kafka's ``transaction.max.timeout.ms`` default): an
abandoned transaction pins log compaction at its begin entry until it times out."""
DEFAULT_TX_TIMEOUT_MS: Final = 60_000
MAX_ACTOR_NAME: Final = 256
"""Longest principal name an actor may carry (allowlist names are short)."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who sent a transaction entry: a principal's name and whether it has the admin role.
    The begin's actor owns the transaction; the admin flag travels with each entry so that
    every peer decides "owner or admin" from the log alone, the same way."""

    name: str
    admin: bool = False

    def packed(self) -> list[object]:
        """The wire form ``[name, admin]``."""
        return [self.name, self.admin]

    def may_act_for(self, owner: str | None) -> bool:
        """True if this actor may store into, commit, roll back or read a transaction owned
        by ``owner`` (None: nobody owns it)."""
        return owner is None or self.admin or self.name == owner


def decode_actor(raw: object) -> Actor | None:
    """An actor from its wire form (nil: none); ``RecordFormatError`` when malformed."""
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not isinstance(raw[0], str)
        or not 0 < len(raw[0]) <= MAX_ACTOR_NAME
        or not isinstance(raw[1], bool)
    ):
        raise RecordFormatError(
            "a transaction actor is [name (1-256 characters), admin (bool)]"
        )
    return Actor(raw[0], raw[1])


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
    actor: Actor | None = None


@dataclass(frozen=True, slots=True)
class TxStore:
    """Records stored under transaction ``txid``: replicated and durable like any entry,
    invisible to every reader until the transaction commits."""

    txid: str
    records: tuple[Record, ...]
    append_time_ms: int = 0
    flags: int = 0
    actor: Actor | None = None

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
    body: list[object] = [control.op, control.txid, control.timeout_ms]
    if control.actor is not None:
        body.append(control.actor.packed())
    packed: bytes = msgpack.packb(body, use_bin_type=True)
    return _header(KIND_TX, 0, control.append_time_ms) + packed


def encode_tx_store(
    txid: str, records: tuple[Record, ...] | list[Record], actor: Actor | None = None
) -> bytes:
    """The data of a transactional store of ``records`` (validated as a record batch)."""
    check_txid(txid)
    batch = encode_records(records)  # validates; the body is the batch's body
    packed_txid: bytes = msgpack.packb(txid, use_bin_type=True)
    # [txid, records]: a 2-array header (0x92), the txid, then the batch body as is
    data = _header(KIND_TX_STORE, 0, 0) + b"\x92" + packed_txid + batch[HEADER_SIZE:]
    return data if actor is None else with_actor(data, actor)


def with_actor(data: bytes, actor: Actor) -> bytes:
    """Transaction entry ``data`` with its actor set to ``actor`` (any actor it carried is
    replaced); the request guard's rewrite. A store without an actor -- what clients send --
    is extended in place (its records are not re-encoded); anything else is decoded and
    re-encoded. ``RecordFormatError`` when ``data`` is not a transaction entry (or one that
    must be decoded and is malformed)."""
    if len(data) <= HEADER_SIZE or data[:4] != MAGIC or data[5] not in (KIND_TX, KIND_TX_STORE):
        raise RecordFormatError("not a transaction entry")
    packed_actor: bytes = msgpack.packb(actor.packed(), use_bin_type=True)
    if data[5] == KIND_TX_STORE and data[HEADER_SIZE] == 0x92:
        # anything malformed (or trailing bytes posing as an actor) stays malformed: msgpack
        # refuses extra data, and the topic gate decodes every transaction entry in full
        return data[:HEADER_SIZE] + b"\x93" + data[HEADER_SIZE + 1 :] + packed_actor
    entry = decode_any_entry(data)
    header = data[:HEADER_SIZE]
    if isinstance(entry, TxControl):
        body = [entry.op, entry.txid, entry.timeout_ms, actor.packed()]
        return header + bytes(msgpack.packb(body, use_bin_type=True))
    assert isinstance(entry, TxStore)
    stripped = encode_tx_store(entry.txid, entry.records)  # a 2-array again
    return header + b"\x93" + stripped[HEADER_SIZE + 1 :] + packed_actor


def decode_tx_body(kind: int, flags: int, append_time: int, body: object) -> TxEntry:
    """The transaction entry of ``kind`` from its unpacked MessagePack body."""
    if kind == KIND_TX:
        if flags:
            raise RecordFormatError("transaction control entries take no flags")
        if not isinstance(body, list) or len(body) not in (3, 4):
            raise RecordFormatError("a transaction control body is a 3- or 4-element array")
        op, txid, timeout = body[:3]
        if op not in TX_OPS:
            raise RecordFormatError(f"unknown transaction operation {op!r}")
        check_txid(txid)
        if op == "begin":
            check_tx_timeout(timeout)
        elif timeout is not None:
            raise RecordFormatError(f"{op} takes no timeout")
        actor = decode_actor(body[3]) if len(body) == 4 else None
        return TxControl(op, txid, timeout, append_time, actor)
    if not isinstance(body, list) or len(body) not in (2, 3):
        raise RecordFormatError("a transactional store body is [txid, records(, actor)]")
    actor = decode_actor(body[2]) if len(body) == 3 else None
    return TxStore(check_txid(body[0]), _records(body[1]), append_time, flags, actor)


def decode_any_entry(data: bytes) -> TopicEntry | TxEntry | GroupCommand | None:
    """Any topic entry, transaction kinds included (``raftlog.topics.record_decode.decode_entry``'s
    rules otherwise): None without the magic, ``RecordFormatError`` when malformed."""
    if len(data) <= HEADER_SIZE or data[:4] != MAGIC or data[5] not in _KINDS:
        return decode_entry(data)
    _, version, kind, flags, append_time = _HEADER.unpack_from(data)
    if version != VERSION:  # the header checks of decode_entry
        raise RecordFormatError(f"unsupported topic entry version {version}")
    if flags & ~_KNOWN_FLAGS:
        raise RecordFormatError(f"unknown flags {flags:#x}")
    if append_time > MAX_UINT:
        raise RecordFormatError(f"append time {append_time} is out of range")
    if kind == KIND_CONDITIONAL:  # issue #29 (raftlog.topics.records_kv); no leader flags
        if flags:
            raise RecordFormatError("a conditional batch takes no flags")
        return decode_conditional(_unpack(data[HEADER_SIZE:]), append_time, flags)
    if kind == KIND_GROUP:  # issue #27: consumer groups (raftlog.topics.groups.entry)
        return decode_group_body(flags, append_time, _unpack(data[HEADER_SIZE:]))
    return decode_tx_body(kind, flags, append_time, _unpack(data[HEADER_SIZE:]))


def tx_records_size(records: tuple[Record, ...]) -> int:
    """What the per-transaction byte limit counts (``Record.size`` summed)."""
    return sum(r.size for r in records)


__all__ = [
    "DEFAULT_TX_TIMEOUT_MS",
    "Actor",
    "decode_actor",
    "with_actor",
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
