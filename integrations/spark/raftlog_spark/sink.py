"""The ``raftlog`` sink: ``df.write.format("raftlog")`` and ``writeStream.format("raftlog")``.

Columns (as in Spark's Kafka sink): ``topic`` (string; or the ``topic`` option), ``value``
(binary or string, required), ``key`` (binary/string, optional), ``headers``
(map<string, binary>, optional). Rows with a topic are published with ``publish_batch``,
up to ``recordsPerEntry`` records (and ``MAX_ENTRY_BYTES``) per entry; a row without a
topic (no ``topic`` column and no option, or a null topic) is written as one raw entry
holding its ``value``.

Exactly once: every entry's request id is derived from (write id, batch id, partition,
chunk number), so a retried task, or a micro-batch replayed after a restart, sends the
same ids, and raftlog answers a known request id with the index it already has instead of
appending again (PROTOCOL §3). Request ids carry a timestamp that the leader checks
(``raftlog.ids``), the *anchor*: for a batch write, the job's start; for a stream, kept
per query and batch in the cluster itself (:mod:`raftlog_spark.anchors`), so it does not
depend on the checkpoint's file system; the write id of a stream is its query id, which
Spark keeps in the checkpoint. This needs what Spark's own idempotent sinks need: a task
that is retried must see the same rows in the same order (true for a source read like
raftlog's, Parquet, or Kafka's; not after a non-deterministic shuffle).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from raftlog.security.settings import CurveClient
from raftlog.topics.records import Record, check_topic_name
from raftlog_spark.anchors import AnchorStore
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.logclient import LogClient
from raftlog_spark.options import DEFAULT_TIMEOUT, load_curve, parse_options

DEFAULT_RECORDS_PER_ENTRY: Final = 500
MAX_ENTRY_BYTES: Final = 4 * 1024 * 1024
SINK_OPTIONS: Final = ("topic", "recordsPerEntry", "checkpointLocation", "path")


@dataclass(frozen=True, slots=True)
class SinkOptions:
    peers: tuple[str, ...]
    ident: str
    timeout: float = DEFAULT_TIMEOUT
    topic: str | None = None
    records_per_entry: int = DEFAULT_RECORDS_PER_ENTRY
    checkpoint: str | None = None
    key_file: str | None = None
    server_key_file: str | None = None

    def curve(self) -> CurveClient | None:
        """CURVE keys for a secure cluster, read where the task runs (see SourceOptions)."""
        return load_curve(self.key_file, self.server_key_file)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """peers, ident, timeout (as for reads), ``topic``, ``recordsPerEntry``."""
    own = {
        k.lower(): v for k, v in options.items() if k.lower() in {o.lower() for o in SINK_OPTIONS}
    }
    rest = {k: v for k, v in options.items() if k.lower() not in own}
    shared = ("peers", "ident", "timeout", "keyfile", "serverkeyfile")
    common = parse_options({k: v for k, v in rest.items() if k.lower() in shared})
    unknown = [k for k in rest if k.lower() not in shared]
    if unknown:
        raise RaftlogSourceError(
            f"raftlog sink: unknown option(s) {', '.join(sorted(unknown))}; the sink takes "
            "peers, ident, timeout, keyFile, serverKeyFile, topic, recordsPerEntry"
        )
    topic = own.get("topic")
    if topic is not None:
        try:
            check_topic_name(topic)
        except ValueError as exc:
            raise RaftlogSourceError(f"raftlog sink: option topic={topic!r}: {exc}") from None
    per = own.get("recordsperentry", str(DEFAULT_RECORDS_PER_ENTRY))
    if not per.strip().isdigit() or int(per) < 1:
        raise RaftlogSourceError(f"raftlog sink: recordsPerEntry={per!r} must be >= 1")
    return SinkOptions(
        common.peers,
        common.ident,
        common.timeout,
        topic,
        int(per),
        own.get("checkpointlocation"),
        common.key_file,
        common.server_key_file,
    )


def check_columns(schema: StructType, opts: SinkOptions) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise RaftlogSourceError(
            "raftlog sink: the DataFrame needs a value column (binary or string); optional: "
            f"topic, key, headers (got {', '.join(schema.fieldNames())})"
        )
    extra = names - {"topic", "key", "value", "headers"}
    if extra:
        raise RaftlogSourceError(
            f"raftlog sink: unexpected column(s) {', '.join(sorted(extra))}: select topic, "
            "key, value, headers"
        )


def request_id(anchor: int, write_id: str, batch: int, partition: int, chunk: int) -> bytes:
    """12 bytes: the anchor time (seconds, checked by the leader), then a digest of where
    the entry comes from -- the same on every retry of the same chunk."""
    digest = hashlib.blake2b(
        f"{write_id}/{batch}/{partition}/{chunk}".encode(), digest_size=8
    ).digest()
    return (anchor & 0xFFFFFFFF).to_bytes(4, "big") + digest


@dataclass(frozen=True, slots=True)
class SinkCommit(WriterCommitMessage):
    """What one task wrote (counted on the driver)."""

    partition: int
    rows: int
    entries: int


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _chunks(batches: Iterator[pa.RecordBatch], opts: SinkOptions) -> Iterator[list[Record] | bytes]:
    """Entries to write, in input order: record lists (one publish_batch each) or raw data."""
    pending: list[Record] = []
    size = 0
    now_ms = int(time.time() * 1000)
    for batch in batches:
        columns = batch.to_pydict()
        values = columns["value"]
        topics = columns.get("topic") or [opts.topic] * len(values)
        keys = columns.get("key") or [None] * len(values)
        headers = columns.get("headers") or [None] * len(values)
        for given, key, value, header in zip(topics, keys, values, headers, strict=True):
            data = _bytes(value)
            if data is None:
                raise RaftlogSourceError("raftlog sink: value must not be null")
            topic = given if given is not None else opts.topic
            if topic is None:
                if pending:
                    yield pending
                    pending, size = [], 0
                yield data
                continue
            pairs = header.items() if isinstance(header, dict) else (header or [])
            record = Record(
                topic, data, _bytes(key), {k: _bytes(v) or b"" for k, v in pairs}, now_ms
            )
            if pending and (
                len(pending) >= opts.records_per_entry or size + record.size > MAX_ENTRY_BYTES
            ):
                yield pending
                pending, size = [], 0
            pending.append(record)
            size += record.size
    if pending:
        yield pending


def write_partition(
    opts: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    anchor: int | None,
    write_id: str,
    batch: int,
) -> SinkCommit:
    """Write one task's rows, every entry with its derived request id (``anchor`` None: a
    stream's, from the cluster's anchor records, :mod:`raftlog_spark.anchors`)."""
    from pyspark import TaskContext  # noqa: PLC0415 - only inside tasks

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    with LogClient(opts.peers, opts.ident, opts.timeout, opts.curve()) as client:
        fixed = AnchorStore(client).anchor(write_id, batch) if anchor is None else anchor
        items = (
            (request_id(fixed, write_id, batch, partition, chunk), item)
            for chunk, item in enumerate(_chunks(batches, opts))
        )
        rows, entries = client.publish_all(items)
    return SinkCommit(partition, rows, entries)


class RaftlogWriter(DataSourceArrowWriter):
    """Batch writes: one write id and anchor per job (fixed on the driver)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_columns(schema, opts)
        self.opts = opts
        self.write_id = uuid.uuid4().hex
        self.anchor = int(time.time())

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_partition(self.opts, iterator, self.anchor, self.write_id, 0)


class RaftlogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes: request ids from (query, micro-batch id, partition, chunk), anchored
    by the cluster's anchor records (:mod:`raftlog_spark.anchors`), so a replay after a
    restart matches whatever the checkpoint location is (local, HDFS, S3)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_columns(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from pyspark import TaskContext  # noqa: PLC0415 - only inside tasks

        context = TaskContext.get()
        query = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        if not query or batch is None:
            raise RaftlogSourceError(
                "raftlog sink: a streaming write outside a streaming query (no query or "
                "batch id in the task)"
            )
        return write_partition(self.opts, iterator, None, query, int(batch))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to finish: every entry was committed by raftlog when its task wrote it."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Entries already written stay; the replayed batch finds them by request id."""
