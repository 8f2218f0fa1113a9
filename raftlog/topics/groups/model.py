"""Consumer groups' public values (issue #27): what a group is, where a stream group stands.

A *group* is a named consumer whose progress the cluster remembers, replicated in the log
and applied by the topic state machine, so every peer holds the same group state at the
same applied index (``raftlog.topics.groups.table``). Two modes:

* ``stream`` (a Kafka consumer group, a JetStream durable): one committed position per
  topic -- the id of the next record to deliver. Members commit it; a member that starts
  (or restarts, or replaces a failed one) resumes there.
* ``queue`` (a JetStream pull consumer, a Kafka share group): records are *leased* to
  members; a member acks (done), nacks (redeliver now) or lets the lease time out
  (redelivered); a record delivered ``max_deliveries`` times without an ack goes to the
  dead-letter topic (``raftlog.topics.groups.deadletter``).

The values here are frozen dataclasses: the contract other parts (the Kafka listener, the
Spark source) code against.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias

from raftlog.errors import TopicError
from raftlog.topics.records import TOPIC_NAME_RE, RecordId

GroupMode: TypeAlias = Literal["stream", "queue"]
GROUP_MODES: Final = ("stream", "queue")
GROUP_NAME_RE: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MEMBER_RE: Final = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")
PATTERN_RE: Final = re.compile(r"[A-Za-z0-9._*?\[\]!-]{1,249}")
MAX_METADATA: Final = 4096
"""Largest commit metadata in UTF-8 bytes (it is stored in every snapshot)."""
MAX_GROUP_TOPICS: Final = 256
DEFAULT_ACK_WAIT_MS: Final = 30_000
DEFAULT_MAX_DELIVERIES: Final = 5
DEFAULT_MAX_IN_FLIGHT: Final = 1000
MAX_ACK_WAIT_MS: Final = 24 * 3600 * 1000
MAX_DELIVERIES_LIMIT: Final = 1000
MAX_IN_FLIGHT_LIMIT: Final = 100_000
MAX_LEASE_BATCH: Final = 1000
"""Most records one lease command hands out (it is one log entry)."""


@dataclass(frozen=True, slots=True)
class GroupPosition:
    """Where a stream group stands on one topic: ``next_record`` is the id of the next record
    to deliver (every record before it is consumed); ``metadata`` is the committer's note
    (Kafka's offset metadata); ``committed_at_ms`` the log clock of the commit."""

    next_record: RecordId
    metadata: str = ""
    committed_at_ms: int = 0
    member: str | None = None
    """Who committed it (None: not said)."""


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """A queue group's delivery rules (every value checked by ``check_options``)."""

    ack_wait_ms: int = DEFAULT_ACK_WAIT_MS
    """How long a lease lasts by the log clock before the record is redelivered."""
    max_deliveries: int = DEFAULT_MAX_DELIVERIES
    """Deliveries without an ack after which the record is dead-lettered."""
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    """Most records leased to one member at a time."""
    dead_letter: str | None = None
    """The topic dead records go to (None: they are dropped, counted as dead-lettered)."""


@dataclass(frozen=True, slots=True)
class QueueTopicStats:
    """A queue group's standing on one topic."""

    cursor: RecordId
    """The first record never delivered yet."""
    pending: int
    """Records leased now (delivered, not yet acked)."""
    redeliver: int
    """Records waiting for redelivery (nacked or lease expired)."""


@dataclass(frozen=True, slots=True)
class GroupStats:
    """Counters of a group since its creation (replicated: the same on every peer)."""

    delivered: int = 0
    acked: int = 0
    redelivered: int = 0
    dead_lettered: int = 0


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group as every peer knows it (``describe_group``)."""

    name: str
    mode: GroupMode
    topics: tuple[str, ...]
    pattern: str | None
    created_index: int
    options: QueueOptions
    positions: dict[str, GroupPosition] = field(default_factory=dict)
    """Stream mode: the committed position per topic (topics never committed are absent)."""
    queue: dict[str, QueueTopicStats] = field(default_factory=dict)
    """Queue mode: the standing per topic."""
    members: dict[str, int] = field(default_factory=dict)
    """Queue mode: records leased now, per member."""
    stats: GroupStats = field(default_factory=GroupStats)
    applied: int = 0
    owners: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Stream mode: topic -> (member, claimed until on the log clock): the one active
    member per topic (``raftlog.topics.groups.claims``)."""
    """The answering peer's applied index."""

    @property
    def pending(self) -> int:
        """Records delivered and not yet acked (queue mode)."""
        return sum(s.pending for s in self.queue.values())


def check_group_name(name: object) -> str:
    """A group name: 1-128 of ``A-Z a-z 0-9 . _ : -``."""
    if not isinstance(name, str) or not GROUP_NAME_RE.fullmatch(name):
        raise TopicError(
            "InvalidGroupName",
            f"invalid group name {repr(name)[:80]}: use 1-128 characters of A-Z a-z 0-9 . _ : -",
        )
    return name


def check_member(member: object) -> str:
    """A member name: 1-128 of ``A-Z a-z 0-9 . _ : @ / -``."""
    if not isinstance(member, str) or not MEMBER_RE.fullmatch(member):
        raise TopicError(
            "InvalidGroupMember",
            f"invalid member name {repr(member)[:80]}: 1-128 of A-Z a-z 0-9 . _ : @ / -",
        )
    return member


def check_topics(topics: object, pattern: object) -> tuple[tuple[str, ...], str | None]:
    """A group's topic list and pattern (a prefix ``orders.`` plus ``*``, or any glob)."""
    if not isinstance(topics, list | tuple) or len(topics) > MAX_GROUP_TOPICS:
        raise TopicError("InvalidGroup", f"topics must be a list of at most {MAX_GROUP_TOPICS}")
    for name in topics:
        if not isinstance(name, str) or not TOPIC_NAME_RE.fullmatch(name):
            raise TopicError("InvalidTopicName", f"invalid topic name {repr(name)[:80]}")
    if pattern is not None and (not isinstance(pattern, str) or not PATTERN_RE.fullmatch(pattern)):
        raise TopicError("InvalidGroup", f"invalid topic pattern {repr(pattern)[:80]}")
    if not topics and pattern is None:
        raise TopicError("InvalidGroup", "a group names at least one topic or a pattern")
    return tuple(dict.fromkeys(topics)), pattern


def _bounded(options: dict[str, object], key: str, default: int, high: int) -> int:
    value = options.get(key, default)
    if type(value) is not int or not 1 <= value <= high:
        raise TopicError("InvalidGroup", f"{key} must be an integer in 1 .. {high}, got {value!r}")
    return value


OPTION_KEYS: Final = frozenset({"ack_wait_ms", "max_deliveries", "max_in_flight", "dead_letter"})


def check_options(options: dict[str, object]) -> QueueOptions:
    """The queue options of a create command (unknown keys are an error: a typo must not
    silently leave a default)."""
    unknown = set(options) - OPTION_KEYS
    if unknown:
        raise TopicError("InvalidGroup", f"unknown group options: {sorted(unknown)}")
    dead = options.get("dead_letter")
    if dead is not None and (not isinstance(dead, str) or not TOPIC_NAME_RE.fullmatch(dead)):
        raise TopicError("InvalidTopicName", f"invalid dead-letter topic {repr(dead)[:80]}")
    return QueueOptions(
        _bounded(options, "ack_wait_ms", DEFAULT_ACK_WAIT_MS, MAX_ACK_WAIT_MS),
        _bounded(options, "max_deliveries", DEFAULT_MAX_DELIVERIES, MAX_DELIVERIES_LIMIT),
        _bounded(options, "max_in_flight", DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT_LIMIT),
        dead,
    )


def options_map(options: QueueOptions) -> dict[str, object]:
    """The wire/JSON map of ``options`` (``dead_letter`` absent when unset)."""
    body: dict[str, object] = {
        "ack_wait_ms": options.ack_wait_ms,
        "max_deliveries": options.max_deliveries,
        "max_in_flight": options.max_in_flight,
    }
    if options.dead_letter is not None:
        body["dead_letter"] = options.dead_letter
    return body


class RecordSource(Protocol):
    """What the group table reads of the topics (``raftlog.topics.groups.host.IndexRecords``)."""

    def topic_names(self) -> Collection[str]:
        """The existing topics (a collection that answers ``in`` without a scan: the topic
        machine's keys)."""
        ...

    def sorted_topic_names(self) -> Sequence[str]:
        """The existing topics in order: the same object until a topic comes or goes."""
        ...

    def record_ids(self, topic: str, start: RecordId, limit: int) -> list[RecordId]:
        """Up to ``limit`` retained record ids of ``topic`` from ``start`` on, in order."""
        ...

    def start(self, topic: str) -> RecordId:
        """The topic's first retained record id (or where the next one will be)."""
        ...

    def end(self, topic: str) -> RecordId:
        """Just past the topic's last record."""
        ...
