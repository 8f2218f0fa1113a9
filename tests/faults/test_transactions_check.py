"""The transaction check can fail: a half-visible transaction, a refused one made visible and
an acknowledged commit missing from the log are each flagged; a clean history is valid."""

from __future__ import annotations

from faults.history import Report, TopicRead, TopicRow
from faults.transactions import TX_TOPIC, Tx, check_transactions
from raftlog.entry import EntryType, LogEntry
from raftlog.topics.records_tx import TxControl, encode_tx_control


def commit_entry(txid: str) -> LogEntry:
    return LogEntry(bytes(12), EntryType.STATE, 1, encode_tx_control(TxControl("commit", txid)))


def rows(index: int, txid: str, ks: range | list[int]) -> list[TopicRow]:
    return [TopicRow(index, k, f"{txid}:{k}".encode()) for k in ks]


def run(txs: list[Tx], log: dict[int, LogEntry], served: list[TopicRow]) -> Report:
    report = Report()
    check_transactions(txs, log, 0, [TopicRead("1", TX_TOPIC, 10, served)], report)
    return report


def test_clean_history_is_valid() -> None:
    txs = [Tx("t0", "a", "ok", 5), Tx("t0", "b", "fail")]
    assert run(txs, {5: commit_entry("a")}, rows(5, "a", range(3))).valid


def test_half_visible_transaction_is_flagged() -> None:
    report = run([Tx("t0", "a", "ok", 5)], {5: commit_entry("a")}, rows(5, "a", [0, 2]))
    assert report.count("topic") == 1


def test_refused_transaction_visible_is_flagged() -> None:
    report = run([Tx("t0", "b", "fail")], {}, rows(7, "b", range(3)))
    assert report.count("topic") == 1


def test_acknowledged_commit_missing_is_lost() -> None:
    report = run([Tx("t0", "a", "ok", 5)], {5: commit_entry("other")}, [])
    assert report.count("lost") == 1
    assert run([Tx("t0", "a", "ok", 6)], {}, []).count("lost") == 1
