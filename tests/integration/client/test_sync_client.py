"""SyncRaftClient: the blocking facade, used the way a script or a Spark task would."""

from __future__ import annotations

import threading

import pytest

from integration.cluster import PeerCluster
from raftlog.client import IndexedEntry, SyncRaftClient
from raftlog.errors import ClientClosedError, ClusterUnavailableError

pytestmark = pytest.mark.timeout(120)


def test_sync_client_updates_and_reads(shared_cluster: PeerCluster) -> None:
    with SyncRaftClient(shared_cluster.urls, shared_cluster.ident) as client:
        info = client.request_config()
        assert info.is_leader and len(info.peers) == 3
        indexes = [client.request_update(b"sync %d" % n) for n in range(20)]
        assert indexes == sorted(indexes) and len(set(indexes)) == 20
        rid = client.new_request_id()
        assert client.request_update(b"sync once", rid) == client.request_update(b"x", rid)
        entries = [e for e in client.request_entries(indexes[0] - 1, 20)]
        assert [e.index for e in entries] == indexes
        assert all(isinstance(e, IndexedEntry) for e in entries)
        assert client.request_log_info().last_applied >= indexes[-1]
        assert client.request_broadcast_url().startswith("tcp://127.0.0.1:")
        # Leaving an iterator early stops the stream and leaves the client usable.
        for item in client.request_entries(0):
            assert isinstance(item, IndexedEntry)
            break
        assert client.request_update(b"after break") > indexes[-1]
    assert client.closed
    with pytest.raises(ClientClosedError):
        client.request_update(b"closed")


def test_sync_client_is_usable_from_several_threads(shared_cluster: PeerCluster) -> None:
    results: list[int] = []
    errors: list[BaseException] = []
    with SyncRaftClient(shared_cluster.urls, shared_cluster.ident) as client:

        def work(n: int) -> None:
            try:
                results.extend(client.request_update(b"thread %d/%d" % (n, k)) for k in range(10))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors and len(set(results)) == 40


def test_sync_client_times_out_on_a_dead_address() -> None:
    with (
        SyncRaftClient(["tcp://127.0.0.1:9"], "nobody", response_timeout=0.2) as client,
        pytest.raises(ClusterUnavailableError, match=r"tcp://127\.0\.0\.1:9"),
    ):
        client.request_config(timeout=0.8)
