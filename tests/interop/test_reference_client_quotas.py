"""The reference client (npm ``zmq-raft``) over a per-address quota of a plaintext raftlog
peer (issue #25): its RequestUpdates past the rate are dropped, not answered with anything it
would read as "not leader" or crash on; it retries after its response timeout with the same
request id, so every update is committed exactly once, just later.

The peer listens on 127.0.0.2 (the member's own address is never limited), so the client's
connections, from 127.0.0.1, are the limited principal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_peers import PeerCluster, processes_mentioning, quiet_peer_cluster, read_our_log
from reference import js_updates

pytestmark = pytest.mark.timeout(120)

IDENT = "raftlog-interop-quota"


@pytest.fixture
def cluster(reference_installed: Path, tmp_path: Path) -> Iterator[PeerCluster]:
    with quiet_peer_cluster(tmp_path, ids=("1",), ident=IDENT) as running:
        peer = running.peers["1"]
        peer.url = peer.url.replace("127.0.0.1", "127.0.0.2")
        peer.pub_url = peer.pub_url.replace("127.0.0.1", "127.0.0.2")
        running.write_config()
        with running.config_path.open("a") as config:
            config.write("[quotas]\nrecords_per_s = 2\n")
        running.start()
        running.wait_leader()
        yield running
        assert peer.running, "the peer died"
    assert not processes_mentioning(tmp_path)


def test_reference_client_backs_off_and_commits_each_update_once(cluster: PeerCluster) -> None:
    payloads = [b"quota-%d" % n for n in range(6)]  # burst 2, then 2/s: four are refused once+
    result = js_updates(list(cluster.urls), IDENT, payloads, rpc_timeout_ms=30_000).run()
    assert len(set(result["indexes"])) == len(payloads)
    raw = read_our_log(cluster.peers["1"].data_dir)
    # each exactly once: the dropped attempts were never appended, the retries deduplicated
    assert [sum(entry.endswith(p) for entry in raw) for p in payloads] == [1] * len(payloads)
    log = cluster.peers["1"].log_path.read_text(errors="replace")
    assert "quota_refused" in log  # the rate was really met
