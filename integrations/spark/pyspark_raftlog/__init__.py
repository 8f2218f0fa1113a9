"""Lets Spark find the ``raftlog`` format by name.

PySpark (4.0+) registers, in every session, the ``DefaultSource`` of each top-level module
named ``pyspark_*`` that it finds on the Python path (``pyspark.sql.worker.lookup_data_sources``),
so ``spark.read.format("raftlog")`` works without ``spark.dataSource.register``.
"""

from raftlog_spark.source import RaftlogDataSource as DefaultSource

__all__ = ["DefaultSource"]
