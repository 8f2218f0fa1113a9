"""Options of the ``raftlog`` data source: names, parsing, validation (pure functions).

Spark hands options over as a case-insensitive map of strings. Every name is checked: an
unknown one, a value of the wrong form, or a batch-only option on a stream (and the reverse)
raises :class:`RaftlogSourceError` when the DataFrame is created, naming the option.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from raftlog.records import check_topic_name
from raftlog_spark.errors import RaftlogSourceError

Mode = Literal["any", "batch", "stream"]

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_ENTRIES_PER_PARTITION: Final = 10_000
DEFAULT_ROWS_PER_BATCH: Final = 10_000

COMMON: Final = (
    "peers",
    "ident",
    "topics",
    "numPartitions",
    "entriesPerPartition",
    "timeout",
    "failOnDataLoss",
    "rowsPerBatch",
)
BATCH_ONLY: Final = ("startingIndex", "endingIndex", "startingTimestamp", "endingTimestamp")
STREAM_ONLY: Final = ("startingOffsets", "maxEntriesPerTrigger")
KNOWN: Final = {name.lower(): name for name in (*COMMON, *BATCH_ONLY, *STREAM_ONLY)}

_URL = re.compile(r"(tcp://[^\s,:/]+:\d{1,5}|ipc://\S+|inproc://\S+)")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    peers: tuple[str, ...]
    ident: str
    topics: frozenset[str] | None = None
    """Only records of these topics (raw entries excluded); None: every row."""
    starting_index: int | None = None
    ending_index: int | None = None
    starting_timestamp_ms: int | None = None
    ending_timestamp_ms: int | None = None
    num_partitions: int | None = None
    entries_per_partition: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    fail_on_data_loss: bool = True
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH
    starting_offsets: str = "latest"
    """Streams: ``earliest``, ``latest`` or the first index to read (as a string)."""
    max_entries_per_trigger: int | None = None
    given: frozenset[str] = frozenset()
    """Canonical names of the options that were set (for mode checks)."""

    def check_mode(self, mode: Mode) -> SourceOptions:
        """Refuse options that do not apply to a batch read or to a stream."""
        wrong = BATCH_ONLY if mode == "stream" else STREAM_ONLY if mode == "batch" else ()
        bad = [name for name in wrong if name in self.given]
        if bad:
            other = "batch reads (spark.read)" if mode == "stream" else "streams (readStream)"
            raise RaftlogSourceError(
                f"raftlog source: option {', '.join(bad)} applies to {other} only"
            )
        return self


def _fail(name: str, value: str, rule: str) -> RaftlogSourceError:
    return RaftlogSourceError(f"raftlog source: option {name}={value!r} is invalid: {rule}")


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise _fail(name, value, "must be an integer") from None
    if number < minimum:
        raise _fail(name, value, f"must be >= {minimum}")
    return number


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise _fail(name, value, "must be true or false")


def parse_timestamp_ms(name: str, value: str) -> int:
    """Milliseconds since the epoch, from an integer (ms) or an ISO-8601 time (naive = UTC)."""
    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        number = int(text)
        if number < 0:
            raise _fail(name, value, "must not be negative")
        return number
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise _fail(
            name, value, "must be milliseconds since the epoch or an ISO-8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def parse_options(options: Mapping[str, str], mode: Mode = "any") -> SourceOptions:
    """Validate Spark's option map; raise :class:`RaftlogSourceError` naming the culprit."""
    values: dict[str, str] = {}
    for key, value in options.items():
        canonical = KNOWN.get(key.lower())
        if canonical is None:
            close = difflib.get_close_matches(key.lower(), KNOWN, n=1)
            hint = f" (did you mean {KNOWN[close[0]]}?)" if close else ""
            known = ", ".join(sorted(KNOWN.values(), key=str.lower))
            raise RaftlogSourceError(
                f"raftlog source: unknown option {key!r}{hint}; known options: {known}"
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
            raise _fail("peers", values["peers"], f"{url!r} is not a peer URL like tcp://host:port")
    ident = values.get("ident", "")
    if not ident:
        raise RaftlogSourceError(
            "raftlog source: option ident is required: the cluster ident of the peers "
            "(the [cluster] ident of their cluster file)"
        )

    topics: frozenset[str] | None = None
    if "topics" in values:
        names = [t.strip() for t in values["topics"].split(",") if t.strip()]
        if not names:
            raise _fail("topics", values["topics"], "name at least one topic")
        for topic in names:
            try:
                check_topic_name(topic)
            except ValueError as exc:
                raise _fail("topics", values["topics"], str(exc)) from None
        topics = frozenset(names)

    def opt_int(name: str, minimum: int) -> int | None:
        return _int(name, values[name], minimum) if name in values else None

    def opt_time(name: str) -> int | None:
        return parse_timestamp_ms(name, values[name]) if name in values else None

    num_partitions = opt_int("numPartitions", 1)
    entries_per_partition = opt_int("entriesPerPartition", 1)
    if num_partitions is not None and entries_per_partition is not None:
        raise RaftlogSourceError(
            "raftlog source: set numPartitions or entriesPerPartition, not both"
        )
    timeout = DEFAULT_TIMEOUT
    if "timeout" in values:
        try:
            timeout = float(values["timeout"])
        except ValueError:
            raise _fail("timeout", values["timeout"], "must be a number of seconds") from None
        if not timeout > 0:
            raise _fail("timeout", values["timeout"], "must be > 0 seconds")

    starting = values.get("startingOffsets", "latest").strip().lower()
    if starting not in ("earliest", "latest"):
        starting = str(_int("startingOffsets", starting, 1))

    parsed = SourceOptions(
        peers=peers,
        ident=ident,
        topics=topics,
        starting_index=opt_int("startingIndex", 0),
        ending_index=opt_int("endingIndex", 0),
        starting_timestamp_ms=opt_time("startingTimestamp"),
        ending_timestamp_ms=opt_time("endingTimestamp"),
        num_partitions=num_partitions,
        entries_per_partition=entries_per_partition,
        timeout=timeout,
        fail_on_data_loss=_bool("failOnDataLoss", values["failOnDataLoss"])
        if "failOnDataLoss" in values
        else True,
        rows_per_batch=opt_int("rowsPerBatch", 1) or DEFAULT_ROWS_PER_BATCH,
        starting_offsets=starting,
        max_entries_per_trigger=opt_int("maxEntriesPerTrigger", 1),
        given=frozenset(values),
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
