"""Transactions in the topic machine (issue #18): the deterministic rules and their state.

Every peer applies the same transaction entries (``raftlog.topics.records_tx``) in the same order
with the same log clock, so every peer opens, stores into, commits, rolls back and times out
exactly the same transactions at the same indexes. The rules (each refusal is deterministic,
counted, and reported to a ``TP`` publisher through ``refusal_at``):

* ``begin``: refused if the id is open already (``TransactionExists``) or
  ``MAX_OPEN_TRANSACTIONS`` are open (``TransactionLimit``). The deadline is the log clock
  after the begin entry plus its timeout.
* the log clock moves with every stamped topic entry; *before* an entry is applied, every
  open transaction whose deadline is at or below the new clock times out (at that entry's
  index). Timeouts therefore never read a peer's wall clock: the leader's clock ticks
  (``raftlog.topics.clock``, fed by ``next_deadline``) make them happen on an idle
  cluster, like retention.
* ownership (issue #25): the begin's actor (``records_tx.Actor``, written by the request
  guard from the authenticated key) owns the transaction; a store, commit or rollback whose
  actor is neither the owner nor an admin is refused (``TransactionNotOwned``). Entries
  without an actor (members, plaintext clusters) are not checked; a transaction begun
  without one has no owner. The owner is part of the replicated state (index, snapshots), so
  every peer, and every later leader, decides alike.
* ``store``: refused unless the transaction is open; its records are checked like a plain
  batch (topic exists unless AUTO_CREATE, ``max_record_bytes``) and against the
  per-transaction bounds (``MAX_TX_RECORDS``, ``MAX_TX_BYTES``; the transaction stays open).
  A stored record is a durable log entry that no reader sees.
* ``commit``: the stores, re-read from the log, become one record entry *at the commit's
  index*: record ``k`` of the transaction (store order, across topics) gets id
  ``(commit index, k)`` and the commit's append time. If a topic it wrote to was deleted (or
  re-created) since, the whole transaction aborts instead: all or nothing.
* ``rollback``: the transaction ends; its stores become garbage.

State, in the topic index (``topic_index`` lists the keys, ``tx_rows`` encodes the rows):
``e <begin>`` per transaction (id, deadline, totals, end and outcome), ``y <begin> <store>``
per store, ``x <txid>`` the latest begin of an id (for status and error names),
``t <commit>`` the stores behind each commit (for readers). Open transactions are also held
in memory. Everything is written in the apply's batch; a finished transaction's keys are
dropped once the log is compacted past its end (``collect``).

Log compaction (``compaction_floor``): a snapshot at index S must never fall inside a
transaction that was open at S -- its begin would be compacted away while later entries
still refer to it -- nor drop the stores of a committed transaction whose records are
retained. So the limit stays below the begin of every open transaction, of every committed
one that may still hold retained records, and of any finished one whose span contains it.
Snapshots then rarely carry open transactions, but they do carry them exactly (``snapshot``),
so a peer restoring one ends with the same state whatever the limit was.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import msgpack

from raftlog.errors import TopicError, TransactionError, transaction_error
from raftlog.topics.index import TopicIndex, u64
from raftlog.topics.records_tx import TxControl, TxStore
from raftlog.topics.tx_rows import (
    _END,
    Finished,
    OpenTransaction,
    _begin_key,
    _pack_tx,
    _store_key,
    _unpack_tx,
)
from raftlog.topics.wire_tx import TransactionInfo

MAX_OPEN_TRANSACTIONS: Final = 1000
"""Open transactions at once (each pins log compaction at its begin until it ends)."""
MAX_TX_RECORDS: Final = 100_000
"""Records in one transaction."""
MAX_TX_BYTES: Final = 64 * 1024 * 1024
"""Bytes (``Record.size``) in one transaction."""
MAX_RECENT: Final = 10_000
"""Finished transactions remembered in memory (beyond: read from the index)."""


class TransactionTable:
    """The open transactions and the rules above, over the topic index's keys."""

    def __init__(self, index: TopicIndex) -> None:
        self._index = index
        self.open: dict[str, OpenTransaction] = {}
        self._deadlines: list[tuple[int, int, str]] = []
        self._recent: OrderedDict[str, TransactionInfo] = OrderedDict()
        """How transactions ended lately (the index learns it only when the apply's batch
        is written; error names and status need it at once)."""
        self.load()

    # -- state -----------------------------------------------------------------------------
    def load(self) -> None:
        """(Re)read the open transactions from the index (start-up, snapshot restore)."""
        self.open.clear()
        self._recent.clear()
        for key, value in self._index.items(b"e", b"f", "transactions"):
            txid, deadline, records, size, state, _, _, owner = _unpack_tx(value)
            if state is None:
                begin = int.from_bytes(key[1:], "big")
                tx = OpenTransaction(txid, begin, deadline, [], records, size, owner)
                for skey, svalue in self._index.items(
                    _store_key(begin, 0), _store_key(begin + 1, 0), "transaction stores"
                ):
                    tx.stores.append((int.from_bytes(skey[9:], "big"), msgpack.unpackb(svalue)[0]))
                self.open[txid] = tx
        self._deadlines = [(t.deadline_ms, t.begin_index, t.txid) for t in self.open.values()]
        heapq.heapify(self._deadlines)

    def next_deadline(self) -> int | None:
        """The earliest log-clock deadline of an open transaction (None: none open)."""
        heap = self._deadlines
        while heap:
            deadline, begin, txid = heap[0]
            tx = self.open.get(txid)
            if tx is not None and tx.begin_index == begin:
                return deadline
            heapq.heappop(heap)  # ended, or an earlier transaction of the same id
        return None

    def why_not_open(self, txid: str) -> TransactionError:
        """The typed error for a transaction that is not open: how it ended, if this peer
        still remembers (the name may differ between peers; the refusal itself never does)."""
        info = self.status(txid)
        if info is None:
            return transaction_error(
                "UnknownTransaction", f"no open transaction {txid!r}", txid
            )
        name = {
            "committed": "TransactionCommitted",
            "aborted": "TransactionAborted",
            "expired": "TransactionExpired",
        }.get(info.state, "UnknownTransaction")
        how = {
            "committed": f"committed at index {info.commit_index}",
            "aborted": f"was rolled back or aborted at index {info.end_index}",
            "expired": f"timed out at index {info.end_index}",
        }.get(info.state, "is not open")
        return transaction_error(name, f"transaction {txid!r} {how}", txid)

    def status(self, txid: str) -> TransactionInfo | None:
        """What this peer knows of ``txid`` (``TS``)."""
        tx = self.open.get(txid)
        if tx is not None:
            return TransactionInfo(
                txid, "open", tx.begin_index, tx.deadline_ms, tx.records, tx.bytes,
                owner=tx.owner,
            )
        recent = self._recent.get(txid)
        if recent is not None:
            return recent
        begin = self._index.get(b"x" + txid.encode(), "transaction id")
        value = None if begin is None else self._index.get(b"e" + begin, "transaction")
        if begin is None or value is None:
            return None
        _, deadline, records, size, state, end, commit, owner = _unpack_tx(value)
        if state not in ("committed", "aborted", "expired"):
            return None
        return TransactionInfo(
            txid, state, int.from_bytes(begin, "big"), deadline, records, size, end, commit,
            owner,
        )

    def known_status(self, txid: str) -> TransactionInfo:
        """``status``, or the typed error saying this peer knows nothing of ``txid``."""
        info = self.status(txid)
        if info is None:
            raise self.why_not_open(txid)
        return info

    # -- the rules (called by the topic machine in apply order) ----------------------------
    def expire(self, batch: Any, index: int, clock_ms: int) -> list[str]:
        """Time out every open transaction whose deadline is at or below ``clock_ms`` (the
        log clock as of entry ``index``); their ids."""
        expired = []
        while (due := self.next_deadline()) is not None and due <= clock_ms:
            _, _, txid = heapq.heappop(self._deadlines)
            self._finish(batch, self.open[txid], Finished("expired", index))
            expired.append(txid)
        return expired

    def check(self, entry: TxControl | TxStore, now_ms: int) -> TopicError | None:
        """Why ``entry`` would be refused now, before the record checks (the leader's gate
        asks with the stamp it would give; apply asks with the log clock)."""
        txid = entry.txid
        tx = self.open.get(txid)
        if isinstance(entry, TxControl) and entry.op == "begin":
            if tx is not None:
                return transaction_error(
                    "TransactionExists", f"transaction {txid!r} is open already", txid
                )
            if len(self.open) >= MAX_OPEN_TRANSACTIONS:
                return transaction_error(
                    "TransactionLimit",
                    f"{MAX_OPEN_TRANSACTIONS} transactions are open (the limit): commit or "
                    "roll back some first",
                    txid,
                )
            return None
        if tx is None:
            return self.why_not_open(txid)
        if entry.actor is not None and not entry.actor.may_act_for(tx.owner):
            return transaction_error(
                "TransactionNotOwned",
                f"transaction {txid!r} belongs to another principal: only its owner or an "
                "admin may use it",
                txid,
            )
        if tx.deadline_ms <= now_ms:
            return transaction_error(
                "TransactionExpired", f"transaction {txid!r} timed out", txid
            )
        if isinstance(entry, TxStore):
            count = tx.records + len(entry.records)
            size = tx.bytes + sum(r.size for r in entry.records)
            if count > MAX_TX_RECORDS:
                return transaction_error(
                    "TransactionLimit",
                    f"transaction {txid!r} would hold {count} records (at most "
                    f"{MAX_TX_RECORDS})",
                    txid,
                )
            if size > MAX_TX_BYTES:
                return transaction_error(
                    "TransactionLimit",
                    f"transaction {txid!r} would hold {size} bytes (at most {MAX_TX_BYTES})",
                    txid,
                )
        return None

    def begin(self, batch: Any, index: int, entry: TxControl, clock_ms: int) -> None:
        """Open ``entry.txid`` (checked) with its deadline on the log clock."""
        assert entry.timeout_ms is not None
        owner = None if entry.actor is None else entry.actor.name
        tx = OpenTransaction(entry.txid, index, clock_ms + entry.timeout_ms, owner=owner)
        self.open[tx.txid] = tx
        heapq.heappush(self._deadlines, (tx.deadline_ms, index, tx.txid))
        if len(self._deadlines) > 2 * len(self.open) + 1024:  # ended ones wait for their turn
            self._deadlines = [(t.deadline_ms, t.begin_index, t.txid) for t in self.open.values()]
            heapq.heapify(self._deadlines)
        batch.put(_begin_key(index), _pack_tx(tx, None))
        batch.put(b"x" + tx.txid.encode(), u64(index))

    def store(self, batch: Any, index: int, entry: TxStore) -> None:
        """Add a (checked) store to its open transaction."""
        tx = self.open[entry.txid]
        size = sum(r.size for r in entry.records)
        tx.stores.append((index, len(entry.records)))
        tx.records += len(entry.records)
        tx.bytes += size
        batch.put(_store_key(tx.begin_index, index), msgpack.packb([len(entry.records), size]))
        batch.put(_begin_key(tx.begin_index), _pack_tx(tx, None))

    def end(self, batch: Any, txid: str, finished: Finished) -> OpenTransaction:
        """Commit or roll back (the caller indexed a commit's records)."""
        tx = self.open[txid]
        self._finish(batch, tx, finished)
        return tx

    def _finish(self, batch: Any, tx: OpenTransaction, finished: Finished) -> None:
        del self.open[tx.txid]
        batch.put(_begin_key(tx.begin_index), _pack_tx(tx, finished))
        self._recent[tx.txid] = TransactionInfo(
            tx.txid,
            finished.state,
            tx.begin_index,
            tx.deadline_ms,
            tx.records,
            tx.bytes,
            finished.end_index,
            finished.commit_index,
            tx.owner,
        )
        self._recent.move_to_end(tx.txid)
        if len(self._recent) > MAX_RECENT:
            self._recent.popitem(last=False)

    # -- compaction and snapshots ----------------------------------------------------------
    def spans(self) -> Iterator[tuple[int, int | None, int | None]]:
        """``(begin, end or None while open, commit index or None)`` of every transaction
        the index still holds, newest begin first."""
        rows = list(self._index.items(b"e", b"f", "transactions"))
        for key, value in reversed(rows):
            _, _, _, _, state, end, commit, _ = _unpack_tx(value)
            yield int.from_bytes(key[1:], "big"), (None if state is None else end), commit

    def compaction_floor(self, limit: int) -> int:
        """``limit`` lowered so that a snapshot there is inside no transaction's span and
        keeps the stores of every commit above ``limit`` (whose records may be retained)."""
        retained_above = limit
        for begin, end, commit in self.spans():  # newest begin first: one pass suffices
            if begin > limit:
                continue
            if end is None or limit < end or (commit is not None and commit > retained_above):
                limit = begin - 1
        return limit

    def collect(
        self, batch: Any, snapshot_index: int, after: bytes = b"", limit: int | None = None
    ) -> bytes | None:
        """Drop the keys of transactions that ended at or below ``snapshot_index`` (the log
        no longer holds them; no later snapshot can fall inside them), looking at those
        begun at or below it after row ``after``, at most ``limit`` of them; returns the
        last row looked at when the limit stopped it (go on after it), None when done. (All
        at once it took ~0.2 s of the loop per 30,000 transactions: ``index_cleanup``.)"""
        lo, hi = max(b"e", after + b"\x00"), _begin_key(snapshot_index + 1)
        for looked, (key, value) in enumerate(self._index.items(lo, hi, "transactions")):
            if limit is not None and looked >= limit:
                return after
            after = key
            txid, _, _, _, state, end, _, _ = _unpack_tx(value)
            if state is None or end > snapshot_index:
                continue
            begin = key[1:]
            batch.delete(key)
            for skey, _ in self._index.items(b"y" + begin, b"y" + begin + _END, "stores"):
                batch.delete(b"z" + skey[9:])  # a copy from a snapshot, if any
            batch.delete_range(b"y" + begin, b"y" + begin + _END)
            if self._index.get(b"x" + txid.encode(), "transaction id") == begin:
                batch.delete(b"x" + txid.encode())
        return None

    def snapshot(self, index: int, store_data: Callable[[int], bytes | None]) -> list[list[Any]]:
        """The transactions open at ``index`` exactly as they were then: ``[txid, begin,
        deadline, [[store, records, bytes, data], ...], owner]`` each, with the data of their
        stores up to ``index`` (the log below ``index`` goes with the snapshot; the
        compaction floor keeps this list empty in practice, but a snapshot is exact anyway)."""
        out: list[list[Any]] = []
        for key, value in self._index.items(b"e", _begin_key(index + 1), "transactions"):
            txid, deadline, _, _, state, end, _, owner = _unpack_tx(value)
            if state is not None and end <= index:
                continue
            begin = int.from_bytes(key[1:], "big")
            stores = [
                [
                    int.from_bytes(skey[9:], "big"),
                    *msgpack.unpackb(svalue),
                    store_data(int.from_bytes(skey[9:], "big")),
                ]
                for skey, svalue in self._index.items(
                    _store_key(begin, 0), _store_key(begin, index + 1), "transaction stores"
                )
            ]
            out.append([txid, begin, deadline, stores, owner])
        return out

    @staticmethod
    def restore(batch: Any, part: Sequence[Sequence[Any]]) -> None:
        """Write the open transactions of a snapshot (the index was cleared), with copies
        of their stores' data (``z`` keys: the restored log no longer has them); ``load``
        reads them back. Snapshots written before owners existed have no fifth field."""
        for row in part:
            txid, begin, deadline, stores = row[:4]
            owner = row[4] if len(row) > 4 and isinstance(row[4], str) else None
            tx = OpenTransaction(str(txid), int(begin), int(deadline), owner=owner)
            for store, records, size, data in stores:
                if isinstance(data, bytes):
                    batch.put(b"z" + u64(int(store)), data)
                tx.stores.append((int(store), int(records)))
                tx.records += int(records)
                tx.bytes += int(size)
                batch.put(_store_key(tx.begin_index, int(store)), msgpack.packb([records, size]))
            batch.put(_begin_key(tx.begin_index), _pack_tx(tx, None))
            batch.put(b"x" + tx.txid.encode(), u64(tx.begin_index))
