"""``make_record``: a ``Record`` with the client's defaults, shared by plain publishes
(``raftlog.topics.client``) and transactional stores (``raftlog.topics.client_tx``)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from raftlog.topics.records import Record


def make_record(
    topic: str,
    value: bytes,
    *,
    key: bytes | None = None,
    headers: Mapping[str, bytes] | None = None,
    timestamp_ms: int | None = None,
    ttl_ms: int | None = None,
) -> Record:
    """A record with the producer timestamp defaulting to now; ``ttl_ms`` gives it a life
    shorter than its topic's retention (counted from its append time)."""
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return Record(topic, bytes(value), key, dict(headers or {}), stamp, ttl_ms)
