"""How the transaction table (``raftlog.topics.tx``) holds its state: an open transaction in
memory (``OpenTransaction``), how one ended (``Finished``), and the topic-index rows both are
written as -- ``e <begin>`` (``_pack_tx``: id, deadline, totals, end and outcome, owner) and
``y <begin> <store>`` per store (``_store_key``).

Why apart: ``tx.py`` holds the rules (what every peer decides, in apply order); this module
holds the shapes and the row encoding those decisions are kept in, which the rules, the
status answers, compaction and snapshots all read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from raftlog.topics.index import u64
from raftlog.topics.wire_tx import TxState

_END: Final = b"\xff" * 8


@dataclass(slots=True)
class OpenTransaction:
    """One open transaction as the machine holds it."""

    txid: str
    begin_index: int
    deadline_ms: int
    stores: list[tuple[int, int]] = field(default_factory=list)
    """``(store entry index, records)`` in log order."""
    records: int = 0
    bytes: int = 0
    owner: str | None = None
    """The principal that began it (None: nobody owns it)."""


@dataclass(frozen=True, slots=True)
class Finished:
    """How a transaction ended."""

    state: TxState
    end_index: int
    commit_index: int | None = None


def _pack_tx(tx: OpenTransaction, end: Finished | None) -> bytes:
    packed: bytes = msgpack.packb(
        [
            tx.txid,
            tx.deadline_ms,
            tx.records,
            tx.bytes,
            None if end is None else end.state,
            None if end is None else end.end_index,
            None if end is None else end.commit_index,
            tx.owner,
        ]
    )
    return packed


def _unpack_tx(value: bytes) -> list[Any]:
    """``_pack_tx``'s eight fields; rows written before owners existed had seven."""
    fields: list[Any] = msgpack.unpackb(value)
    return fields if len(fields) == 8 else [*fields, None]


def _begin_key(begin: int) -> bytes:
    return b"e" + u64(begin)


def _store_key(begin: int, store: int) -> bytes:
    return b"y" + u64(begin) + u64(store)
