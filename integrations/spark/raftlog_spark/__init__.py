"""A PySpark (>= 4.1) data source for raftlog: committed log ranges as DataFrames, in batch
and as a stream. See integrations/spark/README.md.

``spark.dataSource.register(RaftlogDataSource)`` (or :func:`register`) makes
``spark.read.format("raftlog")`` available in a session; an installed (non-editable) package
is also found by name, through the ``pyspark_raftlog`` module Spark looks up.
"""

from __future__ import annotations

from typing import Any

from raftlog_spark.errors import RaftlogDataLossError, RaftlogSourceError
from raftlog_spark.schema import SCHEMA
from raftlog_spark.setup import check_driver_python
from raftlog_spark.source import RaftlogDataSource

__all__ = [
    "SCHEMA",
    "RaftlogDataLossError",
    "RaftlogDataSource",
    "RaftlogSourceError",
    "register",
]


def register(spark: Any) -> None:
    """Register the ``raftlog`` format in ``spark`` (a SparkSession); idempotent. Fails at
    once, saying "set PYSPARK_PYTHON to ...", when Spark's Python workers could not import
    the source (a virtualenv that is not activated)."""
    check_driver_python(spark)
    spark.dataSource.register(RaftlogDataSource)
