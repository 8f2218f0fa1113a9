"""A deliberately small blocking updater for peer tests (independent of raftlog.client).

It follows the protocol's client rules closely enough to test the server: the same request id
on every retry, "accepted" restarts the wait, "not leader" moves to the named leader.
"""

from __future__ import annotations

import time

from integration.cluster import PeerCluster, probe
from integration.thread_gang import ThreadGang
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
        got = probe(
            cluster.peers[target].url,
            cluster.ident,
            RequestUpdate(rid, data),
            collect=8,
            curve=cluster.curve,
        )
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


class Writers(ThreadGang):
    """``count`` threads committing updates until stopped (use as a context manager);
    ``acked`` maps each acknowledged request id to its index, ``errors`` collects failures."""

    def __init__(self, cluster: PeerCluster, count: int, timeout: float = 30.0) -> None:
        super().__init__(self._write, [()] * count, join_timeout=timeout * 2, daemon=False)
        self.cluster = cluster
        self.acked: dict[bytes, int] = {}
        self.errors: list[BaseException] = []
        self._timeout = timeout

    def _write(self) -> None:
        n = 0
        try:
            while not self.stopping.is_set():
                rid = new_request_id()
                self.acked[rid] = update(self.cluster, b"load %d" % n, rid, self._timeout)
                n += 1
        except BaseException as exc:
            self.errors.append(exc)


def assert_acked_exactly_once(cluster: PeerCluster, leader: str, acked: dict[bytes, int]) -> int:
    """Every acknowledged update is in the leader's log once, at its acknowledged index;
    returns the last index read."""
    entries = cluster.read_all(leader)
    by_rid: dict[bytes, list[int]] = {}
    for index, raw in entries:
        by_rid.setdefault(raw[:12], []).append(index)
    for rid, index in acked.items():
        assert by_rid.get(rid) == [index], f"update {rid.hex()} acked at {index}"
    return entries[-1][0] if entries else 0
