"""The Spark source and sink against a CURVE cluster: keys given as files, read on the
driver and in each task; without them the read fails with raftlog's one-line reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.cluster import PeerCluster
from integration.peer.updates import update
from integration.secure_setup import SecureSetup
from pyspark.sql import SparkSession

from .conftest import source_options


@pytest.fixture
def secure_cluster(tmp_path: Path) -> Iterator[tuple[PeerCluster, SecureSetup]]:
    setup = SecureSetup(tmp_path)
    with PeerCluster(tmp_path, ident="raftlog-spark-secure", security=setup) as cluster:
        cluster.start()
        cluster.wait_stable_leader()
        yield cluster, setup


def _keys(setup: SecureSetup) -> dict[str, Any]:
    return {
        "keyFile": setup.keys_dir / "admin.key_secret",
        "serverKeyFile": setup.keys_dir / "cluster.key",
    }


def test_read_and_write_a_secure_cluster_with_key_files(
    spark: SparkSession, secure_cluster: tuple[PeerCluster, SecureSetup]
) -> None:
    cluster, setup = secure_cluster
    for n in range(5):
        update(cluster, b"secret-%d" % n)
    options = source_options(cluster, **_keys(setup))
    df = spark.read.format("raftlog").options(**options).load()
    values = [bytes(r.value) for r in df.select("value").collect() if r.value is not None]
    assert [v for v in values if v.startswith(b"secret-")] == [b"secret-%d" % n for n in range(5)]

    rows = spark.createDataFrame([(b"from-spark-%d" % n,) for n in range(3)], "value binary")
    rows.write.format("raftlog").options(**options).mode("append").save()
    again = spark.read.format("raftlog").options(**options).load()
    written = {bytes(r.value) for r in again.select("value").collect() if r.value is not None}
    assert {b"from-spark-%d" % n for n in range(3)} <= written


def test_without_keys_the_read_fails_with_authentication_required(
    spark: SparkSession, secure_cluster: tuple[PeerCluster, SecureSetup]
) -> None:
    cluster, setup = secure_cluster
    with pytest.raises(Exception, match="authentication required") as refused:
        spark.read.format("raftlog").options(**source_options(cluster, timeout=5)).load()
    assert "check the ident" not in str(refused.value)  # the peers did answer: no ident hint
    only_one = source_options(cluster, keyFile=setup.keys_dir / "admin.key_secret")
    with pytest.raises(Exception, match="needs both keyFile"):
        spark.read.format("raftlog").options(**only_one).load()
