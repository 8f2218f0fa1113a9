"""Options of the ``raftlog`` data source: names, parsing, validation (pure functions).

Spark hands options over as a case-insensitive map of strings. Every name is checked: an
unknown one, a value of the wrong form, or a batch-only option on a stream (and the reverse)
raises :class:`RaftlogSourceError` when the DataFrame is created, naming the option.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from raftlog.errors import ConfigError
from raftlog.security import keys
from raftlog.security.settings import CurveClient
from raftlog.topics.records import check_topic_name
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.kafka_options import (
    Isolation,
    parse_assign,
    parse_by_timestamp,
    parse_isolation,
)
from raftlog_spark.option_values import (
    option_error,
    parse_bool,
    parse_consistency,
    parse_duration,
    parse_int,
    parse_offset,
    parse_timestamp_ms,
)

Mode = Literal["any", "batch", "stream"]

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_RECORDS_PER_PARTITION: Final = 200_000
DEFAULT_ROWS_PER_BATCH: Final = 10_000

COMMON: Final = (
    "peers",
    "ident",
    "topics",
    "topicPattern",
    "numPartitions",
    "entriesPerPartition",
    "recordsPerPartition",
    "timeout",
    "failOnDataLoss",
    "rowsPerBatch",
    "includeHeaders",
    "startingOffsets",
    "startingTimestamp",
    "keyFile",
    "serverKeyFile",
    "consistency",
    "assign",
    "minPartitions",
    "startingOffsetsByTimestamp",
    "isolation.level",
    "groupId",
)
BATCH_ONLY: Final = (
    "startingIndex",
    "endingIndex",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "pushFilters",
)
STREAM_ONLY: Final = (
    "maxEntriesPerTrigger",
    "maxRecordsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
)
ALIASES: Final = {
    "subscribe": "topics",
    "subscribepattern": "topicPattern",
    "maxoffsetspertrigger": "maxRecordsPerTrigger",
    "kafka.isolation.level": "isolation.level",
    "kafka.group.id": "groupId",
}
"""Spark Kafka source names accepted for the same concept (see the README's table)."""
KNOWN: Final = {name.lower(): name for name in (*COMMON, *BATCH_ONLY, *STREAM_ONLY)}
DEFAULT_MAX_TRIGGER_DELAY_S: Final = 15 * 60.0

_URL = re.compile(r"(tcp://[^\s,:/]+:\d{1,5}|ipc://\S+|inproc://\S+)")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    peers: tuple[str, ...]
    ident: str
    topics: frozenset[str] | None = None
    """Only records of these topics (raw entries excluded); None: every row."""
    topic_pattern: str | None = None
    """Only records of topics whose whole name matches this regular expression."""
    starting_index: int | None = None
    ending_index: int | None = None
    starting_timestamp_ms: int | None = None
    ending_timestamp_ms: int | None = None
    num_partitions: int | None = None
    entries_per_partition: int | None = None
    records_per_partition: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    fail_on_data_loss: bool = True
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH
    include_headers: bool = True
    push_filters: bool = False
    """Narrow reads by Spark's pushed filters (opt-in: see README, "Filter pushdown")."""
    starting_offsets: str | None = None
    """``earliest``, ``latest`` (streams only) or the first index to read (as a string)."""
    max_entries_per_trigger: int | None = None
    max_records_per_trigger: int | None = None
    min_records_per_trigger: int | None = None
    max_trigger_delay_s: float = DEFAULT_MAX_TRIGGER_DELAY_S
    given: frozenset[str] = frozenset()
    """Canonical names of the options that were set (for mode checks)."""
    key_file: str | None = None
    """CURVE: this client's ``.key_secret`` file (the same path on every executor)."""
    server_key_file: str | None = None
    consistency: str = "any"
    """``linearizable``: the planned end covers every write acknowledged before planning
    (the leader's read index, ``RI``); ``any``: the leader's applied index (issue #29)."""
    """CURVE: the cluster's server ``.key`` (public) file."""
    min_partitions: int | None = None
    """At least this many tasks (Kafka's ``minPartitions``), of equal rows."""
    group_id: str | None = None
    """A stream group to start at: a new streaming query (which commits each micro-batch
    to it) or a batch read (which never commits, like the Kafka source's)."""
    group_start: int | None = None
    """A batch read's first index from the group's position, pinned at ``load()``
    (None: the group has none; the starting options apply)."""
    isolation: Isolation = "read_committed"
    """``read_uncommitted``: transactional records at their store entry, whatever becomes
    of the transaction (open, committed or rolled back); commits then give no rows."""

    def curve(self) -> CurveClient | None:
        """The CURVE keys for a secure cluster, read where the client runs (driver or
        executor: a secret never travels inside Spark's plan); None for plaintext."""
        return load_curve(self.key_file, self.server_key_file)

    def check_mode(self, mode: Mode) -> SourceOptions:
        """Refuse options that do not apply to a batch read or to a stream."""
        wrong = BATCH_ONLY if mode == "stream" else STREAM_ONLY if mode == "batch" else ()
        bad = [name for name in wrong if name in self.given]
        if bad:
            other = "batch reads (spark.read)" if mode == "stream" else "streams (readStream)"
            raise RaftlogSourceError(
                f"raftlog source: option {', '.join(bad)} applies to {other} only"
            )
        if mode == "batch" and self.starting_offsets == "latest":
            raise option_error(
                "startingOffsets",
                "latest",
                'a batch read starts at earliest, an index N >= 0, or {"index": N} (latest is '
                "for streams; a batch read ends at latest by default)",
            )
        return self

    @property
    def topic_filtered(self) -> bool:
        return self.topics is not None or self.topic_pattern is not None


def parse_options(options: Mapping[str, str], mode: Mode = "any") -> SourceOptions:
    """Validate Spark's option map; raise :class:`RaftlogSourceError` naming the culprit."""
    values: dict[str, str] = {}
    for key, value in options.items():
        canonical = KNOWN.get(key.lower()) or ALIASES.get(key.lower())
        if canonical is None:
            close = difflib.get_close_matches(key.lower(), KNOWN, n=1)
            hint = f" (did you mean {KNOWN[close[0]]}?)" if close else ""
            known = ", ".join(sorted(KNOWN.values(), key=str.lower))
            raise RaftlogSourceError(
                f"raftlog source: unknown option {key!r}{hint}; known options: {known}"
            )
        if canonical in values:
            raise RaftlogSourceError(
                f"raftlog source: option {key!r} repeats {canonical} (an alias of it was set)"
            )
        values[canonical] = "" if value is None else str(value)

    if "peers" not in values or not values["peers"].strip():
        raise RaftlogSourceError(
            "raftlog source: option peers is required: comma-separated peer URLs, "
            "e.g. tcp://10.0.0.1:8047,tcp://10.0.0.2:8047"
        )
    peers = tuple(p.strip() for p in values["peers"].split(",") if p.strip())
    for url in peers:
        if not _URL.fullmatch(url):
            raise option_error("peers", values["peers"], f"{url!r} is not a peer URL like tcp://host:port")
    ident = values.get("ident", "")
    if not ident:
        raise RaftlogSourceError(
            "raftlog source: option ident is required: the cluster ident of the peers "
            "(the [cluster] ident of their cluster file)"
        )

    topics: frozenset[str] | None = None
    if "assign" in values:
        if "topics" in values or "topicPattern" in values:
            raise RaftlogSourceError(
                "raftlog source: set one of topics (subscribe), topicPattern "
                "(subscribePattern) and assign"
            )
        topics = parse_assign(values["assign"])
    if "topics" in values:
        names = [t.strip() for t in values["topics"].split(",") if t.strip()]
        if not names:
            raise option_error("topics", values["topics"], "name at least one topic")
        for topic in names:
            try:
                check_topic_name(topic)
            except ValueError as exc:
                raise option_error("topics", values["topics"], str(exc)) from None
        topics = frozenset(names)

    def opt_int(name: str, minimum: int) -> int | None:
        return parse_int(name, values[name], minimum) if name in values else None

    def opt_time(name: str) -> int | None:
        return parse_timestamp_ms(name, values[name]) if name in values else None

    def opt_bool(name: str, default: bool) -> bool:
        return parse_bool(name, values[name]) if name in values else default

    num_partitions = opt_int("numPartitions", 1)
    entries_per_partition = opt_int("entriesPerPartition", 1)
    records_per_partition = opt_int("recordsPerPartition", 1)
    sizing = [
        n
        for n in ("numPartitions", "entriesPerPartition", "recordsPerPartition", "minPartitions")
        if n in values
    ]
    if len(sizing) > 1:
        raise RaftlogSourceError(
            f"raftlog source: set one of numPartitions, entriesPerPartition, "
            f"recordsPerPartition, minPartitions, not both ({', '.join(sizing)})"
        )
    timeout = DEFAULT_TIMEOUT
    if "timeout" in values:
        try:
            timeout = float(values["timeout"])
        except ValueError:
            rule = "must be a number of seconds"
            raise option_error("timeout", values["timeout"], rule) from None
        if not timeout > 0:
            raise option_error("timeout", values["timeout"], "must be > 0 seconds")

    pattern = values.get("topicPattern")
    if pattern is not None:
        if "topics" in values:
            raise RaftlogSourceError(
                "raftlog source: set topics (subscribe) or topicPattern (subscribePattern), "
                "not both"
            )
        try:
            re.compile(pattern)
        except re.error as exc:
            rule = f"not a regular expression: {exc}"
            raise option_error("topicPattern", pattern, rule) from None

    starting: str | None = None
    if "startingOffsets" in values:
        starting = values["startingOffsets"].strip().lower()
        if starting not in ("earliest", "latest"):
            starting = str(parse_offset("startingOffsets", values["startingOffsets"]))
    ending_index = opt_int("endingIndex", 0)
    if "endingOffsets" in values:
        if ending_index is not None:
            raise RaftlogSourceError(
                "raftlog source: endingOffsets is an alias of endingIndex: set one of them"
            )
        text = values["endingOffsets"].strip().lower()
        if text != "latest":
            ending_index = parse_offset("endingOffsets", values["endingOffsets"])
    if "startingIndex" in values and starting is not None:
        raise RaftlogSourceError(
            "raftlog source: startingOffsets is an alias of startingIndex in batch reads: "
            "set one of them"
        )
    starting_index = opt_int("startingIndex", 0)
    if starting is not None and starting not in ("earliest", "latest"):
        starting_index = starting_index if starting_index is not None else int(starting)
    starts = ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
    if sum(name in values for name in starts) > 1:
        raise RaftlogSourceError(
            f"raftlog source: set one of {', '.join(starts)}, not several"
        )
    if "endingTimestamp" in values and "endingOffsetsByTimestamp" in values:
        raise RaftlogSourceError(
            "raftlog source: set endingTimestamp or endingOffsetsByTimestamp, not both"
        )
    starting_ms = opt_time("startingTimestamp")
    ending_ms = opt_time("endingTimestamp")
    for name in ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp"):
        if name in values:
            named, ms = parse_by_timestamp(name, values[name])
            if topics is not None and named != topics:
                raise RaftlogSourceError(
                    f"raftlog source: {name} must name exactly the topics of the read "
                    f"({', '.join(sorted(topics))})"
                )
            if name.startswith("starting"):
                starting_ms = ms
            else:
                ending_ms = ms

    parsed = SourceOptions(
        peers=peers,
        ident=ident,
        topics=topics,
        topic_pattern=pattern,
        starting_index=starting_index,
        ending_index=ending_index,
        starting_timestamp_ms=starting_ms,
        ending_timestamp_ms=ending_ms,
        num_partitions=num_partitions,
        entries_per_partition=entries_per_partition,
        records_per_partition=records_per_partition,
        timeout=timeout,
        fail_on_data_loss=opt_bool("failOnDataLoss", True),
        rows_per_batch=opt_int("rowsPerBatch", 1) or DEFAULT_ROWS_PER_BATCH,
        include_headers=opt_bool("includeHeaders", True),
        push_filters=opt_bool("pushFilters", False),
        starting_offsets=starting,
        max_entries_per_trigger=opt_int("maxEntriesPerTrigger", 1),
        max_records_per_trigger=opt_int("maxRecordsPerTrigger", 1),
        min_records_per_trigger=opt_int("minOffsetsPerTrigger", 1),
        max_trigger_delay_s=parse_duration("maxTriggerDelay", values["maxTriggerDelay"])
        if "maxTriggerDelay" in values
        else DEFAULT_MAX_TRIGGER_DELAY_S,
        given=frozenset(values),
        key_file=values.get("keyFile"),
        server_key_file=values.get("serverKeyFile"),
        consistency=parse_consistency(values.get("consistency", "any")),
        min_partitions=opt_int("minPartitions", 1),
        group_id=values.get("groupId"),
        isolation=parse_isolation(values.get("isolation.level", "read_committed")),
    )
    if parsed.group_id is not None and (not parsed.group_id.strip() or topics is None):
        raise RaftlogSourceError(
            "raftlog source: groupId needs a group name and the topics it reads: set topics "
            "(subscribe) or assign (a stream group's position is kept per topic)"
        )
    if (parsed.key_file is None) != (parsed.server_key_file is None):
        raise RaftlogSourceError(
            "raftlog source: a secure cluster needs both keyFile (this client's .key_secret) "
            "and serverKeyFile (the cluster's server .key)"
        )
    if (
        parsed.starting_index is not None
        and parsed.ending_index is not None
        and parsed.ending_index < parsed.starting_index
    ):
        raise RaftlogSourceError(
            f"raftlog source: endingIndex {parsed.ending_index} is below startingIndex "
            f"{parsed.starting_index}"
        )
    if (
        parsed.starting_timestamp_ms is not None
        and parsed.ending_timestamp_ms is not None
        and parsed.ending_timestamp_ms < parsed.starting_timestamp_ms
    ):
        raise RaftlogSourceError("raftlog source: endingTimestamp is before startingTimestamp")
    return parsed.check_mode(mode)


def load_curve(key_file: str | None, server_key_file: str | None) -> CurveClient | None:
    """CURVE client keys from the two key files; a one-line error naming a bad file."""
    if key_file is None or server_key_file is None:
        return None
    try:
        pair = keys.load(key_file)
        secret = pair.require_secret(f"keyFile {key_file}")
        return CurveClient(pair.public, secret, keys.load(server_key_file).public)
    except ConfigError as exc:
        raise RaftlogSourceError(f"raftlog source: {exc}") from None
