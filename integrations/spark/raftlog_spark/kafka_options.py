"""Spark Kafka source options whose values have Kafka's per-partition forms, mapped onto one
raftlog log (issue #31). Pure functions: each returns the raftlog value or raises
:class:`RaftlogSourceError` naming the option and every valid form.

A raftlog topic has one partition, numbered 0 here: ``assign`` names topics with partition
``[0]`` (or ``[]``); ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` give one
time for every topic (a raftlog read is one index range of one log, so different times per
topic cannot be honoured -- they are refused, not approximated).
"""

from __future__ import annotations

import json
from typing import Final, Literal

from raftlog.topics.records import check_topic_name
from raftlog_spark.option_values import option_error

Isolation = Literal["read_committed", "read_uncommitted"]
ISOLATION_LEVELS: Final = ("read_committed", "read_uncommitted")
ASSIGN_FORM: Final = 'a JSON object of topics and their partitions, e.g. {"orders": [0]}'
BY_TIMESTAMP_FORM: Final = (
    'a JSON object of topics, each with partition "0" and one time in ms, the same for '
    'every topic, e.g. {"orders": {"0": 1700000000000}}'
)


def _object(name: str, value: str, form: str) -> dict[str, object]:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise option_error(name, value, f"must be {form}")
    return parsed


def parse_assign(value: str) -> frozenset[str]:
    """``assign``: the topics of Kafka's ``{"topic": [partitions]}``; partition 0 only."""
    parsed = _object("assign", value, ASSIGN_FORM)
    for topic, partitions in parsed.items():
        try:
            check_topic_name(topic)
        except ValueError as exc:
            raise option_error("assign", value, str(exc)) from None
        if not isinstance(partitions, list) or any(p != 0 for p in partitions):
            raise option_error(
                "assign",
                value,
                f"topic {topic!r}: a raftlog topic has one partition, 0; must be {ASSIGN_FORM}",
            )
    return frozenset(parsed)


def parse_by_timestamp(name: str, value: str) -> tuple[frozenset[str], int]:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: (its topics, the one
    time in ms they all give)."""
    parsed = _object(name, value, BY_TIMESTAMP_FORM)
    times: set[int] = set()
    for topic, by_partition in parsed.items():
        if not isinstance(by_partition, dict) or set(by_partition) - {"0"} or not by_partition:
            raise option_error(name, value, f"topic {topic!r}: must be {BY_TIMESTAMP_FORM}")
        ms = by_partition["0"]
        if type(ms) is not int or ms < 0:
            raise option_error(name, value, f"topic {topic!r}: the time must be ms >= 0")
        times.add(ms)
    if len(times) != 1:
        raise option_error(
            name,
            value,
            "a raftlog read is one index range of one log, so every topic needs the same "
            "time (or use startingTimestamp / endingTimestamp)",
        )
    return frozenset(parsed), times.pop()


def parse_isolation(value: str) -> Isolation:
    """``isolation.level`` (``kafka.isolation.level``)."""
    level = value.strip().lower()
    if level == "read_committed":
        return "read_committed"
    if level == "read_uncommitted":
        return "read_uncommitted"
    raise option_error(
        "isolation.level",
        value,
        "must be read_committed (the default: committed transactional records at their "
        "commit) or read_uncommitted (stored records at their store, open or rolled back too)",
    )
