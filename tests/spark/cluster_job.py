"""Driver program of test_cluster_mode, run with spark-submit in its own JVM.

It does *not* register the source: ``format("raftlog")`` must be found by name, through the
``pyspark_raftlog`` module. Prints one JSON line: rows per topic, executors, partitions.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(peers: str, ident: str) -> None:
    spark = SparkSession.builder.appName("raftlog-cluster-mode-test").getOrCreate()
    try:
        df = (
            spark.read.format("raftlog")
            .option("peers", peers)
            .option("ident", ident)
            .option("numPartitions", 4)
            .load()
        )
        counts = {row["topic"] or "": row["count"] for row in df.groupBy("topic").count().collect()}
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        result = {"counts": counts, "executors": executors, "partitions": df.rdd.getNumPartitions()}
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
