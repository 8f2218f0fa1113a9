"""What batch reads and streams share: the rows of index ranges (a task's work), and
ranges cut into partitions of equal weight by the peers' record counts (planning)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from raftlog.topics.client_view import TopicView
from raftlog_spark.anchors import ANCHOR_TOPIC
from raftlog_spark.balance import at_stores, bucket_step, weigh
from raftlog_spark.commit_map import BulkCommits, CommitMap
from raftlog_spark.commits import CommitReader
from raftlog_spark.filters import IndexRanges, ScanSpec
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import SourceOptions
from raftlog_spark.planning import IndexRangePartition, split
from raftlog_spark.rows import CommitRecords, to_batches
from raftlog_spark.worker_gc import collector_paused


def read_partition(opts: SourceOptions, spec: ScanSpec, partition: Any) -> Iterator[pa.RecordBatch]:
    """A task's rows: every admitted row of the entries in the partition's ranges, as Arrow
    batches, by the topic read rules fetched at planning (issue #11: the records a ``TR``
    read at the planned applied index returns; every task of a read uses the same view).
    A transaction commit in the ranges gives its committed records, wherever their store
    entries lie (issue #18): from the stores the planner's commit map names, read in bulk
    (``raftlog_spark.commit_map``, issue #31), else by ``TR`` reads (``raftlog_spark.commits``).
    Python's cyclic collector stays off the decoding (:mod:`raftlog_spark.worker_gc`)."""
    ranges: IndexRanges = getattr(partition, "ranges", ())
    if not ranges:
        return
    view: TopicView | None = getattr(partition, "view", None)
    peer: str | None = getattr(partition, "peer", None)
    curve = opts.curve()
    with LogClient(opts.peers, opts.ident, opts.timeout, curve, answered_before=True) as client:

        def chunks() -> Iterator[list[Any]]:
            for lo, hi in ranges:
                yield from client.stream_range(
                    lo, hi, fail_on_data_loss=opts.fail_on_data_loss, from_peer=peer
                )

        commits: CommitRecords | None = None
        keep_store = None
        if view is not None:
            wanted = spec.topic_checker()
            commits = CommitReader(client, view, wanted).records
            commit_map: CommitMap | None = getattr(partition, "commits", None)
            if commit_map is not None:
                bulk = BulkCommits(
                    client, view, wanted, commit_map, commits, peer=peer, ranges=ranges
                )
                commits, keep_store = bulk.records, bulk.keep
        yield from collector_paused(
            to_batches(
                chunks(),
                spec,
                opts.rows_per_batch,
                opts.include_headers,
                view,
                commits=commits,
                uncommitted=opts.isolation == "read_uncommitted",
                keep_store=keep_store,
            )
        )


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
    """``ranges`` cut into partitions of equal rows, weighed by the leader's ``TC`` counts;
    each carries the topic read rules for its task (fetched here, once per read) and the
    peer it reads from first: round-robin over the cluster, followers included. The view,
    the counts and the cluster's peers are asked for at once (one round trip's wait)."""
    if not ranges:
        return []
    lo, hi = ranges[0][0], ranges[-1][1]
    step = bucket_step(lo, hi)
    wanted = spec.wanted_topics()
    view, counts, peers = client.plan_facts(
        wanted, lo, hi, step, counted_topics(client, opts, spec), with_view=wanted != frozenset()
    )
    if view is not None and wanted is None:  # the sink's own records are no data rows
        internal = {name: bounds for name, bounds in view.topics.items() if name != ANCHOR_TOPIC}
        view = TopicView(internal, view.applied)
    if counts is not None and opts.isolation == "read_uncommitted":
        counts = at_stores(counts, lo, step)  # records show at their stores (issue #31)
    segments = weigh(ranges, counts, lo, step, raw_rows=spec.admits_raw)
    return split(
        ranges,
        num_partitions=opts.num_partitions,
        entries_per_partition=opts.entries_per_partition,
        records_per_partition=opts.records_per_partition,
        min_partitions=opts.min_partitions,
        segments=segments,
        view=view,
        peers=peers,
        commits=None if opts.isolation == "read_uncommitted" else CommitMap.of(counts, lo, hi),
    )
