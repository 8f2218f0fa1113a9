"""Driver program of test_sink_faults, run with spark-submit in its own JVM.

``batch PEERS IDENT TOPIC ROWS MARKER``: write ROWS rows into TOPIC; the first attempt of
partition 0 kills its own executor JVM (SIGKILL) half-way through its rows, once, and
leaves MARKER behind. Prints ``RESULT {"rows": N, "distinct": D}`` read back from raftlog.

``stream PEERS IDENT SOURCE TOPIC CHECKPOINT``: copy the records of topic SOURCE into TOPIC
with a raftlog -> raftlog stream (AvailableNow, small micro-batches) from CHECKPOINT. The
test kills this driver mid-write and runs it again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812


def _executor_jvm() -> int | None:
    """The pid of the JVM this Python worker descends from."""
    pid = os.getppid()
    while pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if b"java" in cmdline.split(b"\0")[0]:
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def batch(peers: str, ident: str, topic: str, rows: int, marker: str) -> None:
    spark = SparkSession.builder.appName("raftlog-sink-executor-kill").getOrCreate()

    def kill_once(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        doomed = context.partitionId() == 0 and context.attemptNumber() == 0
        seen = 0
        for chunk in batches:
            yield chunk
            seen += chunk.num_rows
            if doomed and seen >= rows // 8 and not os.path.exists(marker):
                time.sleep(3)  # let the writer publish what it has
                Path(marker).write_text(str(seen))
                jvm = _executor_jvm()
                if jvm is not None:
                    os.kill(jvm, signal.SIGKILL)
                time.sleep(60)

    try:
        df = (
            spark.range(rows, numPartitions=4)
            .select(F.col("id").cast("string").cast("binary").alias("value"))
            .mapInArrow(kill_once, "value binary")
            .select(F.lit(topic).alias("topic"), "value")
        )
        df.write.format("raftlog").option("peers", peers).option("ident", ident).option(
            "timeout", 60
        ).mode("append").save()
        back = (
            spark.read.format("raftlog")
            .option("peers", peers)
            .option("ident", ident)
            .option("topics", topic)
            .load()
        )
        result = {"rows": back.count(), "distinct": back.select("value").distinct().count()}
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        spark.stop()


def stream(peers: str, ident: str, source: str, topic: str, checkpoint: str) -> None:
    spark = SparkSession.builder.appName("raftlog-sink-driver-kill").getOrCreate()
    try:
        query = (
            spark.readStream.format("raftlog")
            .option("peers", peers)
            .option("ident", ident)
            .option("topics", source)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", 2000)
            .load()
            .select(F.lit(topic).alias("topic"), "key", "value")
            .writeStream.format("raftlog")
            .option("peers", peers)
            .option("ident", ident)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        print("RESULT done", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "batch":
        batch(args[0], args[1], args[2], int(args[3]), args[4])
    else:
        stream(*args)
