"""The fault suite's consumer-group schedule (issue #27): a queue group consumed by two
members while the leader is killed with -9 over and over, then checked by
``faults.consumers.check_groups`` against the committed log -- besides every check the
harness makes of the ordinary load.

``GroupLoad`` runs beside the workload in its own thread: it creates ``GROUP_TOPIC`` and the
queue group, publishes to the topic, and runs two members that lease and ack. A call that
fails while the leader is down is retried with the next one (acks of a lost member run out
and are redelivered: that is the point). Its own entries are known to the history checker
(``group_entry``), so they count as the schedule's proposals, not as phantoms.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence

from integration.cluster import wait_for

from faults.cluster import IDENT
from faults.harness import RunOptions
from raftlog.client import RaftClient
from raftlog.errors import RaftlogError
from raftlog.topics.client import TopicClient

GROUP_TOPIC = "fault-jobs"
GROUP = "fault-workers"
MEMBERS = ("m1", "m2")
ACK_WAIT_MS = 1000


def group_entry(data: bytes) -> bool:
    """Is this entry data one of the group load's proposals (its topic, its group)?"""
    return GROUP_TOPIC.encode() in data or GROUP.encode() in data


class GroupLoad:
    """Producer and queue members of ``GROUP`` (module docstring)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.ready = threading.Event()
        self.acks = 0
        self.leases = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="group-load", daemon=True)

    def start(self) -> None:
        self._thread.start()
        wait_for("the group load's set-up", self.ready.is_set, 60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    async def _main(self) -> None:
        async with RaftClient(self.urls, IDENT, timeout=4.0) as raft, TopicClient(raft) as tc:
            await _retrying(lambda: tc.create_topic(GROUP_TOPIC, exist_ok=True))
            await _retrying(lambda: tc.create_group(
                GROUP, mode="queue", topics=[GROUP_TOPIC], exist_ok=True,
                ack_wait_ms=ACK_WAIT_MS, max_deliveries=1000))
            for n in range(20):
                await _retrying(lambda n=n: tc.publish(GROUP_TOPIC, b"job-%d" % n))
            self.ready.set()
            await asyncio.gather(self._produce(tc), *(self._member(tc, m) for m in MEMBERS))

    async def _produce(self, tc: TopicClient) -> None:
        n = 20
        while not self._stop.is_set():
            with contextlib.suppress(RaftlogError):
                await tc.publish(GROUP_TOPIC, b"job-%d" % n)
                n += 1
            await asyncio.sleep(0.05)

    async def _member(self, tc: TopicClient, member: str) -> None:
        while not self._stop.is_set():
            try:
                held = await tc.lease(GROUP, member, 3)
                self.leases += 1
                if held:
                    await tc.ack(GROUP, member, [(r.topic, r.id) for r in held])
                    self.acks += len(held)
                else:
                    await asyncio.sleep(0.05)
            except RaftlogError:
                self.failures += 1
                await asyncio.sleep(0.1)


async def _retrying(call: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            await call()  # type: ignore[operator]
            return
        except RaftlogError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def group_options() -> RunOptions:
    return RunOptions(own_entries=group_entry, check_groups=True)
