"""Subscriber: history then live broadcasts, no gap and no duplicate, across a leader crash."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import pytest
import zmq

from integration.cluster import PeerCluster
from raftlog.client import IndexedEntry, RaftClient, StreamItem, Subscriber
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc import encode_broadcast
from raftlog.rpc.messages import StateBroadcast

from .conftest import client_for, read_log

pytestmark = pytest.mark.timeout(180)


class Collector:
    """Runs a subscriber in a task and records what it yields."""

    def __init__(self, subscriber: Subscriber) -> None:
        self.subscriber = subscriber
        self.items: list[StreamItem] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for item in self.subscriber:
            self.items.append(item)

    def datas(self) -> list[bytes]:
        return [i.entry.data for i in self.items if isinstance(i, IndexedEntry)]

    async def until(self, what: str, check: object, timeout: float = 30.0) -> None:
        async def poll() -> None:
            while not check():  # type: ignore[operator]
                if self.task.done():
                    self.task.result()  # raise what ended the subscriber
                    raise AssertionError(f"subscriber ended before {what}")
                await asyncio.sleep(0.01)

        try:
            async with asyncio.timeout(timeout):
                await poll()
        except TimeoutError:
            sub = self.subscriber
            raise AssertionError(
                f"timed out waiting for {what}: last_index={sub.last_index} "
                f"caught_up={sub.caught_up} resubscriptions={sub.resubscriptions} "
                f"gaps_filled={sub.gaps_filled} items={len(self.items)}"
            ) from None

    async def close(self) -> None:
        self.task.cancel()
        done, _ = await asyncio.wait({self.task}, timeout=10)
        assert done, "the subscriber task ignored its cancellation"
        with contextlib.suppress(asyncio.CancelledError):
            self.task.result()
        await self.subscriber.aclose()


def assert_gapless(items: list[StreamItem], start: int = 1) -> None:
    indexes = [i.index for i in items if isinstance(i, IndexedEntry)]
    assert len(indexes) == len(set(indexes)), "duplicate entries"
    assert indexes == sorted(indexes), "entries out of order"


async def write(client: RaftClient, tag: bytes, count: int) -> list[int]:
    return list(
        await asyncio.gather(*(client.request_update(b"%s %d" % (tag, n)) for n in range(count)))
    )


async def test_subscriber_catches_up_follows_live_and_survives_leader_kill(
    cluster: PeerCluster,
) -> None:
    async with client_for(cluster) as client:
        history = await write(client, b"history", 60)
        sub = Subscriber(cluster.urls, cluster.ident, from_index=0)
        got = Collector(sub)
        try:
            await got.until("the history", lambda: sub.caught_up and sub.last_index >= max(history))
            assert got.datas() == [
                b"history %d" % n for n in sorted(range(60), key=lambda n: history[n])
            ]

            live = await write(client, b"live", 100)
            await got.until("live updates", lambda: sub.last_index >= max(live))

            victim = cluster.wait_stable_leader()
            cluster.kill(victim)
            after = await write(client, b"after", 100)
            await got.until("updates after the crash", lambda: sub.last_index >= max(after), 60)
            assert sub.resubscriptions >= 1
            cluster.start(victim)
            cluster.wait_stable_leader()
            final = await write(client, b"final", 20)
            await got.until("updates after the restart", lambda: sub.last_index >= max(final), 60)
        finally:
            await got.close()

        # What the subscriber yielded is exactly the log's STATE entries, in log order.
        expected = [
            IndexedEntry(e.index, e.entry)
            async for e in client.request_entries(0)
            if isinstance(e, IndexedEntry) and e.entry.entry_type == EntryType.STATE
        ]
        assert got.items == expected


async def test_subscriber_from_end_sees_only_new_entries(cluster: PeerCluster) -> None:
    async with client_for(cluster) as client:
        old = await write(client, b"old", 10)
        sub = Subscriber(client, from_index="end", skip_control=False)
        got = Collector(sub)
        try:
            await got.until("the subscription", lambda: sub.caught_up)
            assert sub.last_index >= max(old)
            new = await write(client, b"new", 30)
            await got.until("new entries", lambda: sub.last_index >= max(new))
            assert_gapless(got.items)
            assert sorted(d for d in got.datas() if d.startswith(b"new")) == sorted(
                b"new %d" % n for n in range(30)
            )
            assert not any(d.startswith(b"old") for d in got.datas())
        finally:
            await got.close()
        assert not client.closed  # a shared client is not closed by the subscriber


async def test_subscriber_fills_gaps_drops_duplicates_and_foreign_idents(
    cluster: PeerCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broadcasts come from a test-controlled XPUB here, so gaps, overlaps, a prefix-matching
    foreign ident and silence can be produced on purpose; gap fills read the real log."""
    ident = cluster.ident.encode()
    async with client_for(cluster) as client:
        await write(client, b"old", 5)
        start = (await client.request_log_info()).last_applied
        xpub = client.context.socket(zmq.XPUB)
        xpub.setsockopt(zmq.LINGER, 0)
        url = f"tcp://127.0.0.1:{xpub.bind_to_random_port('tcp://127.0.0.1')}"
        handed_out: list[str] = []

        async def fake_broadcast_url(*, timeout: float | None = None) -> str:
            handed_out.append(url)
            return url

        monkeypatch.setattr(client, "request_broadcast_url", fake_broadcast_url)

        def publish(last: int, entries: Sequence[LogEntry] = (), topic: bytes = ident) -> None:
            message = StateBroadcast(1, last, tuple(entries))
            xpub.send_multipart(encode_broadcast(message, ident=topic))

        async def heartbeats() -> None:
            while True:
                publish(start)
                await asyncio.sleep(0.1)

        sub = Subscriber(client, from_index=start, broadcast_timeout=1.0)
        got = Collector(sub)
        beating = asyncio.create_task(heartbeats())
        try:
            async with asyncio.timeout(10):
                assert await xpub.recv() == b"\x01" + ident
            await got.until("the subscriber to catch up", lambda: sub.caught_up)
            new = [await client.request_update(b"gap %d" % n) for n in range(10)]
            assert new == list(range(start + 1, start + 11))
            log = {e.index: e.entry for e in await read_log(client, start)}
            beating.cancel()

            publish(start + 6, [log[i] for i in range(start + 4, start + 7)])  # gap 1..3
            publish(start + 7, [log[i] for i in range(start + 5, start + 8)])  # overlap 5..6
            publish(start + 8, [log[start + 8]], topic=ident + b"x")  # foreign, same prefix
            publish(start + 10)  # heartbeat ahead: gap 8..10
            await got.until("the gaps to be filled", lambda: sub.last_index >= start + 10)
            assert got.items == [IndexedEntry(i, log[i]) for i in range(start + 1, start + 11)]
            assert sub.gaps_filled == 2

            # Silence: the leader is considered lost and the subscription renewed.
            await got.until("a resubscription", lambda: len(handed_out) >= 2, 10)
            assert sub.resubscriptions >= 1
        finally:
            beating.cancel()
            await got.close()
            xpub.close(linger=0)
