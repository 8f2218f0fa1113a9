"""The Kafka group coordinator's limits: what a client may make the leader's listener hold.

A JoinGroup flood with 1 MiB of member metadata and a session of 24 days grew a leader by
~60 MiB/s without end (20 connections, ~1,200 members in 20 s); the coordinator now refuses
joins past the session bounds, the group's size, the listener's members and the held bytes,
with Kafka's errors, and counts them. The held counts follow every way a member leaves."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable

import pytest
from kio.schema.errors import ErrorCode

from raftlog.kafka import coordinator
from raftlog.kafka.coordinator import Coordinator, JoinResult
from raftlog.kafka.settings import GroupLimits

LIMITS = GroupLimits(min_session_ms=1_000, max_session_ms=60_000, max_size=2, max_members=3,
                     max_state_bytes=4_096)


@pytest.fixture(autouse=True)
def _short_join_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator, "JOIN_WINDOW", 0.01)


def _run(body: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(body, 10))  # type: ignore[arg-type]


def _join(co: Coordinator, group: str, member: str = "", *, session_s: float = 10.0,
          meta: bytes = b"m") -> Awaitable[JoinResult]:
    return co.join(group, member, instance_id=None, protocol_type="consumer",
                   protocols={"range": meta}, session_s=session_s, rebalance_s=1.0)


def _held(co: Coordinator) -> int:
    return sum(m.held_bytes(g.group_id) for g in co.groups.values() for m in g.members.values())


def test_a_session_outside_the_bounds_is_refused_with_kafkas_error() -> None:
    async def body() -> None:
        co = Coordinator(LIMITS)
        for seconds in (0.5, 61.0, datetime.timedelta(days=24).total_seconds()):
            refused = await _join(co, "g", session_s=seconds)
            assert refused.error == ErrorCode.invalid_session_timeout
        assert co.groups == {} and co.members == 0  # a refused join leaves nothing behind
        assert (await _join(co, "g", session_s=60.0)).error == ErrorCode.none
        assert co.refusals["session_timeout"] == 3
    _run(body())


def test_a_group_at_its_size_refuses_new_members_but_not_a_rejoin() -> None:
    async def body() -> None:
        co = Coordinator(LIMITS)
        first = await _join(co, "g")
        second, third, again = await asyncio.gather(_join(co, "g"), _join(co, "g"),
                                                    _join(co, "g", first.member_id))
        assert sorted(r.error for r in (second, third)) == sorted(
            [ErrorCode.none, ErrorCode.group_max_size_reached])
        assert again.error == ErrorCode.none  # a member already in it may rejoin at the size
        assert len(co.groups["g"].members) == 2 == co.members
        results = await asyncio.gather(*(_join(co, "g", m) for m in co.groups["g"].members))
        assert all(r.error == ErrorCode.none for r in results), results
        assert co.members == 2 and co.refusals["group_max_size"] == 1
    _run(body())


def test_the_listener_wide_member_cap_is_retriable_and_frees_on_leave() -> None:
    async def body() -> None:
        co = Coordinator(LIMITS)
        joined = [await _join(co, f"g{n}") for n in range(3)]
        assert all(r.error == ErrorCode.none for r in joined) and co.members == 3
        assert (await _join(co, "g3")).error == ErrorCode.coordinator_not_available
        assert co.leave("g0", joined[0].member_id) == ErrorCode.none
        assert co.members == 2
        assert (await _join(co, "g3")).error == ErrorCode.none
        assert co.refusals["max_group_members"] == 1
    _run(body())


def test_the_held_bytes_are_capped_for_joins_and_assignments() -> None:
    async def body() -> None:
        co = Coordinator(LIMITS)
        big = await _join(co, "g", meta=b"x" * 5_000)
        assert big.error == ErrorCode.coordinator_not_available and co.held_bytes == 0
        ok = await _join(co, "g", meta=b"x" * 1_000)
        assert ok.error == ErrorCode.none and co.held_bytes == _held(co) > 1_000
        before = co.held_bytes
        error, _ = await co.sync("g", ok.generation, ok.member_id, {ok.member_id: b"a" * 4_000})
        assert error == ErrorCode.coordinator_not_available  # past the bytes: nothing handed
        assert co.held_bytes == before and co.groups["g"].members[ok.member_id].assignment == b""
        error, got = await co.sync("g", ok.generation, ok.member_id, {ok.member_id: b"a" * 100})
        assert (error, got) == (ErrorCode.none, b"a" * 100) and co.held_bytes == before + 100
        assert co.held_bytes == _held(co)
        assert co.refusals["max_group_state_bytes"] == 2
    _run(body())


def test_the_counts_follow_evictions_sweeps_and_a_leadership_loss() -> None:
    async def body() -> None:
        co = Coordinator(LIMITS)
        a = await _join(co, "g", session_s=1.0)
        b_join = asyncio.ensure_future(_join(co, "g", session_s=1.0))  # starts a rebalance
        await asyncio.sleep(0.05)
        assert co.members == 2 and co.held_bytes == _held(co)
        # a did not rejoin: the rebalance deadline (its 1 s rebalance timeout) evicts it
        b = await b_join
        assert b.error == ErrorCode.none and a.member_id not in co.groups["g"].members
        assert co.members == 1 and co.held_bytes == _held(co)
        co.groups["g"].members[b.member_id].last_seen -= 5  # its session ran out
        co.sweep()
        assert co.groups == {} and co.members == 0 and co.held_bytes == 0
        # leadership lost mid-rebalance: the pending deadline must not count twice
        await _join(co, "h")
        late = asyncio.ensure_future(_join(co, "h"))
        await asyncio.sleep(0.05)
        co.clear()
        assert (await late).error == ErrorCode.rebalance_in_progress
        await asyncio.sleep(1.1)  # past the cleared group's deadline
        assert co.members == 0 and co.held_bytes == 0
    _run(body())
