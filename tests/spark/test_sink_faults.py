"""The sink under real faults, each in its own spark-submit (sink_job.py): an executor JVM
killed (SIGKILL) half-way through a batch write, and the driver killed (SIGKILL, the whole
process group) in the middle of a streaming copy, then restarted from its checkpoint. Every
row must be in the log exactly once: counted from the log itself, not through Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.cluster import PeerCluster, wait_for

from raftlog.errors import TopicError
from raftlog.topics.records import Record, encode_records
from raftlog.topics.sync_client import SyncTopicClient

from .helpers import log_rows, publish, start_cluster, stop_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

JOB = Path(__file__).with_name("sink_job.py")
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
COMMON = [
    "--conf",
    "spark.ui.enabled=false",
    "--conf",
    "spark.driver.host=127.0.0.1",
    "--conf",
    "spark.driver.bindAddress=127.0.0.1",
    "--conf",
    f"spark.pyspark.python={sys.executable}",
]


def _scratch(tmp_path: Path) -> list[str]:
    """Spark's scratch space (block manager, artifacts) under the test's own directory: a
    JVM killed with SIGKILL never runs the shutdown hook that deletes it from /tmp."""
    scratch = tmp_path / "spark-scratch"
    scratch.mkdir(exist_ok=True)
    java = f"-Djava.io.tmpdir={scratch}"
    return [
        "--conf", f"spark.local.dir={scratch}",
        "--conf", f"spark.driver.extraJavaOptions={java}",
        "--conf", f"spark.executor.extraJavaOptions={java}",
    ]


def _env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


def _topic_values(cluster: PeerCluster, topic: str) -> Counter[bytes]:
    return Counter(r[5] for r in log_rows(cluster) if r[3] == topic)


def _published_bytes(topics: SyncTopicClient, topic: str) -> int:
    """What ``topic`` holds, from a ``TD`` (cheap: the wait below used to read and decode
    the whole log twice a second, competing with the JVMs it waited for)."""
    try:
        return topics.describe(topic).published_bytes
    except TopicError:  # UnknownTopic: the sink has not created it yet
        return 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    (tmp_path / "cluster").mkdir()
    started = start_cluster(tmp_path / "cluster", "raftlog-spark-sink-faults")
    try:
        yield started
    finally:
        stop_cluster(started)


def test_executor_killed_mid_write_writes_every_row_once(
    cluster: PeerCluster, tmp_path: Path
) -> None:
    rows = 20_000
    marker = tmp_path / "killed"
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local-cluster[2,1,1024]",
        *COMMON,
        *_scratch(tmp_path),
        str(JOB),
        "batch",
        ",".join(cluster.urls),
        cluster.ident,
        "copied",
        str(rows),
        str(marker),
    ]
    done = subprocess.run(
        command, env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=400, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    assert marker.exists(), "the executor was not killed"
    assert json.loads(lines[-1].removeprefix("RESULT ")) == {"rows": rows, "distinct": rows}
    values = _topic_values(cluster, "copied")
    assert len(values) == rows and set(values.values()) == {1}


def test_driver_killed_mid_stream_write_restarts_exactly_once(
    cluster: PeerCluster, tmp_path: Path
) -> None:
    source = [
        encode_records([Record("src", b"%d-%d" % (n, k)) for k in range(100)]) for n in range(150)
    ]
    publish(cluster, source, concurrency=8)
    checkpoint = tmp_path / "checkpoint"
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local[2]",
        *COMMON,
        *_scratch(tmp_path),
        str(JOB),
        "stream",
        ",".join(cluster.urls),
        cluster.ident,
        "src",
        "dst",
        str(checkpoint),
    ]
    first = subprocess.Popen(
        command,
        env=_env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with SyncTopicClient(cluster.urls, cluster.ident, timeout=20) as topics:
            wait_for("the stream to write part of the copy",
                     lambda: _published_bytes(topics, "dst") > 0, 240, interval=0.5)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver JVM and its Python, at once
        first.wait(30)
    partial = sum(_topic_values(cluster, "dst").values())
    done = subprocess.run(
        command, env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and "RESULT done" in done.stdout, done.stderr[-4000:]
    values = _topic_values(cluster, "dst")
    assert 0 < partial < 15_000
    assert len(values) == 15_000 and set(values.values()) == {1}
