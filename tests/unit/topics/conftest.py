"""Fixtures of the topic state machine tests: a fresh memory ``log`` and a ``machine`` on
it (a module whose log has more entry kinds overrides ``log`` with its subclass; ``machine``
then applies that one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_log import Log

from raftlog.topics.machine import TopicStateMachine


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def machine(tmp_path: Path, log: Log) -> Iterator[TopicStateMachine]:
    m = TopicStateMachine(tmp_path / "topics", log.store)
    yield m
    m.close()
