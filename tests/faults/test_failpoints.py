"""The test-only bug switch ``sync=skip`` parses only where it means something."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raftlog.storage import failpoints


@pytest.fixture(autouse=True)
def reset() -> Iterator[None]:
    yield
    failpoints.configure(None)


def test_sync_skip_switches_the_bug_on_and_nothing_else() -> None:
    assert not failpoints.skipped("sync")
    failpoints.configure("sync=skip", unsafe=failpoints.UNSAFE_CONSENT)
    assert failpoints.ENABLED and failpoints.skipped("sync")
    failpoints.hit("before_sync")  # other points unaffected


def test_skip_is_refused_where_no_step_can_be_skipped() -> None:
    with pytest.raises(ValueError, match="cannot skip"):
        failpoints.configure("before_sync=skip", unsafe=failpoints.UNSAFE_CONSENT)


@pytest.mark.parametrize("unsafe", [None, "", "yes", "1"])
def test_a_bug_switch_needs_the_second_variable(unsafe: str | None) -> None:
    """One setting alone (a stray RAFTLOG_FAILPOINTS in production) never loses data."""
    with pytest.raises(ValueError, match="RAFTLOG_FAILPOINTS_UNSAFE"):
        failpoints.configure("log_sync=skip", unsafe=unsafe or "")
    assert not failpoints.ENABLED


def test_skip_from_the_nth_time() -> None:
    failpoints.configure("sync=skip@3", unsafe=failpoints.UNSAFE_CONSENT)
    assert [failpoints.skipped("sync") for _ in range(4)] == [False, False, True, True]
