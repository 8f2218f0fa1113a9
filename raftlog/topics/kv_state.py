"""What the topic machine keeps for conditional publishes and compacted topics (issue #29).

``KeyValueState`` bundles the two things a record batch's apply needs beyond the record
index: every topic's last record id (what a topic-level expectation compares with; cached,
since an apply call's own batch is not readable) and the compacted topics' latest record
per key (``raftlog.topics.compacted``). ``raftlog.topics.machine`` calls it at three points:
before a batch applies (``refusal``), after it is indexed (``indexed``), and when a topic is
dropped; the ``KG``/``KK`` answers read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from rocksdict import WriteBatch

from raftlog.errors import ExpectationFailedError, TopicError
from raftlog.topics.compacted import CompactedStore
from raftlog.topics.index import TopicIndex
from raftlog.topics.records import LoggedRecord, Record, RecordBatch, RecordId
from raftlog.topics.records_kv import Expectation
from raftlog.topics.state import TopicState

STATS_INTERVAL: Final = 10.0
"""Seconds at least between recounts of one compacted topic's live keys and bytes."""
STATS_KEYS_PER_PASS: Final = 2_000
"""Keys counted per second at most (~30 ms of the loop): a topic of a million keys is
counted again every ~8 minutes."""


class KeyValueState:
    """Last record ids per topic and the compacted topics' keys (module docstring)."""

    def __init__(self, index: TopicIndex) -> None:
        self._index = index
        self.store = CompactedStore(index)
        self._last: dict[str, tuple[int, int] | None] = {}
        """Per topic its last record's ``(index, position)`` (a tuple: set on every apply)."""
        self.is_leader = False
        """The machine's role (``KG``/``KK`` answers say whether the leader answered)."""
        self.stats: tuple[tuple[str, int, int], ...] = ()
        """``(topic, live keys, live bytes)`` of every compacted topic as of the last
        ``refresh_stats`` (the ``raftlog_kv_*`` metrics)."""
        self._counts: dict[str, tuple[int, int]] = {}
        self._partial: dict[str, tuple[int, int, bytes]] = {}
        """Counts in progress: keys and bytes so far, the last pointer key read."""
        self._due: dict[str, float] = {}
        """When each topic is next counted (absent: now)."""

    def begin(self) -> None:
        """A new apply call (a new write batch)."""
        self.store.begin()

    def reset(self) -> None:
        """A snapshot replaced everything: forget the caches."""
        self._last.clear()
        self._partial.clear()
        self._due.clear()
        self.store.begin()

    def last_id(self, topic: str, state: TopicState) -> RecordId | None:
        """The id of the last record published to this incarnation of ``topic`` (whatever
        retention or compaction removed since; None: none yet)."""
        if topic in self._last:
            cached = self._last[topic]
            return None if cached is None else RecordId(*cached)
        entry = next(self._index.entries_before(topic, 1 << 63), None)
        last = None
        if entry is not None and entry.index >= state.created_index:
            last = RecordId(entry.index, entry.positions[-1])
        elif state.low_water.position > 0 and state.low_water.index >= state.created_index:
            # restored from a snapshot: its low-water is just past the last record before it
            last = RecordId(state.low_water.index, state.low_water.position - 1)
        self._last[topic] = None if last is None else (last.index, last.position)
        return last

    def refusal(
        self, entry: RecordBatch, topics: Mapping[str, TopicState], clock_ms: int
    ) -> TopicError | None:
        """Why a conditional batch must be refused now (``raftlog.topics.records_kv``)."""
        for e in entry.expect:
            state = topics.get(e.topic)
            if state is None:
                return TopicError("UnknownTopic", f"expectation on a missing topic {e.topic!r}")
            if e.key is None:
                current = self.last_id(e.topic, state)
            elif not state.properties.compacted:
                return TopicError(
                    "KeyExpectationUnsupported",
                    f"a per-key expectation needs a compacted topic; {e.topic!r} has "
                    f"cleanup_policy={state.properties.cleanup_policy or 'delete'}",
                )
            else:
                current = self.store.current(e.topic, e.key, state.properties, clock_ms)
            if current != e.last:
                return _failed(e, current)
        return None

    def indexed(  # noqa: PLR0917 -- the machine's one call per record entry
        self,
        batch: WriteBatch,
        index: int,
        by_topic: Mapping[str, tuple[list[int], int]],
        topics: Mapping[str, TopicState],
        clock_ms: int,
        records: Sequence[Record] | None,
    ) -> None:
        """Entry ``index`` was indexed: its topics' last ids move, and its records of
        compacted topics become their keys' latest (``records`` None: a plain batch of
        topics that are not compacted, the machine's fast path)."""
        last = self._last
        for name, (positions, _) in by_topic.items():
            last[name] = (index, positions[-1])
            if records is None:
                continue
            state = topics.get(name)
            if state is not None and state.properties.compacted:
                for position in positions:
                    self.store.put(
                        batch, name, RecordId(index, position), clock_ms, records[position]
                    )

    def refresh_stats(self, topics: Mapping[str, TopicState], clock_ms: int, now: float) -> None:
        """Count the compacted topics' live keys and bytes on (called once a second): at
        most ``STATS_KEYS_PER_PASS`` keys per call, each topic's count resumed where the
        last call stopped and published in :attr:`stats` when complete; a topic is counted
        again at most every ``STATS_INTERVAL`` seconds. Counting every key in one pass took
        2.9 s of the loop for 200,000 keys, every ten seconds."""
        compacted = {n: s for n, s in topics.items() if s.properties.compacted}
        counts = {n: c for n, c in self._counts.items() if n in compacted}
        left = STATS_KEYS_PER_PASS
        for name in sorted(compacted, key=lambda n: self._due.get(n, 0.0)):
            if left <= 0 or self._due.get(name, 0.0) > now:
                break
            keys, size, after = self._partial.get(name, (0, 0, None))
            more_keys, more_size, read, after = self.store.stats_slice(
                name, compacted[name].properties, clock_ms, after, left
            )
            left -= max(read, 1)
            if after is None:  # complete
                counts[name] = (keys + more_keys, size + more_size)
                self._partial.pop(name, None)
                self._due[name] = now + STATS_INTERVAL
            else:
                self._partial[name] = (keys + more_keys, size + more_size, after)
        self._counts = counts
        for gone in [n for n in self._due if n not in compacted]:
            self._due.pop(gone)
            self._partial.pop(gone, None)
        self.stats = tuple((n, *counts[n]) for n in sorted(counts))

    def dropped(self, batch: WriteBatch, topic: str) -> None:
        """``topic`` was deleted or (re-)created: no last id, no keys."""
        self._last[topic] = None
        self._partial.pop(topic, None)  # a new incarnation is counted from its first key
        self._due.pop(topic, None)
        self.store.drop_topic(batch, topic)

    # -- KG / KK ---------------------------------------------------------------------------
    def get(self, topic: str, state: TopicState, key: bytes, clock_ms: int) -> LoggedRecord | None:
        """The live record of ``key`` (``KeyNotCompacted`` unless the topic is compacted)."""
        _check_compacted(topic, state)
        return self.store.get(topic, key, state.properties, clock_ms)

    def keys(
        self,
        topic: str,
        state: TopicState,
        prefix: bytes,
        after: bytes | None,
        limit: int,
        *,
        clock_ms: int,
    ) -> tuple[list[tuple[bytes, RecordId]], bool, bytes | None]:
        """Live keys with ``prefix`` after ``after`` (at most ``limit``), whether more
        follow, and where a walk past dead keys stopped (``CompactedStore.keys``)."""
        _check_compacted(topic, state)
        return self.store.keys(
            topic, prefix, after, limit, props=state.properties, clock_ms=clock_ms
        )


def _check_compacted(topic: str, state: TopicState) -> None:
    if not state.properties.compacted:
        raise TopicError(
            "NotCompacted",
            f"topic {topic!r} is not compacted (cleanup_policy=compact): it has no key-value view",
        )


def _failed(e: Expectation, current: RecordId | None) -> ExpectationFailedError:
    now = "none" if current is None else str(current)
    message = f"expected {e.describe()}; the last record id is {now}"
    at = None if current is None else (current.index, current.position)
    return ExpectationFailedError(message, e.topic, at, e.key)
