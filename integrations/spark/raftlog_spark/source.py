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
import time
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType
from typing import Any

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

from raftlog_spark.balance import Segment, bucket_step, rows_upto, weigh
from raftlog_spark.errors import RaftlogDataLossError, RaftlogSourceError
from raftlog_spark.filters import IndexRanges, ScanSpec, push_filters
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import SourceOptions, parse_options
from raftlog_spark.planning import (
    IndexRangePartition,
    LogPosition,
    batch_ranges,
    plan_batch,
    split,
    stream_ranges,
    time_ranges,
)
from raftlog_spark.rows import to_batches
from raftlog_spark.schema import schema_for
from raftlog_spark.setup import check_worker_python, one_line_errors
from raftlog_spark.sink import RaftlogStreamWriter, RaftlogWriter, parse_sink_options

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python streams
    _stream_api: Any = importlib.import_module("pyspark.sql.streaming.datasource")
except ImportError:  # pragma: no cover - PySpark 4.1
    _stream_api = None
_ReadMaxRows: Any = getattr(_stream_api, "ReadMaxRows", None)
_ReadAllAvailable: Any = getattr(_stream_api, "ReadAllAvailable", None)
_ReadMinRows: Any = getattr(_stream_api, "ReadMinRows", None)
_SupportsTriggerAvailableNow: Any = getattr(_stream_api, "SupportsTriggerAvailableNow", object)


def read_ranges(
    opts: SourceOptions, spec: ScanSpec, ranges: IndexRanges
) -> Iterator[pa.RecordBatch]:
    """A task's rows: every admitted row of the entries in ``ranges``, as Arrow batches."""
    if not ranges:
        return
    with LogClient(opts.peers, opts.ident, opts.timeout) as client:

        def chunks() -> Iterator[list[Any]]:
            for lo, hi in ranges:
                yield from client.stream_range(lo, hi, fail_on_data_loss=opts.fail_on_data_loss)

        yield from to_batches(chunks(), spec, opts.rows_per_batch, opts.include_headers)


def base_spec(opts: SourceOptions) -> ScanSpec:
    return ScanSpec(topics=opts.topics, topic_pattern=opts.topic_pattern)


def counted_topics(client: LogClient, opts: SourceOptions, spec: ScanSpec) -> frozenset[str] | None:
    """The topics whose records are rows (for ``TC``): a finite set, or None for all."""
    wanted = spec.wanted_topics()
    if wanted is None and opts.topic_pattern is not None:
        wanted = frozenset(t for t in client.list_topics() if spec.admits_topic(t))
    return wanted


def weighted_split(
    client: LogClient, opts: SourceOptions, spec: ScanSpec, ranges: IndexRanges
) -> list[IndexRangePartition]:
    """``ranges`` cut into partitions of equal rows, weighed by the leader's ``TC`` counts."""
    if not ranges:
        return []
    lo, hi = ranges[0][0], ranges[-1][1]
    step = bucket_step(lo, hi)
    counts = client.record_counts(lo, hi, step, counted_topics(client, opts, spec))
    segments = weigh(ranges, counts, lo, step, raw_rows=spec.admits_raw)
    return split(
        ranges,
        num_partitions=opts.num_partitions,
        entries_per_partition=opts.entries_per_partition,
        records_per_partition=opts.records_per_partition,
        segments=segments,
    )


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
        with LogClient(opts.peers, opts.ident, opts.timeout) as client:
            self._pinned = LogPosition.of(client.log_info())
            if opts.topics is not None:
                client.check_topics(opts.topics)  # raftlog's UnknownTopic, at load()
        return schema_for(opts.include_headers)

    @staticmethod
    def _fetch_position(opts: SourceOptions) -> LogPosition:
        with LogClient(opts.peers, opts.ident, opts.timeout) as client:
            return LogPosition.of(client.log_info())

    @one_line_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options, "batch")
        _check_schema(schema, opts)
        pinned: LogPosition | None = getattr(self, "_pinned", None)
        if pinned is None:  # a user-given schema: schema() did not run
            pinned = self._pinned = self._fetch_position(opts)
        batch_ranges(opts, pinned)  # option errors now, at planning time
        if opts.push_filters and not _pushdown_disabled():
            return RaftlogPushdownReader(opts, pinned)
        return RaftlogReader(opts, pinned)

    @one_line_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        opts = parse_options(self.options, "stream")
        _check_schema(schema, opts)
        return RaftlogStreamReader(opts)

    @one_line_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RaftlogWriter(parse_sink_options(self.options), schema)

    @one_line_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return RaftlogStreamWriter(parse_sink_options(self.options), schema)


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
        with LogClient(opts.peers, opts.ident, opts.timeout) as client:
            return weighted_split(client, opts, self.spec, self.planned_ranges(client))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.opts, self.spec, getattr(partition, "ranges", ()))


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


class RaftlogStreamReader(DataSourceStreamReader, _SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches of committed entries; offsets are ``{"index": last index included}``.

    Start: ``startingOffsets`` (``latest`` by default, ``earliest`` or an index) or
    ``startingTimestamp``. Per trigger: ``maxRecordsPerTrigger`` rows (from the peers' record
    counts), ``maxEntriesPerTrigger`` entries, ``minOffsetsPerTrigger`` rows at least unless
    ``maxTriggerDelay`` passed. Restarts resume from the checkpointed offsets: a
    micro-batch is an immutable committed index range, so a replayed batch reads exactly the
    same rows.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.spec = base_spec(opts)
        self._client: LogClient | None = None
        self._target: int | None = None
        self._latest: int | None = None
        self._last_trigger = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # read() runs in tasks, which open their own connections
        return state

    @property
    def client(self) -> LogClient:
        if self._client is None:
            self._client = LogClient(self.opts.peers, self.opts.ident, self.opts.timeout)
        return self._client

    def _position(self) -> LogPosition:
        position = LogPosition.of(self.client.log_info())
        self._latest = position.last_index
        return position

    @one_line_errors
    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        position = self._position()
        opts = self.opts
        if opts.topics is not None:
            self.client.check_topics(opts.topics)
        if opts.starting_timestamp_ms is not None:
            if position.first_index > position.last_index:
                return {"index": position.last_index}
            found = time_ranges(
                self.client,
                position.first_index,
                position.last_index,
                opts.starting_timestamp_ms,
                None,
            )
            begin = found[0][0] if found else position.last_index + 1
            return {"index": begin - 1}
        start = opts.starting_offsets or "latest"
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
            if opts.fail_on_data_loss:
                raise RaftlogDataLossError(
                    f"raftlog source: startingOffsets {first} is below the first available "
                    f"index {position.first_index} (compacted); {position.available()}; use "
                    "earliest, or failOnDataLoss=false"
                )
            first = position.first_index
        return {"index": first - 1}

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        opts = self.opts
        if _ReadMaxRows is None:  # pragma: no cover - PySpark 4.1
            return None
        if opts.max_records_per_trigger is not None:
            return _ReadMaxRows(opts.max_records_per_trigger)
        if opts.max_entries_per_trigger is not None:
            return _ReadMaxRows(opts.max_entries_per_trigger)
        if opts.min_records_per_trigger is not None and _ReadMinRows is not None:
            return _ReadMinRows(opts.min_records_per_trigger)
        return _ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._position().last_index

    @one_line_errors
    def latestOffset(  # noqa: N802
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        position = self._position()
        target = self._target if self._target is not None else position.last_index
        if start is None:  # PySpark 4.1: no admission control
            return {"index": target}
        begin = int(start["index"])
        if begin + 1 < position.first_index:  # compacted under the stream
            if self.opts.fail_on_data_loss:
                raise RaftlogDataLossError(
                    f"raftlog source: entries {begin + 1}..{position.first_index - 1} were "
                    f"compacted before this stream read them; {position.available()}; set "
                    "failOnDataLoss=false to skip them"
                )
            begin = position.first_index - 1  # jump straight to what is there
        end = max(begin, target)
        if end == begin:
            return {"index": end}
        if _ReadAllAvailable is None or isinstance(limit, _ReadAllAvailable):
            self._last_trigger = time.monotonic()
            return {"index": end}
        return {"index": self._admit(begin, end)}

    def _admit(self, begin: int, end: int) -> int:
        """The end offset of the next micro-batch in ``(begin, end]`` under the options'
        row / entry limits (``begin``: no batch yet). As in Spark's Kafka source,
        ``maxTriggerDelay`` counts from the last micro-batch (or the query's start)."""
        opts = self.opts
        if opts.max_entries_per_trigger is not None:
            end = min(end, begin + opts.max_entries_per_trigger)
        wants_rows = opts.max_records_per_trigger is not None or (
            opts.min_records_per_trigger is not None
        )
        if wants_rows:
            step = bucket_step(begin + 1, end)
            counts = self.client.record_counts(
                begin + 1, end, step, counted_topics(self.client, opts, self.spec)
            )
            segments = weigh(
                ((begin + 1, end),),
                counts,
                begin + 1,
                step,
                raw_rows=self.spec.admits_raw,
                entry_cost=0.0,
            )
            if opts.min_records_per_trigger is not None and self._target is None:
                # (not under Trigger.AvailableNow, which would wait forever)
                rows = sum(s.weight for s in segments)
                waited = time.monotonic() - self._last_trigger
                if rows < opts.min_records_per_trigger and waited < opts.max_trigger_delay_s:
                    return begin  # not enough yet: no batch this trigger
            if opts.max_records_per_trigger is not None:
                end = min(end, self._row_limit(segments, step, opts.max_records_per_trigger))
        self._last_trigger = time.monotonic()
        return end

    def _row_limit(self, segments: list[Segment], step: int, budget: int) -> int:
        """The last index within ``budget`` rows: whole buckets from their exact counts, the
        bucket where the limit falls asked again entry by entry."""
        if step == 1:
            return rows_upto(segments, budget)
        total = 0.0
        for seg in segments:
            if total + seg.weight <= budget:
                total += seg.weight
                continue
            topics = counted_topics(self.client, self.opts, self.spec)
            fine = self.client.record_counts(seg.lo, seg.hi, 1, topics)
            rows = weigh(
                ((seg.lo, seg.hi),),
                fine,
                seg.lo,
                1,
                raw_rows=self.spec.admits_raw,
                entry_cost=0.0,
            )
            return rows_upto(rows, budget - total, at_least_one=seg is segments[0])
        return segments[-1].hi

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802
        return None if self._latest is None else {"index": self._latest}

    @one_line_errors
    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        ranges = stream_ranges(int(start["index"]), int(end["index"]))
        return weighted_split(self.client, self.opts, self.spec, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.opts, self.spec, getattr(partition, "ranges", ()))

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: committed entries stay readable until compaction."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
