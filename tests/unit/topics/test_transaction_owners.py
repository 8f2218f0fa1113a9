"""Issue #25, finding 3: a transaction belongs to the principal that began it. The owner is
replicated state (index, restart, snapshot); only the owner or an admin may store into,
commit, roll back or read it; the request guard writes the actor so a client cannot forge
one; and a topic listing shows a key only the topics it may read (finding 8)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from test_topic_machine import ids, read
from test_topic_transactions import TxLog

from raftlog.errors import TopicError, TransactionError
from raftlog.metrics import PeerMetrics
from raftlog.security.guard import RequestGuard
from raftlog.security.policy import AccessPolicy, PolicyHolder, Principal, Role, TopicFilter
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import wire as topic_rpc
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record
from raftlog.topics.records_tx import (
    Actor,
    TxControl,
    TxStore,
    decode_any_entry,
    encode_tx_control,
    encode_tx_store,
    with_actor,
)
from raftlog.topics.stamp import stamp_append_time

ALICE = Actor("alice")
BOB = Actor("bob")
ROOT = Actor("root", admin=True)


class OwnedLog(TxLog):
    """Transaction entries carrying an actor, as the request guard leaves them."""

    def control(self, op: str, txid: str, actor: Actor | None, timeout: int | None = None) -> int:
        data = encode_tx_control(TxControl(op, txid, timeout, actor=actor))  # type: ignore[arg-type]
        return self.add(stamp_append_time(data, self.now))

    def stash(self, txid: str, actor: Actor | None, *records: Record) -> int:
        return self.add(stamp_append_time(encode_tx_store(txid, list(records), actor), self.now))


@pytest.fixture
def log() -> OwnedLog:
    return OwnedLog()


def _refusal(machine: TopicStateMachine, index: int) -> str | None:
    error = machine.refusal_at(index)
    return None if error is None else error.name


def test_only_the_owner_or_an_admin_may_use_a_transaction(
    log: OwnedLog, machine: TopicStateMachine
) -> None:
    log.create("orders")
    log.control("begin", "t", ALICE, 10_000)
    mine = log.stash("t", ALICE, Record("orders", b"a"))
    theirs = log.stash("t", BOB, Record("orders", b"forged"))
    their_commit = log.control("commit", "t", BOB)
    their_rollback = log.control("rollback", "t", BOB)
    log.apply(machine)
    assert _refusal(machine, mine) is None
    assert [_refusal(machine, i) for i in (theirs, their_commit, their_rollback)] == [
        "TransactionNotOwned"
    ] * 3
    info = machine.transaction("t")
    assert (info.state, info.records, info.owner) == ("open", 1, "alice")
    admin_store = log.stash("t", ROOT, Record("orders", b"b"))  # an admin may
    commit = log.control("commit", "t", ALICE)
    log.apply(machine)
    assert _refusal(machine, admin_store) is None
    assert ids(read(machine, "orders")) == [(commit, 0), (commit, 1)]
    # an admin may also roll back another's transaction
    log.control("begin", "u", BOB, 10_000)
    gone = log.control("rollback", "u", ROOT)
    log.apply(machine)
    assert _refusal(machine, gone) is None and machine.transaction("u").state == "aborted"
    assert machine.transaction("u").owner == "bob"


def test_without_actors_there_is_no_owner(log: OwnedLog, machine: TopicStateMachine) -> None:
    """Plaintext clusters (no principals) and members: nothing is checked."""
    log.create("orders")
    log.control("begin", "t", None, 10_000)
    log.stash("t", BOB, Record("orders", b"a"))
    commit = log.control("commit", "t", None)
    log.apply(machine)
    assert machine.transaction("t").owner is None
    assert ids(read(machine, "orders")) == [(commit, 0)]


def test_the_owner_survives_a_restart_and_a_snapshot(log: OwnedLog, tmp_path: Path) -> None:
    log.create("orders")
    log.control("begin", "t", ALICE, 60_000)
    cut = log.stash("t", ALICE, Record("orders", b"a"))
    first = TopicStateMachine(tmp_path / "m", log.store)
    log.apply(first)
    data = CompositeStateMachine([first]).snapshot(cut)
    first.close()
    again = TopicStateMachine(tmp_path / "m", log.store)  # restart: from the index
    try:
        assert again.transaction("t").owner == "alice"
    finally:
        again.close()
    snapshots = MemorySnapshotStore()
    snapshots.install(cut, 1, data)
    log.store.compact(cut, 1)
    newcomer = TopicStateMachine(tmp_path / "new", log.store)  # from the snapshot
    try:
        newcomer.catch_up(snapshots, log.store.last_index)
        assert newcomer.transaction("t").owner == "alice"
        forged = log.control("commit", "t", BOB)
        log.apply(newcomer)
        assert _refusal(newcomer, forged) == "TransactionNotOwned"
    finally:
        newcomer.close()


def test_status_is_for_the_owner_an_admin_or_a_member(
    log: OwnedLog, machine: TopicStateMachine
) -> None:
    log.control("begin", "t", ALICE, 10_000)
    log.apply(machine)

    def ask(actor: Actor | None) -> tx_rpc.TransactionInfo:
        frames = machine.handle_request(
            tx_rpc.TYPE_TX_STATUS, tx_rpc.encode_status_request("t", actor)
        )
        assert frames is not None
        return tx_rpc.decode_status_response(frames)

    assert ask(ALICE).owner == "alice"
    assert ask(ROOT).state == ask(None).state == "open"
    with pytest.raises(TransactionError) as caught:
        ask(BOB)
    assert caught.value.name == "TransactionNotOwned"


def guard_for(*clients: tuple[bytes, Principal]) -> RequestGuard:
    policy = AccessPolicy.build(
        {"1": b"P" * 40}, [c[1] for c in clients], [c[0] for c in clients]
    )
    return RequestGuard(PolicyHolder(policy), PeerMetrics().access_refused, owner="1")


def test_the_guard_writes_the_actor_a_client_cannot_forge() -> None:
    billing = Principal("billing", role=Role.WRITER, publish=TopicFilter.parse(["billing.*"], "p"))
    guard = guard_for((b"B" * 40, billing))
    forged = encode_tx_control(TxControl("commit", "t", actor=ROOT))
    frames = [b"r", b"id", topic_rpc.TYPE_PUBLISH, b"ident", forged]
    assert guard.refusal(frames, "B" * 40) is None
    entry = decode_any_entry(frames[4])
    assert isinstance(entry, TxControl) and entry.actor == Actor("billing", False)
    store = encode_tx_store("t", [Record("billing.eu", b"v")])
    frames = [b"r", b"id", topic_rpc.TYPE_PUBLISH, b"ident", store]
    assert guard.refusal(frames, "B" * 40) is None
    stored = decode_any_entry(frames[4])
    assert isinstance(stored, TxStore) and stored.actor == Actor("billing", False)
    assert stored.records == (Record("billing.eu", b"v"),)
    # a forged actor on a store is replaced too, and a member's actor is kept (REST gateway)
    again = with_actor(store, ROOT)
    frames = [b"r", b"id", topic_rpc.TYPE_PUBLISH, b"ident", again]
    assert guard.refusal(frames, "B" * 40) is None
    assert decode_any_entry(frames[4]).actor == Actor("billing", False)  # type: ignore[union-attr]
    frames = [b"r", b"id", topic_rpc.TYPE_PUBLISH, b"1", again]
    assert guard.refusal(frames, "P" * 40) is None
    assert decode_any_entry(frames[4]).actor == ROOT  # type: ignore[union-attr]
    # trailing bytes posing as an actor stay malformed
    sneaky = store + msgpack.packb(["root", True])
    frames = [b"r", b"id", topic_rpc.TYPE_PUBLISH, b"ident", sneaky]
    assert guard.refusal(frames, "B" * 40) is None
    with pytest.raises(TopicError):  # the gate refuses it
        decode_any_entry(frames[4])


def test_the_guard_names_the_asker_of_a_status_and_filters_a_listing(
    log: OwnedLog, machine: TopicStateMachine
) -> None:
    reader = Principal("auditor", role=Role.READER, read=TopicFilter.parse(["pay.*", "hr"], "r"))
    guard = guard_for((b"R" * 40, reader))
    status = [b"r", b"id", tx_rpc.TYPE_TX_STATUS, b"ident", b"t", b"forged"]
    assert guard.refusal(status, "R" * 40) is None
    assert tx_rpc.decode_status_request(status[4:]) == ("t", Actor("auditor", False))
    for name in ("pay.eu", "hr", "hrx", "orders"):
        log.create(name)
    log.apply(machine)
    listing = [b"r", b"id", topic_rpc.TYPE_LIST, b"ident"]
    assert guard.refusal(listing, "R" * 40) is None
    frames = machine.handle_request(topic_rpc.TYPE_LIST, listing[4:])
    assert frames is not None
    assert topic_rpc.decode_list_response(frames) == ("hr", "pay.eu")
    everything = machine.handle_request(topic_rpc.TYPE_LIST, [])
    assert everything is not None
    assert len(topic_rpc.decode_list_response(everything)) == 4
