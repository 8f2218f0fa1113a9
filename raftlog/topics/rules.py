"""``check_entry``: whether a topic entry is acceptable given the topics, one function for
the leader's gate (before proposing, ``raftlog.topics.gate``) and for every peer's
apply (``raftlog.topics.machine``), so the two cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping

from raftlog.errors import TopicError
from raftlog.topics.records import ClockTick, TopicCommand, TopicEntry
from raftlog.topics.records_tx import TxControl, TxEntry, TxStore
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
        policy = entry.properties.get("cleanup_policy", "")
        if entry.op == "update" and policy != "" and (
            (policy or "delete") != (topics[entry.topic].properties.cleanup_policy or "delete")
        ):  # compaction keeps its keys from the topic's creation on (raftlog.topics.compacted)
            return TopicError("ImmutableProperty", "cleanup_policy is set when a topic is created")
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
        if state.properties.compacted and isinstance(entry, TxStore):
            return TopicError(
                "CompactedTransaction",
                f"record {position}: transactions cannot write to compacted topic "
                f"{record.topic!r} yet",
            )
        limit = state.properties.max_record_bytes
        if limit is not None and record.size > limit:
            return TopicError(
                "RecordTooLarge",
                f"record {position}: {record.size} bytes exceed max_record_bytes={limit} "
                f"of topic {record.topic!r}",
            )
    return None
