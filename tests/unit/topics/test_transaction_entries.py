"""Transaction entries (raftlog.topics.records_tx), the leader's gate for them, their topic ACLs,
and their error answers: format round trips, refusals with clear codes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from raftlog.entry import LogEntry
from raftlog.errors import (
    TransactionExpiredError,
    TransactionLimitError,
    UnknownTransactionError,
)
from raftlog.security.guard import topic_refusal
from raftlog.security.policy import Principal, Role, TopicFilter
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.gate import TopicGate
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    FLAG_AUTO_CREATE,
    HEADER_SIZE,
    Record,
    RecordFormatError,
    TopicCommand,
    encode_command,
)
from raftlog.topics.records_tx import (
    MAX_TX_TIMEOUT_MS,
    TxControl,
    TxStore,
    decode_any_entry,
    encode_tx_control,
    encode_tx_store,
)
from raftlog.topics.stamp import stamp_append_time
from raftlog.topics.wire import TYPE_PUBLISH
from raftlog.topics.wire_errors import encode_error, error_from


def test_control_and_store_entries_round_trip() -> None:
    begin = encode_tx_control(TxControl("begin", "tx-1", 5_000))
    assert decode_any_entry(begin) == TxControl("begin", "tx-1", 5_000)
    assert decode_any_entry(encode_tx_control(TxControl("commit", "a.b:c"))) == TxControl(
        "commit", "a.b:c"
    )
    records = [Record("t", b"v", b"k", {"h": b"x"}, 7), Record("u", b"w", ttl_ms=9)]
    store = stamp_append_time(encode_tx_store("tx-1", records), 1234, auto_create=True)
    decoded = decode_any_entry(store)
    assert isinstance(decoded, TxStore)
    assert decoded.records == tuple(records) and decoded.txid == "tx-1"
    assert decoded.append_time_ms == 1234 and decoded.auto_create
    assert store[6] == FLAG_AUTO_CREATE
    # a control entry is never flagged, and the plain decoder refuses both kinds clearly
    assert stamp_append_time(begin, 1, auto_create=True)[6] == 0
    with pytest.raises(RecordFormatError, match="unknown topic entry kind 5"):
        decode_entry(store)


@pytest.mark.parametrize(
    ("body", "kind", "message"),
    [
        (["begin", "t", None], 4, "timeout"),
        (["begin", "t", MAX_TX_TIMEOUT_MS + 1], 4, "timeout"),
        (["commit", "t", 5], 4, "takes no timeout"),
        (["publish", "t", None], 4, "unknown transaction operation"),
        (["commit", "bad id", None], 4, "invalid transaction id"),
        (["commit", "x" * 129, None], 4, "invalid transaction id"),
        (["commit", "t"], 4, "3- or 4-element"),
        (["commit", "t", None, ["alice"]], 4, "actor"),
        (["commit", "t", None, ["", False]], 4, "actor"),
        (["commit", "t", None, ["alice", 1]], 4, "actor"),
        (["t"], 5, r"\[txid, records"),
        (["t", [["t", None, b"v", {}, 0]], "alice"], 5, "actor"),
        (["t", []], 5, "non-empty"),
        (["t", [["t", None, "not bytes", {}, 0]]], 5, "record 0"),
    ],
)
def test_malformed_transaction_entries_are_refused_with_a_reason(
    body: list[object], kind: int, message: str
) -> None:
    data = b"\xc1RLT\x01" + bytes([kind, 0]) + bytes(8) + msgpack.packb(body)
    assert len(data) > HEADER_SIZE
    with pytest.raises(RecordFormatError, match=message):
        decode_any_entry(data)


def test_encoders_refuse_what_decoders_would() -> None:
    with pytest.raises(RecordFormatError):
        encode_tx_control(TxControl("begin", "t"))
    with pytest.raises(RecordFormatError):
        encode_tx_store("t", [])
    with pytest.raises(RecordFormatError):
        encode_tx_control(TxControl("rollback", "", None))


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[TopicStateMachine]:
    store = MemoryLogStore()
    m = TopicStateMachine(tmp_path / "t", store)
    entries = [
        encode_command(TopicCommand("create", "t", {})),
        stamp_append_time(encode_tx_control(TxControl("begin", "open", 1_000)), 5_000),
    ]
    for n, data in enumerate(entries, start=1):
        store.append(n, [LogEntry(bytes([n]) * 12, 0, 1, data)])
    m.apply(1, store.raw_entries(1, 3), 1)
    yield m
    m.close()


def test_the_gate_checks_transactions_with_the_stamp_it_would_give(
    machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [5_500]
    gate = TopicGate(machine, auto_create=True, max_data=10_000, max_records=1000,
                     now_ms=lambda: now[0])
    store = encode_tx_store("open", [Record("new-topic", b"v")])
    stamped = gate.prepare(store)
    assert isinstance(stamped, bytes) and stamped[6] == FLAG_AUTO_CREATE
    assert isinstance(gate.prepare(encode_tx_store("nobody", [Record("t", b"v")])),
                      UnknownTransactionError)
    now[0] = 6_000  # the deadline (begin at 5000 + 1000 ms): refused before proposing
    assert isinstance(gate.prepare(encode_tx_control(TxControl("commit", "open"))),
                      TransactionExpiredError)
    monkeypatch.setattr("raftlog.topics.tx.MAX_OPEN_TRANSACTIONS", 1)
    assert isinstance(gate.prepare(encode_tx_control(TxControl("begin", "other", 10))),
                      TransactionLimitError)


def test_transactional_stores_obey_the_topic_acls() -> None:
    limited = Principal(
        name="app",
        role=Role.WRITER,
        publish=TopicFilter.parse(["orders", "pay.*"], "publish"),
        read=TopicFilter.parse(None, "read"),
    )
    ok = encode_tx_store("t", [Record("orders", b"1"), Record("pay.eu", b"2")])
    bad = encode_tx_store("t", [Record("orders", b"1"), Record("audit", b"2")])
    assert topic_refusal(limited, TYPE_PUBLISH, [ok]) is None
    assert "may not publish to topic 'audit'" in (topic_refusal(limited, TYPE_PUBLISH, [bad]) or "")
    for op in ("commit", "rollback"):
        control = encode_tx_control(TxControl(op, "t"))  # type: ignore[arg-type]
        assert topic_refusal(limited, TYPE_PUBLISH, [control]) is None
    reader = Principal(name="r", role=Role.READER)
    assert reader.refusal(TYPE_PUBLISH) is not None  # the role check comes first


def test_transaction_errors_cross_the_wire_typed_with_their_id() -> None:
    error = TransactionExpiredError("TransactionExpired", "transaction 'x' timed out", "x")
    frames = encode_error(error)
    decoded = error_from(msgpack.unpackb(frames[1]), 1)
    assert isinstance(decoded, TransactionExpiredError)
    assert (decoded.name, decoded.txid, decoded.message) == ("TransactionExpired", "x",
                                                             error.message)
