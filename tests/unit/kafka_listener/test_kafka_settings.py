"""The ``[kafka]`` table's connection limits: defaults, overrides, one clear error for a bad
value, and the descriptor share the listener's cap stays within."""

from __future__ import annotations

from typing import Any

import pytest

from raftlog.errors import ConfigError
from raftlog.kafka.settings import LIMIT_DEFAULTS, KafkaSettings, kafka_settings

PEERS = [{"id": "1", "kafka_url": "tcp://127.0.0.1:9092"}]


def _settings(table: dict[str, Any]) -> KafkaSettings:
    got = kafka_settings({"kafka": table}, "c.toml", PEERS, "1", secure=False)
    assert got is not None
    return got


def test_the_limits_default_to_kafkas_and_can_be_set() -> None:
    default = _settings({})
    assert default.max_connections == 1000 and default.max_connections_per_address == 256
    assert default.header_timeout_ms == default.first_request_timeout_ms == 10_000
    assert default.idle_timeout_ms == 600_000  # Kafka's connections.max.idle.ms
    tight = _settings({"max_connections": 5, "idle_timeout_ms": 1500,
                       "first_request_timeout_ms": 200, "max_connections_per_address": 2})
    assert (tight.max_connections, tight.idle_timeout_ms, tight.header_timeout_ms,
            tight.max_connections_per_address) == (5, 1500, 200, 2)


@pytest.mark.parametrize("key", sorted(LIMIT_DEFAULTS))
@pytest.mark.parametrize("bad", [0, -1, "10", True, 1.5])
def test_a_bad_limit_is_one_clear_error(key: str, bad: object) -> None:
    with pytest.raises(ConfigError, match=f"\\[kafka\\] {key} must be a positive integer"):
        _settings({key: bad})


def test_the_cap_stays_within_an_eighth_of_the_descriptors() -> None:
    settings = _settings({})
    assert settings.connection_cap(nofile=20_000) == 1000
    assert settings.connection_cap(nofile=1024) == 128
    assert settings.connection_cap(nofile=4) == 1
