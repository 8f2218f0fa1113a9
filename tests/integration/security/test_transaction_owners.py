"""Issue #25, findings 3 and 8 on a CURVE cluster of real peers: a transaction belongs to the
key that began it -- another writer can neither store into, commit nor roll it back, a
reader cannot read its status, and that still holds after the leader changes -- and a
topic listing shows a key only the topics it may read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster
from integration.secure_setup import ClientSpec, SecureSetup
from raftlog.client import RaftClient
from raftlog.errors import TransactionNotOwnedError
from raftlog.topics.client import TopicClient

pytestmark = pytest.mark.timeout(120)

CLIENTS = [
    ClientSpec("admin", "admin"),
    ClientSpec("reader", "reader"),
    ClientSpec("writer", "writer"),
    ClientSpec("billing", "writer", publish=["billing.*"], read=["billing.*"]),
]


@pytest.fixture
def secure(tmp_path: Path) -> SecureSetup:
    return SecureSetup(tmp_path, clients=list(CLIENTS))


@pytest.fixture
def cluster(tmp_path: Path, secure: SecureSetup) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path, security=secure) as c:
        c.start()
        c.wait_stable_leader()
        yield c


async def test_only_the_owner_or_an_admin_uses_a_transaction_across_leaders(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    def as_(name: str) -> RaftClient:
        return RaftClient(cluster.urls, cluster.ident, curve=secure.client(name), timeout=30)

    async with as_("admin") as a, TopicClient(a) as admin, as_("billing") as b, TopicClient(
        b
    ) as billing, as_("writer") as w, TopicClient(w) as writer, as_("reader") as r, TopicClient(
        r
    ) as reader:
        for name in ("orders", "billing.eu"):
            await admin.create_topic(name)
        theirs = await admin.begin_transaction(timeout=120)
        await theirs.publish("orders", b"admin's")
        stolen = billing.resume_transaction(theirs.id)
        with pytest.raises(TransactionNotOwnedError):
            await stolen.commit()
        with pytest.raises(TransactionNotOwnedError):
            await stolen.rollback()
        with pytest.raises(TransactionNotOwnedError):
            await writer.resume_transaction(theirs.id).publish("orders", b"forged")
        with pytest.raises(TransactionNotOwnedError):
            await reader.transaction_status(theirs.id)
        assert (await billing.list_topics()) == ("billing.eu",)  # finding 8
        assert set(await writer.list_topics()) == {"orders", "billing.eu"}
        info = await admin.transaction_status(theirs.id)
        assert (info.state, info.records, info.owner) == ("open", 1, "admin")

        mine = await billing.begin_transaction(timeout=120)
        await mine.publish("billing.eu", b"invoice")
        assert (await mine.status()).owner == "billing"
        with pytest.raises(TransactionNotOwnedError):
            await writer.resume_transaction(mine.id).rollback()

        # the owner lives in the replicated state: a new leader decides the same way
        old = cluster.wait_leader()
        cluster.kill(old)
        cluster.wait_leader(exclude=old)
        with pytest.raises(TransactionNotOwnedError):
            await stolen.commit()
        commit = await theirs.commit()  # the owner still can; an admin may use any
        await admin.resume_transaction(mine.id).commit()
        page = await admin.read("orders", from_index=commit)
        assert [rec.record.value for rec in page.records] == [b"admin's"]
        assert (await billing.transaction_status(mine.id)).state == "committed"
