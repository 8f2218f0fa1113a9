"""``RaftlogDataSource``: committed raftlog entries as a Spark DataFrame (batch and stream).

Usage::

    spark.dataSource.register(RaftlogDataSource)        # or install the package: see README
    df = (spark.read.format("raftlog")
          .option("peers", "tcp://10.0.0.1:8047,tcp://10.0.0.2:8047")
          .option("ident", "my-cluster")
          .load())

Where things happen: ``load()`` runs :meth:`RaftlogDataSource.schema` in a Python worker of
the driver, which validates every option and pins the log position (first index, last
committed-and-applied index) by asking the leader -- so bad options, unreachable peers and a
wrong ident fail there, and every action on the DataFrame reads the same committed range.
Planning (``reader`` -> ``pushFilters`` with ``pushFilters=true`` -> ``partitions``) turns
options and filters into index ranges, cut into partitions of equal rows by the leader's
record counts (:mod:`raftlog_spark.scan`); each task then streams its ranges from the leader
with RequestEntries (:class:`raftlog_spark.logclient.LogClient`) and returns Arrow record
batches. Streams: :mod:`raftlog_spark.stream`; writes: :mod:`raftlog_spark.sink`. The source
class, its readers and partitions are pickled by reference, so executors import
``raftlog_spark`` (and ``raftlog``) from their own Python environment.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.filters import IndexRanges, push_filters
from raftlog_spark.groups import batch_start
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import SourceOptions, parse_options
from raftlog_spark.planning import (
    LogPosition,
    batch_ranges,
    plan_batch,
)
from raftlog_spark.scan import base_spec, read_partition, weighted_split
from raftlog_spark.schema import schema_for
from raftlog_spark.setup import check_worker_python, one_line_errors, one_line_rows
from raftlog_spark.sink import RaftlogStreamWriter, RaftlogWriter, parse_sink_options
from raftlog_spark.stream import RaftlogStreamReader
from raftlog_spark.worker_gc import settle_worker_heap


def _check_schema(schema: StructType, opts: SourceOptions) -> None:
    expected = schema_for(opts.include_headers)
    if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise RaftlogSourceError(
            "raftlog source: the schema is fixed; drop .schema(...) and select or cast "
            f"columns after load() instead (expected {expected.simpleString()}, "
            f"got {schema.simpleString()})"
        )


def _pushdown_disabled() -> bool:
    """True when Spark is planning this read without filter pushdown.

    ``spark.sql.python.filterPushdown.enabled`` is false by default, and then PySpark refuses a
    reader that implements ``pushFilters`` (DATA_SOURCE_PUSHDOWN_DISABLED) instead of simply
    not calling it. The planning worker holds the setting in a local of its ``_main``; when it
    says "disabled" the source hands out a reader without ``pushFilters``. If the worker ever
    looks different, the pushdown reader is returned and Spark's own error names the setting.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith("plan_data_source_read.py"):
            return frame.f_locals.get("enable_pushdown") is False
        frame = frame.f_back
    return False


class RaftlogDataSource(DataSource):
    """The ``raftlog`` data source (see the module doc and integrations/spark/README.md)."""

    @classmethod
    def name(cls) -> str:
        return "raftlog"

    @one_line_errors
    def schema(self) -> StructType:
        check_worker_python()
        opts = parse_options(self.options)
        with LogClient(opts.peers, opts.ident, opts.timeout, opts.curve()) as client:
            self._pinned = LogPosition.of(client.log_info(opts.consistency))
            if opts.topics is not None:
                client.check_topics(opts.topics)  # raftlog's UnknownTopic, at load()
                if opts.group_id is not None:  # a batch read's start (streams ask again)
                    self._group_start = batch_start(client, opts.group_id, opts.topics)
        settle_worker_heap()  # a planning worker: see raftlog_spark.worker_gc
        return schema_for(opts.include_headers)

    @staticmethod
    def _fetch_position(opts: SourceOptions) -> tuple[LogPosition, int | None]:
        with LogClient(opts.peers, opts.ident, opts.timeout, opts.curve()) as client:
            pinned = LogPosition.of(client.log_info(opts.consistency))
            if opts.group_id is None or opts.topics is None:
                return pinned, None
            return pinned, batch_start(client, opts.group_id, opts.topics)

    @one_line_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options, "batch")
        _check_schema(schema, opts)
        pinned: LogPosition | None = getattr(self, "_pinned", None)
        if pinned is None:  # a user-given schema: schema() did not run
            pinned, self._group_start = self._fetch_position(opts)
            self._pinned = pinned
        group_start: int | None = getattr(self, "_group_start", None)
        if group_start is not None:
            opts = dataclasses.replace(opts, group_start=group_start)
        batch_ranges(opts, pinned)  # option errors now, at planning time
        if opts.push_filters and not _pushdown_disabled():
            return RaftlogPushdownReader(opts, pinned)
        return RaftlogReader(opts, pinned)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """A stream reader -- or, for options invalid in a stream, one that only refuses:
        PySpark's streaming runner calls ``reader.stop()`` in a ``finally``, so an error
        raised here would surface as ``UnboundLocalError: reader`` instead (issue #31)."""
        try:
            opts = parse_options(self.options, "stream")
            _check_schema(schema, opts)
        except RaftlogSourceError as exc:
            return RefusedStreamReader(exc)
        return RaftlogStreamReader(opts)

    @one_line_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RaftlogWriter(parse_sink_options(self.options), schema)

    @one_line_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return RaftlogStreamWriter(parse_sink_options(self.options), schema)


class RefusedStreamReader(DataSourceStreamReader):
    """A stream whose options were refused: its first call (Spark asks for the default read
    limit or the initial offset before anything else) raises the one-line error; it holds
    no connection, so ``stop`` has nothing to release."""

    def __init__(self, error: RaftlogSourceError) -> None:
        self.error = error

    def _refuse(self, *_: object) -> NoReturn:
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"  # as one_line_errors does
        raise self.error

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        self._refuse()

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:  # noqa: N802
        self._refuse()

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        self._refuse()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        self._refuse()

    def stop(self) -> None:
        """Nothing to release."""


class RaftlogReader(DataSourceReader):
    """Batch reader over the pinned committed range. Spark applies every filter itself: a
    reader that narrows by pushed filters can give wrong answers through a Spark bug (see
    :class:`RaftlogPushdownReader`), so this is the default."""

    def __init__(self, opts: SourceOptions, position: LogPosition) -> None:
        self.opts = opts
        self.position = position
        self.spec = base_spec(opts)

    def planned_ranges(self, client: LogClient) -> IndexRanges:
        opts, spec = self.opts, self.spec
        return plan_batch(opts, self.position, spec, client)

    @one_line_errors
    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        curve = opts.curve()  # load() talked to the cluster: silence now is not the ident
        with LogClient(opts.peers, opts.ident, opts.timeout, curve, answered_before=True) as client:
            parts = weighted_split(client, opts, self.spec, self.planned_ranges(client))
        settle_worker_heap()
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return one_line_rows(read_partition(self.opts, self.spec, partition))


class RaftlogPushdownReader(RaftlogReader):
    """Batch reader that also narrows reads by pushed filters on ``index``, ``topic``,
    ``timestamp`` -- only with the ``pushFilters`` option (and Spark's
    ``spark.sql.python.filterPushdown.enabled``).

    Opt-in because of a Spark bug (4.1-4.3): ``PythonScanBuilder`` caches the pushed scan on
    the DataFrame's source, and a later query on the same DataFrame that pushes no filter
    reuses it -- ``df.where("topic='a'").count()`` then ``df.count()`` gives the filtered
    count. Use it with one DataFrame per filtered query."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802
        self.spec, rest = push_filters(self.spec, filters)
        return rest
