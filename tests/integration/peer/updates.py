"""A deliberately small blocking updater for peer tests (independent of raftlog.client).

It follows the protocol's client rules closely enough to test the server: the same request id
on every retry, "accepted" restarts the wait, "not leader" moves to the named leader.
"""

from __future__ import annotations

import time

from integration.cluster import PeerCluster, probe
from raftlog.ids import RequestIdGenerator
from raftlog.rpc.messages import RequestUpdate, RequestUpdateResponse, UpdateStatus

_ids = RequestIdGenerator()


def new_request_id() -> bytes:
    return _ids.next()


def update(
    cluster: PeerCluster, data: bytes, request_id: bytes | None = None, timeout: float = 20.0
) -> int:
    """Commit ``data``; returns its index. Retries with the same request id until done."""
    rid = request_id or new_request_id()
    deadline = time.monotonic() + timeout
    target = cluster.leader()
    while time.monotonic() < deadline:
        if target is None or not cluster.peers[target].running:
            target = cluster.leader()
            if target is None:
                time.sleep(0.05)
                continue
        got = probe(cluster.peers[target].url, cluster.ident, RequestUpdate(rid, data), collect=8)
        final = [r for r in got if isinstance(r, RequestUpdateResponse)]
        for r in final:
            if r.status == UpdateStatus.DONE:
                assert r.index is not None
                return r.index
            if r.status == UpdateStatus.EXPIRED:
                raise AssertionError("request id expired")
            if r.status == UpdateStatus.NOT_LEADER:
                target = r.leader_id
                break
        else:
            target = None  # silence or only "accepted": rediscover and retry, same id
    raise AssertionError(f"update {rid.hex()} not committed within {timeout}s")
