"""config_update through RaftClient: add a peer by joint consensus, then remove it again."""

from __future__ import annotations

import asyncio

import pytest

from integration.cluster import PeerCluster, wait_for
from raftlog.client import Peer
from raftlog.entry import EntryType
from raftlog.errors import ConfigUpdateError

from .conftest import client_for, read_log

pytestmark = pytest.mark.timeout(180)


async def test_config_update_adds_and_removes_a_peer(cluster: PeerCluster) -> None:
    async with client_for(cluster, timeout=30.0) as client:
        last = max(await asyncio.gather(*(client.request_update(b"c%d" % n) for n in range(20))))
        outsider = cluster.add_outsider("4")
        cluster.start("4")  # CLIENT state: downloads the log, then waits to be added
        wait_for(
            "peer 4 to catch up",
            lambda: (i := cluster.log_info("4")) is not None and i.last_applied >= last,
            30,
        )
        before = (await client.request_config()).peers
        added = [*before, Peer("4", outsider.url)]
        joint = await client.config_update(added)
        assert joint > last
        log = {e.index: e.entry for e in await read_log(client)}
        assert log[joint].entry_type == EntryType.CONFIG
        for _ in range(300):  # C(new) is appended when the joint entry commits
            if (await client.request_config()).peers == tuple(added):
                break
            await asyncio.sleep(0.05)
        assert (await client.request_config()).peers == tuple(added)
        assert outsider.url in client.peer_urls  # the client follows the configuration

        # Retrying the same request id is answered with the same index, not a new change.
        # The leader answers "busy" until C(new) is committed (it is visible once appended).
        rid = client.new_request_id()
        for _ in range(200):
            try:
                removed = await client.config_update(before, request_id=rid)
                break
            except ConfigUpdateError as busy:
                assert busy.status == 3, busy
                await asyncio.sleep(0.05)
        assert await client.config_update(before, request_id=rid) == removed
        assert removed > joint
        index = await client.request_update(b"after membership changes")
        assert index > removed
