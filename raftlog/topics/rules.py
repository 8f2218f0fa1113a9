"""``check_entry``: whether a topic entry is acceptable given the topics, one function for
the leader's gate (before proposing, ``raftlog.topics.gate``) and for every peer's
apply (``raftlog.topics.machine``), so the two cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping

from raftlog.errors import TopicError
from raftlog.topics.properties import DEFAULT_TOMBSTONE_RETENTION_MS
from raftlog.topics.records import ClockTick, TopicCommand, TopicEntry, TopicProperties
from raftlog.topics.records_tx import TxControl, TxEntry
from raftlog.topics.state import TopicState


def check_entry(
    entry: TopicEntry | TxEntry, topics: Mapping[str, TopicState], auto_create: bool
) -> TopicError | None:
    """Why ``entry`` would be refused given ``topics``, or None (used at apply and by the
    leader before proposing). Admin no-ops are errors here, for the proposer only. Only the
    records of a transactional store are checked here; the transaction rules are
    ``TransactionTable.check``'s."""
    if isinstance(entry, ClockTick | TxControl):
        return None
    if isinstance(entry, TopicCommand):
        exists = entry.topic in topics
        if entry.op == "create" and exists:
            return TopicError("TopicExists", f"topic {entry.topic!r} already exists")
        if entry.op != "create" and not exists:
            return TopicError("UnknownTopic", f"topic {entry.topic!r} does not exist")
        if entry.op == "update":
            return _check_update(entry, topics[entry.topic].properties)
        return None
    for position, record in enumerate(entry.records):
        state = topics.get(record.topic)
        if state is None:
            if not auto_create:
                return TopicError(
                    "UnknownTopic",
                    f"record {position}: topic {record.topic!r} does not exist "
                    "(create it first, or enable topic_auto_create)",
                )
            continue
        if state.properties.compacted and record.key is None:
            return TopicError(
                "KeyRequired",
                f"record {position}: topic {record.topic!r} is compacted "
                "(cleanup_policy=compact): every record needs a key",
            )
        limit = state.properties.max_record_bytes
        if limit is not None and record.size > limit:
            return TopicError(
                "RecordTooLarge",
                f"record {position}: {record.size} bytes exceed max_record_bytes={limit} "
                f"of topic {record.topic!r}",
            )
    return None


def _check_update(command: TopicCommand, old: TopicProperties) -> TopicError | None:
    """What an update may not change on a compacted topic (``raftlog.topics.compacted``):
    its policy (its keys are kept from its creation on), and no lifetime may grow -- a peer
    whose log compaction already dropped an expired tombstone or record could not bring it
    back, and would then judge a per-key expectation differently from one that had not."""
    changes = command.properties
    policy = changes.get("cleanup_policy", "")
    if policy != "" and (policy or "delete") != (old.cleanup_policy or "delete"):
        return TopicError("ImmutableProperty", "cleanup_policy is set when a topic is created")
    if not old.compacted:
        return None
    new = old.updated(changes)
    tombstones = (old.tombstone_retention_ms, new.tombstone_retention_ms)
    grows = _longer(*(t or DEFAULT_TOMBSTONE_RETENTION_MS for t in tombstones))
    if old.cleanup_policy == "compact,delete":
        grows = grows or _longer(old.retention_ms, new.retention_ms)
    if grows:
        return TopicError(
            "ImmutableProperty",
            "a compacted topic's tombstone_retention_ms and retention_ms may shrink, not grow",
        )
    return None


def _longer(old: int | None, new: int | None) -> bool:
    """Is lifetime ``new`` longer than ``old`` (None: forever)?"""
    if old is None:
        return False
    return new is None or new > old
