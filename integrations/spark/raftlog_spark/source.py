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
Planning (``reader`` -> ``pushFilters`` -> ``partitions``) turns options and pushed filters
into index ranges; each task then streams its ranges from the leader with RequestEntries
(:class:`raftlog_spark.logclient.LogClient`) and returns Arrow record batches. The source
class, its readers and partitions are pickled by reference, so executors import
``raftlog_spark`` (and ``raftlog``) from their own Python environment.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from raftlog.client import SyncTopicClient
from raftlog.client.topic_view import TopicView
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.filters import IndexRanges, ScanSpec, push_filters
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import SourceOptions, parse_options
from raftlog_spark.planning import (
    LogPosition,
    batch_ranges,
    plan_batch,
    split,
    stream_ranges,
)
from raftlog_spark.rows import to_batches
from raftlog_spark.schema import SCHEMA

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python streams
    _stream_api: Any = importlib.import_module("pyspark.sql.streaming.datasource")
except ImportError:  # pragma: no cover - PySpark 4.1
    _stream_api = None
_ReadMaxRows: Any = getattr(_stream_api, "ReadMaxRows", None)
_ReadAllAvailable: Any = getattr(_stream_api, "ReadAllAvailable", None)
_SupportsTriggerAvailableNow: Any = getattr(_stream_api, "SupportsTriggerAvailableNow", object)


def read_ranges(
    opts: SourceOptions, spec: ScanSpec, ranges: IndexRanges
) -> Iterator[pa.RecordBatch]:
    """A task's rows: every admitted row of the entries in ``ranges``, as Arrow batches."""
    if not ranges:
        return
    # Topic rows follow the topic read rules (issue #11: same records as TR reads). The view
    # is fetched per task here; fetching it once at planning and shipping it in the
    # partitions would make every task use the same applied index.
    wanted = spec.wanted_topics()
    view = None
    if wanted != frozenset():
        with SyncTopicClient(opts.peers, opts.ident, timeout=opts.timeout) as topics:
            view = TopicView.fetch(topics, wanted)
    with LogClient(opts.peers, opts.ident, opts.timeout) as client:

        def chunks() -> Iterator[list[Any]]:
            for lo, hi in ranges:
                yield from client.stream_range(lo, hi, fail_on_data_loss=opts.fail_on_data_loss)

        yield from to_batches(chunks(), spec, opts.rows_per_batch, view)


def _check_schema(schema: StructType) -> None:
    if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in SCHEMA.fields
    ]:
        raise RaftlogSourceError(
            "raftlog source: the schema is fixed; drop .schema(...) and select or cast "
            f"columns after load() instead (expected {SCHEMA.simpleString()}, "
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

    def schema(self) -> StructType:
        opts = parse_options(self.options)
        self._pinned = self._fetch_position(opts)
        return SCHEMA

    @staticmethod
    def _fetch_position(opts: SourceOptions) -> LogPosition:
        with LogClient(opts.peers, opts.ident, opts.timeout) as client:
            return LogPosition.of(client.log_info())

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        opts = parse_options(self.options, "batch")
        pinned: LogPosition | None = getattr(self, "_pinned", None)
        if pinned is None:  # a user-given schema: schema() did not run
            pinned = self._pinned = self._fetch_position(opts)
        batch_ranges(opts, pinned)  # option errors now, at planning time
        if _pushdown_disabled():
            return RaftlogReader(opts, pinned)
        return RaftlogPushdownReader(opts, pinned)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        _check_schema(schema)
        return RaftlogStreamReader(parse_options(self.options, "stream"))


class RaftlogReader(DataSourceReader):
    """Batch reader over the pinned committed range (options only, no pushdown)."""

    def __init__(self, opts: SourceOptions, position: LogPosition) -> None:
        self.opts = opts
        self.position = position
        self.spec = ScanSpec(topics=opts.topics)

    def planned_ranges(self) -> IndexRanges:
        opts, spec = self.opts, self.spec
        needs_times = (
            opts.starting_timestamp_ms is not None
            or opts.ending_timestamp_ms is not None
            or spec.time.ms_window() != (None, None)
        )
        if not needs_times:
            return plan_batch(opts, self.position, spec, None)
        with LogClient(opts.peers, opts.ident, opts.timeout) as client:
            return plan_batch(opts, self.position, spec, client)

    def partitions(self) -> Sequence[InputPartition]:
        return split(
            self.planned_ranges(),
            num_partitions=self.opts.num_partitions,
            entries_per_partition=self.opts.entries_per_partition,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.opts, self.spec, getattr(partition, "ranges", ()))


class RaftlogPushdownReader(RaftlogReader):
    """Batch reader that also takes pushed filters on ``index``, ``topic``, ``timestamp``."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802
        self.spec, rest = push_filters(self.spec, filters)
        return rest


class RaftlogStreamReader(DataSourceStreamReader, _SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches of committed entries; offsets are ``{"index": last index included}``.

    ``startingOffsets``: ``latest`` (default: entries committed after the query starts),
    ``earliest`` (the first index still in the log) or an index (the first one to read).
    ``maxEntriesPerTrigger`` caps the entries (not rows) per micro-batch. Restarts resume
    from the checkpointed offsets: a micro-batch is an immutable committed index range, so a
    replayed batch reads exactly the same rows.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.spec = ScanSpec(topics=opts.topics)
        self._client: LogClient | None = None
        self._target: int | None = None
        self._latest: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # read() runs in tasks, which open their own connections
        return state

    def _position(self) -> LogPosition:
        if self._client is None:
            self._client = LogClient(self.opts.peers, self.opts.ident, self.opts.timeout)
        position = LogPosition.of(self._client.log_info())
        self._latest = position.last_index
        return position

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        position = self._position()
        start = self.opts.starting_offsets
        if start == "earliest":
            return {"index": position.first_index - 1}
        if start == "latest":
            return {"index": position.last_index}
        first = int(start)
        if first > position.last_index + 1:
            raise RaftlogSourceError(
                f"raftlog source: startingOffsets {first} is beyond the next index to be "
                f"committed ({position.last_index + 1})"
            )
        if first < position.first_index:
            if self.opts.fail_on_data_loss:
                raise RaftlogSourceError(
                    f"raftlog source: startingOffsets {first} is below the first available "
                    f"index {position.first_index} (compacted); use earliest, or "
                    "failOnDataLoss=false"
                )
            first = position.first_index
        return {"index": first - 1}

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        limit = self.opts.max_entries_per_trigger
        if _ReadMaxRows is None:  # pragma: no cover - PySpark 4.1
            return None
        return _ReadMaxRows(limit) if limit is not None else _ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._position().last_index

    def latestOffset(  # noqa: N802
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        target = self._target if self._target is not None else self._position().last_index
        if start is None:  # PySpark 4.1: no admission control
            return {"index": target}
        begin = int(start["index"])
        end = max(begin, target)
        if _ReadMaxRows is not None and isinstance(limit, _ReadMaxRows):
            end = min(end, begin + int(limit.max_rows))
        return {"index": end}

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802
        return None if self._latest is None else {"index": self._latest}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return split(
            stream_ranges(int(start["index"]), int(end["index"])),
            num_partitions=self.opts.num_partitions,
            entries_per_partition=self.opts.entries_per_partition,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.opts, self.spec, getattr(partition, "ranges", ()))

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
