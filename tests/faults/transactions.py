"""Transactions under faults: clients that each run begin / 3 stores / commit in a loop, and
the check that no committed transaction is lost or half-visible.

Every step carries its own request id, kept across the step's retries, so a retry after a
timeout or a lost leader is answered with the first index instead of storing or committing
twice. A transaction is ``ok`` once its commit is answered (with the commit's index),
``fail`` when the cluster definitely refused a step (expired, aborted), ``info`` when the run
ended first (it stays open and times out by itself).

Checks (``check_transactions``), added to the run's report under the existing classes:

* ``lost`` — an acknowledged commit whose index does not hold that transaction's commit in
  the committed log (unless every peer compacted it away);
* ``topic`` — a peer serves some but not all records of a transaction (half-visible), or
  records of a transaction that never committed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from faults.history import Report, TopicRead
from raftlog.client import RaftClient
from raftlog.entry import LogEntry
from raftlog.errors import ClientClosedError, RaftlogError, RequestExpiredError, TransactionError
from raftlog.topics.client import TopicClient
from raftlog.topics.client_tx import new_txid
from raftlog.topics.records_tx import TxControl, decode_any_entry

TX_TOPIC = "chaos-tx"
RECORDS_PER_TX = 3
TX_TIMEOUT_S = 60.0

_T = TypeVar("_T")


@dataclass
class Tx:
    client: str
    txid: str
    outcome: str = "info"
    commit_index: int | None = None
    complete_t: float | None = None


class _RefusedError(Exception):
    """The cluster definitely refused a step: the transaction did not commit."""


async def _step(call: Callable[[], Awaitable[_T]], stop: asyncio.Event) -> _T | None:
    """``call`` until it answers (None when the run ends first); ``_RefusedError`` on a definite
    refusal. The request id inside ``call`` stays the same on every attempt."""
    while True:
        try:
            return await call()
        except (TransactionError, RequestExpiredError) as exc:
            raise _RefusedError(str(exc)) from exc
        except ClientClosedError:
            return None
        except RaftlogError:
            if stop.is_set():
                return None


async def transactor(
    name: str,
    urls: Sequence[str],
    ident: str,
    stop: asyncio.Event,
    txs: list[Tx],
    lock: threading.Lock,
    op_timeout: float,
) -> None:
    async with RaftClient(urls, ident, timeout=op_timeout) as client, TopicClient(client) as topics:
        while not stop.is_set():
            tx = Tx(name, new_txid())
            with lock:
                txs.append(tx)
            try:
                await _run_one(tx, client, topics, stop)
            except _RefusedError:
                tx.outcome, tx.complete_t = "fail", time.monotonic()


async def _run_one(tx: Tx, client: RaftClient, topics: TopicClient, stop: asyncio.Event) -> None:
    rid = client.new_request_id()
    began = await _step(
        lambda: topics.begin_transaction(
            txid=tx.txid, timeout=TX_TIMEOUT_S, exist_ok=True, request_id=rid
        ),
        stop,
    )
    if began is None:
        return
    for k in range(RECORDS_PER_TX):
        rid = client.new_request_id()
        value = f"{tx.txid}:{k}".encode()
        stored = await _step(lambda v=value, r=rid: began.publish(TX_TOPIC, v, request_id=r), stop)
        if stored is None:
            return
    rid = client.new_request_id()
    index = await _step(lambda: began.commit(request_id=rid), stop)
    if index is not None:
        tx.outcome, tx.commit_index, tx.complete_t = "ok", index, time.monotonic()


def check_transactions(
    txs: Sequence[Tx],
    log: Mapping[int, LogEntry],
    compacted: int,
    reads: Sequence[TopicRead],
    report: Report,
) -> dict[str, int]:
    """Add violations to ``report`` (module docstring); returns counts for the run's table."""
    committed = 0
    for tx in txs:
        if tx.outcome != "ok" or tx.commit_index is None:
            continue
        committed += 1
        if tx.commit_index <= compacted and tx.commit_index not in log:
            continue
        entry = log.get(tx.commit_index)
        decoded = decode_any_entry(entry.data) if entry is not None else None
        if not (isinstance(decoded, TxControl) and decoded.op == "commit"):
            report.add("lost", f"transaction {tx.txid} committed at {tx.commit_index}: not there")
        elif decoded.txid != tx.txid:
            report.add("lost", f"{tx.commit_index} commits {decoded.txid}, not {tx.txid}")
    known = {tx.txid: tx for tx in txs}
    for read in reads:
        by_commit: dict[int, set[bytes]] = defaultdict(set)
        for row in read.rows:
            by_commit[row.index].add(row.value)
        for index, values in by_commit.items():
            txids = {v.split(b":", 1)[0].decode() for v in values}
            expected = {f"{t}:{k}".encode() for t in txids for k in range(RECORDS_PER_TX)}
            if len(txids) != 1 or values != expected:
                report.add(
                    "topic",
                    f"peer {read.peer}: transaction committed at {index} half-visible: "
                    f"{sorted(values)}",
                )
            for txid in txids:
                tx = known.get(txid)
                if tx is not None and tx.outcome == "fail":
                    report.add("topic", f"peer {read.peer}: refused transaction {txid} visible")
    return {"tx_committed": committed, "tx_total": len(txs)}
