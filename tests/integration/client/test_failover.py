"""Leader crash (SIGKILL) while updates stream in: every acknowledged update is in the log
exactly once, at the index it was acknowledged with, and nothing appears twice."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from integration.cluster import PeerCluster
from raftlog.client import RaftClient
from raftlog.entry import EntryType

from .conftest import client_for, read_log

pytestmark = pytest.mark.timeout(180)

WRITERS = 4


async def test_leader_kill_during_updates_loses_and_duplicates_nothing(
    cluster: PeerCluster,
) -> None:
    acked: dict[bytes, int] = {}
    failed: list[BaseException] = []
    stop = asyncio.Event()

    async def writer(client: RaftClient, w: int) -> None:
        n = 0
        while not stop.is_set():
            data = b"w%d-%d" % (w, n)
            n += 1
            try:
                acked[data] = await client.request_update(data, timeout=20.0)
            except Exception as exc:
                failed.append(exc)

    async def wait_acked(count: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while len(acked) < count:
                await asyncio.sleep(0.01)

    async with client_for(cluster) as client:
        tasks = [asyncio.create_task(writer(client, w)) for w in range(WRITERS)]
        await wait_acked(100, 30)
        for _ in range(2):  # two crashes: the second hits the leader elected after the first
            victim = cluster.wait_stable_leader()
            before = len(acked)
            cluster.kill(victim)  # SIGKILL: whatever was in flight is lost on that peer
            await wait_acked(before + 150, 60)
            assert client.leader is None or client.leader.id != victim
            cluster.start(victim)  # it rejoins as a follower and gets its log repaired
            await wait_acked(before + 250, 60)
            cluster.wait_stable_leader()
        stop.set()
        await asyncio.gather(*tasks)
        assert not failed, failed[:3]

        log = await read_log(client)
        state = [e for e in log if e.entry.entry_type == EntryType.STATE]
        counts = Counter(e.entry.data for e in state)
        assert [d for d, c in counts.items() if c > 1] == []  # no update appears twice
        where = {e.entry.data: e.index for e in state}
        assert {d: where.get(d) for d in acked} == acked  # every ack is in the log, there
