"""Consumer groups (issue #27): server-side positions (stream mode) and leased delivery with
acks, redelivery and dead letters (queue mode), replicated in the log and applied by the topic
state machine. The values: ``model``; the commands: ``entry``; the rules: ``table``; the
machine's part: ``host``; the RPCs: ``wire``; the client calls: ``client``."""

from raftlog.topics.groups.model import (
    GroupInfo,
    GroupMode,
    GroupPosition,
    GroupStats,
    QueueOptions,
    QueueTopicStats,
)

__all__ = [
    "GroupInfo",
    "GroupMode",
    "GroupPosition",
    "GroupStats",
    "QueueOptions",
    "QueueTopicStats",
]
