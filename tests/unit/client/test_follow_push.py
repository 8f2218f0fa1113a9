"""Topic follow through ``TF`` push fetch (issue #27): every page carries the follower's
credit, an idle follower's waiting fetch carries the thresholds and its records are taken
as they are, and a peer without ``TF`` (``BadRequest``, or silence where ``TR`` answers)
makes the follower fall back to ``TR`` for good."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from raftlog.errors import ClusterUnavailableError, TopicError
from raftlog.topics.client_stream import _Cursor, _Transport, subscribe
from raftlog.topics.properties import TopicProperties
from raftlog.topics.records import MAX_POSITION, LoggedRecord, Record, RecordId
from raftlog.topics.wire import ReadResult, TopicInfo


class _Peer:
    """One topic's records in memory, answering ``TR`` and (unless ``tf``) ``TF`` like a
    peer: a fetch's answer is cut to its credit, a waiting call waits for a publish."""

    leader_url = "tcp://peer"

    def __init__(self, tf: str = "yes") -> None:
        self.tf = tf  # "yes", "bad" (BadRequest) or "silent" (an older raftlog: no answer)
        self.records: list[LoggedRecord] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.published = asyncio.Event()

    def publish(self, value: bytes) -> None:
        index = len(self.records) + 10
        self.records.append(LoggedRecord(RecordId(index, 0), 0, Record("t", value)))
        self.published.set()

    def _page(self, kw: dict[str, Any], max_bytes: int | None) -> ReadResult:
        start = RecordId(kw.get("from_index") or 0, kw.get("from_position") or 0)
        inclusive = kw.get("inclusive", True)
        found = [r for r in self.records if r.id >= start and (inclusive or r.id > start)]
        kept: list[LoggedRecord] = []
        for r in found:
            if max_bytes is not None and kept and sum(
                k.record.size for k in kept
            ) + r.record.size > max_bytes:
                return ReadResult(tuple(kept), 100, True, True)
            kept.append(r)
        return ReadResult(tuple(kept), 100, True, False)

    async def _wait(self, kw: dict[str, Any], wait_ms: int, need: int) -> None:
        while wait_ms and len(self._page(kw, None).records) < need:
            self.published.clear()
            await self.published.wait()

    async def read(self, topic: str, **kw: Any) -> ReadResult:
        self.calls.append(("TR", kw))
        await self._wait(kw, kw.get("wait_ms", 0), 1)
        return self._page(kw, None)

    async def fetch(self, topic: str, url: str, **kw: Any) -> ReadResult:
        self.calls.append(("TF", kw))
        if self.tf == "bad":
            raise TopicError("BadRequest", "unknown request type")
        if self.tf == "silent":
            raise ClusterUnavailableError("no answer")
        await self._wait(kw, kw.get("wait_ms", 0), kw.get("min_records", 1))
        return self._page(kw, kw.get("max_bytes"))

    async def list_topics(self, **_kw: Any) -> tuple[str, ...]:
        return ("t",)

    async def describe(self, topic: str, **_kw: Any) -> TopicInfo:
        return TopicInfo("t", TopicProperties(), 1, applied=100)


async def _take(stream: Any, n: int) -> list[bytes]:
    return [(await asyncio.wait_for(stream.__anext__(), 5)).record.value for _ in range(n)]


async def test_follow_pages_carry_the_credit_and_the_waiting_fetch_the_thresholds() -> None:
    peer = _Peer()
    for value in (b"aaaa", b"bbbb", b"cccc"):
        peer.publish(value)
    stream = subscribe(peer, ["t"], max_bytes=8, min_records=2)  # type: ignore[arg-type]
    assert await _take(stream, 3) == [b"aaaa", b"bbbb", b"cccc"]
    pages = [kw for kind, kw in peer.calls if kind == "TF" and not kw["wait_ms"]]
    assert pages and all(kw["max_bytes"] == 8 for kw in pages)
    assert not [c for c in peer.calls if c[0] == "TR"]
    # idle now: the waiting fetch asks for two records; one publish does not answer it
    waiting = asyncio.ensure_future(_take(stream, 2))
    await asyncio.sleep(0.05)
    peer.publish(b"dddd")
    await asyncio.sleep(0.05)
    assert not waiting.done()
    peer.calls.clear()
    peer.publish(b"eeee")
    assert await waiting == [b"dddd", b"eeee"]
    held = [kw for kind, kw in peer.calls if kind == "TF"]
    assert held == [] or all(kw["max_bytes"] == 8 for kw in held)
    await stream.aclose()


@pytest.mark.parametrize("tf", ["bad", "silent"])
async def test_a_peer_without_push_fetch_is_followed_with_reads(tf: str) -> None:
    peer = _Peer(tf)
    peer.publish(b"one")
    stream = subscribe(peer, ["t"], max_bytes=64)  # type: ignore[arg-type]
    assert await _take(stream, 1) == [b"one"]
    waiting = asyncio.ensure_future(_take(stream, 1))
    await asyncio.sleep(0.05)
    peer.publish(b"two")
    assert await waiting == [b"two"]
    kinds = [kind for kind, _ in peer.calls]
    assert kinds.count("TF") == 1  # tried once, then TR for good
    assert any(kind == "TR" and kw.get("wait_ms") for kind, kw in peer.calls)  # waiting TR
    await stream.aclose()


async def test_silence_from_a_peer_that_is_gone_keeps_push_fetch() -> None:
    class _Gone(_Peer):
        async def read(self, topic: str, **kw: Any) -> ReadResult:
            raise ClusterUnavailableError("no answer")

    transport = _Transport("tcp://peer", max_bytes=64)
    with pytest.raises(ClusterUnavailableError):
        await transport.page(_Gone("silent"), _Cursor("t"))  # type: ignore[arg-type]
    assert transport.push  # TR failed too: the peer is down, not older

    moved = _Peer("silent")  # the leader died: the leader-routed TR reached another peer
    moved.publish(b"one")
    transport = _Transport(None, max_bytes=64)

    async def elsewhere(topic: str, **kw: Any) -> ReadResult:
        moved.leader_url = "tcp://new-leader"
        return await _Peer.read(moved, topic, **kw)

    moved.read = elsewhere  # type: ignore[method-assign]
    page = await transport.page(moved, _Cursor("t"))  # type: ignore[arg-type]
    assert [r.record.value for r in page.records] == [b"one"]
    assert transport.push  # another peer answered: nothing learnt about the silent one


async def test_bad_thresholds_fail_at_once() -> None:
    with pytest.raises(TopicError, match="max_bytes"):
        await subscribe(_Peer(), ["t"], max_bytes=0).__anext__()  # type: ignore[arg-type]


def test_a_page_that_stopped_passing_over_dead_records_moves_the_cursor_on() -> None:
    """A peer may answer "more, no records, resume at R" (a read that stopped passing over
    superseded or expired records, when it could not go on with it itself): the follower
    reads on from R instead of failing on the empty page or asking the same again."""
    cursor = _Cursor("t")
    assert cursor.take(ReadResult((), 9, True, True, RecordId(7, 3)))
    assert cursor.start() == {"from_index": 7, "from_position": 2, "inclusive": False}
    assert cursor.horizon == RecordId(7, 2)
    cursor.take(ReadResult((), 9, True, True, RecordId(8, 0)))
    assert cursor.after == RecordId(7, MAX_POSITION) == cursor.horizon
