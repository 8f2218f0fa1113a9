"""``RaftlogStreamReader``: micro-batches of committed entries, with the start, limits and
data-loss handling of Spark's Kafka source (see integrations/spark/README.md)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from raftlog_spark.balance import Segment, bucket_step, rows_upto, weigh
from raftlog_spark.errors import RaftlogDataLossError, RaftlogSourceError
from raftlog_spark.groups import StreamGroup
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import SourceOptions
from raftlog_spark.planning import LogPosition, stream_ranges, time_ranges
from raftlog_spark.scan import base_spec, counted_topics, read_partition, weighted_split
from raftlog_spark.setup import one_line_errors, one_line_rows

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python streams
    _stream_api: Any = importlib.import_module("pyspark.sql.streaming.datasource")
except ImportError:  # pragma: no cover - PySpark 4.1
    _stream_api = None
_ReadMaxRows: Any = getattr(_stream_api, "ReadMaxRows", None)
_ReadAllAvailable: Any = getattr(_stream_api, "ReadAllAvailable", None)
_ReadMinRows: Any = getattr(_stream_api, "ReadMinRows", None)
_SupportsTriggerAvailableNow: Any = getattr(_stream_api, "SupportsTriggerAvailableNow", object)


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
        self._group: StreamGroup | None = None

    @property
    def group(self) -> StreamGroup | None:
        """The query's stream group (``groupId``), or None."""
        if self._group is None and self.opts.group_id is not None and self.opts.topics:
            self._group = StreamGroup(self.client, self.opts.group_id, self.opts.topics)
        return self._group

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # read() runs in tasks, which open their own connections
        state["_group"] = None
        return state

    @property
    def client(self) -> LogClient:
        if self._client is None:
            self._client = LogClient(
                self.opts.peers, self.opts.ident, self.opts.timeout, self.opts.curve()
            )
        return self._client

    def _position(self) -> LogPosition:
        position = LogPosition.of(self.client.log_info(self.opts.consistency))
        self.client.answered_before = True  # later silence: the cluster went away
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
        at_group = self.group.start_offset() if self.group is not None else None
        if at_group is not None:
            start = str(at_group + 1)  # checked below like a startingOffsets index
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
        if self.group is not None:
            self.group.commit(begin)  # the batch that ended there is done (see groups.py)
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
        """The last committed index, for the query progress' ``latestOffset`` (asked for
        when no trigger has asked yet, e.g. right after a restart)."""
        if self._latest is None:
            try:
                self._position()
            except RaftlogSourceError:
                return None  # the progress report must not fail the query
        return None if self._latest is None else {"index": self._latest}

    @one_line_errors
    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        ranges = stream_ranges(int(start["index"]), int(end["index"]))
        return weighted_split(self.client, self.opts, self.spec, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return one_line_rows(read_partition(self.opts, self.spec, partition))

    @one_line_errors
    def commit(self, end: dict[str, int]) -> None:
        """Spark committed the micro-batch ending at ``end``: the stream group's position
        moves past it (``groupId``); otherwise nothing to release -- committed entries stay
        readable until compaction."""
        if self.group is not None:
            self.group.commit(int(end["index"]))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
