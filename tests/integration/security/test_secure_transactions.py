"""Transactions on a CURVE cluster (issue #18): the roles and topic ACLs of plain publishes
apply to every transactional store; a reader may neither write nor, since issue #25, read
the status of a transaction it does not own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster
from integration.secure_setup import ClientSpec, SecureSetup
from raftlog.client import RaftClient
from raftlog.errors import AccessDeniedError, TransactionNotOwnedError
from raftlog.topics import make_record
from raftlog.topics.client import TopicClient

pytestmark = pytest.mark.timeout(120)

CLIENTS = [
    ClientSpec("admin", "admin"),
    ClientSpec("reader", "reader"),
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


async def test_transactional_stores_obey_roles_and_topic_acls(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with RaftClient(cluster.urls, cluster.ident, curve=secure.admin) as admin, TopicClient(
        admin
    ) as topics:
        for name in ("billing.eu", "hr"):
            await topics.create_topic(name)
    async with RaftClient(
        cluster.urls, cluster.ident, curve=secure.client("billing")
    ) as client, TopicClient(client) as billing:
        tx = await billing.begin_transaction(timeout=60)
        await tx.publish("billing.eu", b"invoice-1")
        with pytest.raises(AccessDeniedError, match="may not publish to topic 'hr'"):
            await tx.store(None, [make_record("billing.eu", b"x"), make_record("hr", b"x")])
        commit = await tx.commit()
        page = await billing.read("billing.eu", from_index=commit)
        assert [r.record.value for r in page.records] == [b"invoice-1"]
    async with RaftClient(
        cluster.urls, cluster.ident, curve=secure.client("reader")
    ) as client, TopicClient(client) as reader:
        with pytest.raises(AccessDeniedError, match="needs role writer"):
            await reader.begin_transaction()
        with pytest.raises(AccessDeniedError, match="needs role writer"):
            await reader.resume_transaction(tx.id).rollback()
        with pytest.raises(TransactionNotOwnedError):
            await reader.transaction_status(tx.id)
