"""Beyond one JVM: spark-submit with ``local-cluster[2,1,1024]`` (a master, two workers and
two executor JVMs started by Spark itself), tasks running in the executors' Python workers,
which import the installed package; the source found by name, not registered.

It runs in the install ``make install`` makes: an editable install, whose import hook
``pkgutil.iter_modules`` -- Spark's lookup of ``pyspark_*`` modules -- cannot list, plus the
``raftlog-spark.pth`` that puts ``integrations/spark`` on the path so that Spark finds
``pyspark_raftlog``; a wheel or ``pip install .`` puts it in site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from integration.cluster import PeerCluster

from .helpers import log_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")


def test_local_cluster_reads_by_name_in_executor_jvms(
    log_cluster: PeerCluster, tmp_path: Path
) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    expected = Counter(r[3] or "" for r in log_rows(log_cluster))
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local-cluster[2,1,1024]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        str(Path(__file__).with_name("cluster_job.py")),
        ",".join(log_cluster.urls),
        log_cluster.ident,
    ]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=280, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["executors"] == 2
    assert result["partitions"] == 4
    assert result["counts"] == dict(expected)
