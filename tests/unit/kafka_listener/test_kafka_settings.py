"""The ``[kafka]`` table's connection and group limits: defaults, overrides, one clear error
for a bad value, and the descriptor share the listener's cap stays within."""

from __future__ import annotations

from typing import Any

import pytest

from raftlog.errors import ConfigError
from raftlog.kafka.settings import (
    GROUP_LIMIT_DEFAULTS,
    LIMIT_DEFAULTS,
    MEMORY_DEFAULTS,
    GroupLimits,
    KafkaSettings,
    kafka_settings,
)

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


def test_the_group_limits_default_to_kafkas_and_can_be_set() -> None:
    default = _settings({}).groups
    assert (default.min_session_ms, default.max_session_ms) == (6_000, 1_800_000)  # Kafka's
    assert default == GroupLimits()
    tight = _settings({"group_min_session_timeout_ms": 100, "group_max_session_timeout_ms": 900,
                       "group_max_size": 3, "max_group_members": 7,
                       "max_group_state_bytes": 4096}).groups
    assert tight == GroupLimits(100, 900, 3, 7, 4096)


@pytest.mark.parametrize("key", sorted(GROUP_LIMIT_DEFAULTS))
def test_a_bad_group_limit_is_one_clear_error(key: str) -> None:
    with pytest.raises(ConfigError, match=f"\\[kafka\\] {key} must be a positive integer"):
        _settings({key: 0})


def test_the_session_bounds_must_be_in_order() -> None:
    with pytest.raises(ConfigError, match="group_min_session_timeout_ms must not exceed"):
        _settings({"group_min_session_timeout_ms": 10_000, "group_max_session_timeout_ms": 9_999})


def test_the_fetch_limits_default_to_kafkas_and_can_be_set() -> None:
    default = _settings({})
    assert default.fetch_max_bytes == 57_671_680  # Kafka's broker fetch.max.bytes
    assert default.fetch_memory_bytes == 128 * 1024 * 1024
    assert default.send_timeout_ms == 60_000
    assert default.request_memory_bytes == 256 * 1024 * 1024
    tight = _settings({"fetch_max_bytes": 1024, "fetch_memory_bytes": 8 << 20,
                       "send_timeout_ms": 500})
    assert (tight.fetch_max_bytes, tight.fetch_memory_bytes, tight.send_timeout_ms) == (
        1024, 8 << 20, 500)


@pytest.mark.parametrize("key", sorted(MEMORY_DEFAULTS))
def test_a_bad_fetch_limit_is_one_clear_error(key: str) -> None:
    with pytest.raises(ConfigError, match=f"\\[kafka\\] {key} must be a positive integer"):
        _settings({key: -5})


def test_the_fetch_memory_holds_at_least_one_read() -> None:
    with pytest.raises(ConfigError, match="fetch_memory_bytes must be at least 4194304"):
        _settings({"fetch_memory_bytes": 1 << 20})
