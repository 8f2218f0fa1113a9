"""request_entries (§10.5) against real peers: whole log, count, early stop, snapshots."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, probe, wait_for
from raftlog.client import IndexedEntry, RaftClient, SnapshotChunk
from raftlog.entry import EntryType
from raftlog.rpc.messages import EntriesStatus, RequestEntries, RequestEntriesResponse

from .conftest import client_for, read_log, started_cluster, stop_cluster

pytestmark = pytest.mark.timeout(120)

ENTRY_COUNT = 600
PAYLOAD = 900  # ~70 entries per 64 KiB batch: the stream spans several pipelined batches


def payload(n: int) -> bytes:
    return (b"entry %06d " % n).ljust(PAYLOAD, b".")


@pytest.fixture(scope="module")
def written(shared_cluster: PeerCluster) -> dict[int, bytes]:
    """Index -> data of the STATE entries written to the module's cluster."""

    async def write() -> dict[int, bytes]:
        async with client_for(shared_cluster) as client:
            out: dict[int, bytes] = {}
            for start in range(0, ENTRY_COUNT, 100):
                datas = [payload(n) for n in range(start, start + 100)]
                indexes = await asyncio.gather(*(client.request_update(d) for d in datas))
                out.update(zip(indexes, datas, strict=True))
            return out

    return asyncio.run(write())


async def test_whole_log_matches_what_was_written(
    shared_cluster: PeerCluster, written: dict[int, bytes]
) -> None:
    async with client_for(shared_cluster) as client:
        log = await read_log(client)
    assert log[0].index == 1
    state = {e.index: e.entry.data for e in log if e.entry.entry_type == EntryType.STATE}
    assert state == written
    # Control entries (a new leader's CHECKPOINT) are the only others.
    others = [e for e in log if e.entry.entry_type != EntryType.STATE]
    assert all(e.entry.entry_type == EntryType.CHECKPOINT for e in others)
    # Ordered as written: each concurrent group of 100 follows the previous one.
    order = [int(data[6:12]) for _, data in sorted(state.items())]
    assert [n // 100 for n in order] == sorted(n // 100 for n in order)


async def test_count_and_prev_index_bound_the_stream(
    shared_cluster: PeerCluster, written: dict[int, bytes]
) -> None:
    first = min(written)
    async with client_for(shared_cluster) as client:
        got = [item async for item in client.request_entries(first + 9, 250)]
        assert [e.index for e in got if isinstance(e, IndexedEntry)] == list(
            range(first + 10, first + 260)
        )
        assert all(e.entry.data == written[e.index] for e in got if isinstance(e, IndexedEntry))
        info = await client.request_log_info()
        tail = [item async for item in client.request_entries(info.last_applied)]
        assert tail == []


async def test_early_break_stops_the_stream_and_the_client_stays_usable(
    shared_cluster: PeerCluster, written: dict[int, bytes]
) -> None:
    async with client_for(shared_cluster) as client:
        seen: list[int] = []
        async for item in client.request_entries(0):
            assert isinstance(item, IndexedEntry)
            seen.append(item.index)
            if len(seen) == 5:
                break
        assert seen == [1, 2, 3, 4, 5]
        link = client._link
        # The dropped stream is finalized by asyncio: stop sent, its socket closed.
        for _ in range(200):
            if not link._stream_channels:
                break
            await asyncio.sleep(0.01)
        assert not link._stream_channels
        # Explicit aclose() in the middle of a multi-batch stream.
        stream = client.request_entries(0)
        async with stream:
            async for item in stream:
                if isinstance(item, IndexedEntry) and item.index == 150:
                    break
        assert stream.last_index == 150 and not link._stream_channels
        assert len(await read_log(client)) >= len(written)


async def test_slow_consumer_gets_everything_in_order(
    shared_cluster: PeerCluster, written: dict[int, bytes]
) -> None:
    async with client_for(shared_cluster) as client:
        last = 0
        async for item in client.request_entries(0, 400):
            assert isinstance(item, IndexedEntry) and item.index == last + 1
            last = item.index
            if item.index % 70 == 0:
                await asyncio.sleep(0.3)  # the server must wait for the acknowledgement
        assert last == 400


async def test_compacted_log_streams_snapshot_then_entries(tmp_path: Path) -> None:
    raft = {"log_compaction_threshold": 50, "request_id_ttl": None, "request_id_cache_max": 20}
    cluster = started_cluster(tmp_path, raft)
    try:
        async with RaftClient(cluster.urls, cluster.ident) as client:
            last = max([await client.request_update(b"s%d" % n) for n in range(150)])

            async def first_index() -> int:
                return (await client.request_log_info()).first_index

            for _ in range(200):
                if await first_index() > 1:
                    break
                await asyncio.sleep(0.05)
            snapshot_index = await first_index() - 1
            assert snapshot_index > 0
            items = [item async for item in client.request_entries(0)]
            chunks = [i for i in items if isinstance(i, SnapshotChunk)]
            entries = [i for i in items if isinstance(i, IndexedEntry)]
            assert chunks and chunks[0].offset == 0 and chunks[0].index >= snapshot_index
            assert sum(len(c.data) for c in chunks) == chunks[0].total_size
            assert [e.index for e in entries] == list(range(chunks[0].index + 1, last + 1))
            # With a count, the whole snapshot counts as one item.
            counted = [item async for item in client.request_entries(0, 3)]
            assert isinstance(counted[0], SnapshotChunk) and len(counted) == len(chunks) + 2
    finally:
        stop_cluster(cluster)


async def test_a_follower_serves_committed_entries_to_any_peer_streams(
    shared_cluster: PeerCluster, written: dict[int, bytes]
) -> None:
    """raftlog's any_peer extension (§10.5): a follower streams committed entries when asked
    with the flag, and still answers "not leader" without it (what a reference client
    sends); the client reads the same log from a follower as from the leader, and falls
    back to the leader when the peer it prefers is down."""
    leader_id = shared_cluster.wait_stable_leader()
    follower = next(p for p in shared_cluster.peers.values() if p.id != leader_id)
    last = max(written)

    def applied() -> bool:
        info = shared_cluster.log_info(follower.id)
        return info is not None and info.last_applied >= last

    wait_for("the follower to apply every entry", applied, 20)
    ident = shared_cluster.ident
    plain = probe(follower.url, ident, RequestEntries(0, 5))
    assert [r.status for r in plain if isinstance(r, RequestEntriesResponse)] == [
        EntriesStatus.NOT_LEADER
    ]
    flagged = probe(follower.url, ident, RequestEntries(0, 5, 0, True))
    assert isinstance(flagged[0], RequestEntriesResponse)
    assert (flagged[0].status, flagged[0].last_index) == (EntriesStatus.LAST, 5)
    assert len(flagged[0].entries) == 5

    async def read(client: RaftClient, peer: str) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        async for item in client.request_entries(0, last, timeout=20.0, from_peer=peer):
            assert isinstance(item, IndexedEntry)
            if item.entry.entry_type == EntryType.STATE:
                out[item.index] = item.entry.data
        return out

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"tcp://127.0.0.1:{free.getsockname()[1]}"
    async with client_for(shared_cluster) as client:
        assert await read(client, follower.url) == written
        assert await read(client, dead) == written  # nobody there: the leader serves
