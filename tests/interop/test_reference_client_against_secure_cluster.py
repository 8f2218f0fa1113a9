"""The reference's client (plaintext only: zmq-raft has no CURVE) against a CURVE cluster.

Why: the security promise is that a client without an admitted key gets nothing — the
reference's client included — and that such clients cannot disturb the cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from interop_peers import PeerCluster, SecureSetup, update, wait_for
from reference import NodeScriptError, js_config_and_log_info, js_updates

pytestmark = pytest.mark.timeout(120)


def test_the_reference_client_gets_no_answer_and_the_cluster_keeps_serving(
    reference_installed: Path, tmp_path: Path
) -> None:
    secure = SecureSetup(tmp_path)
    with PeerCluster(tmp_path, ident="raftlog-secure", security=secure) as cluster:
        cluster.start()
        cluster.wait_stable_leader()
        with pytest.raises(NodeScriptError):
            js_config_and_log_info(cluster.urls, cluster.ident, rpc_timeout_ms=2000).run(
                timeout=20
            )
        with pytest.raises(NodeScriptError):
            js_updates(cluster.urls, cluster.ident, 1, rpc_timeout_ms=2000).run(timeout=20)
        index = update(cluster, b"still serving")
        leader = wait_for("a leader", cluster.leader)
        assert any(i == index for i, _ in cluster.read_all(leader))
