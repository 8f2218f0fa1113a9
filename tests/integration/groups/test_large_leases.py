"""A queue-group member holding many large records gets them in bounded answers, on three
real peers, natively and over REST.

Before: ``GQ`` answered every record leased to the member at once. With 200 leases of 2 MB
records that answer was 400 MB: each peer's loop stalled ~4 s building it (an election
risk), its RSS grew by 677 MiB, and the answer passed the connection's answer backlog limit
(64 MiB), so the client was shed and asked the next peer -- which stalled in turn, for good:
``lease`` never returned. Now one ``GQ`` answer holds at most 4 MiB of records (a larger
record alone), says whether more follow and is continued after a cursor; ``lease`` walks
the answers. A REST group poll answers one such page (``X-Raftlog-More``) and leases
nothing new while what the member holds fills one: the member acks and polls again.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from integration.rest.helpers import RestCluster, call
from raftlog.topics.groups.requests import LEASED_BUDGET
from raftlog.topics.groups.wire import LeasedRecord
from raftlog.topics.records import Record, RecordId
from raftlog.topics.sync_client import SyncTopicClient

pytestmark = pytest.mark.timeout(180)

RECORDS = 12
SIZE = 1024 * 1024
"""Twelve records of 1 MiB: four fill one answer."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCluster]:
    with RestCluster(tmp_path_factory.mktemp("large-leases")) as running:
        running.start()
        running.wait_stable_leader(20)
        yield running


@pytest.fixture(scope="module")
def topics(cluster: RestCluster) -> Iterator[SyncTopicClient]:
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=60.0) as client:
        client.create_topic("large")
        for n in range(RECORDS):
            client.publish_batch([Record("large", bytes([n]) * SIZE)])
        yield client


def weight(records: list[LeasedRecord]) -> int:
    return sum(x.item.record.size for x in records if x.item is not None)


def test_a_member_gets_every_lease_once_in_bounded_answers(topics: SyncTopicClient) -> None:
    topics.create_group("bulk", mode="queue", topics=["large"], ack_wait_ms=120_000)
    leased = topics.lease("bulk", "m1", RECORDS)
    assert [x.item.record.value[0] for x in leased if x.item is not None] == list(range(RECORDS))
    assert all(x.deliveries == 1 for x in leased)
    walked: list[LeasedRecord] = []
    after: tuple[str, RecordId] | None = None
    answers = 0
    while True:
        page = topics.leased("bulk", "m1", after=after)
        assert page.records and weight(page.records) <= LEASED_BUDGET, "an answer over 4 MiB"
        walked += page.records
        answers += 1
        if not page.more:
            break
        after = (page.records[-1].topic, page.records[-1].id)
    assert [x.id for x in walked] == [x.id for x in leased]
    assert answers >= RECORDS * SIZE // LEASED_BUDGET, "one answer held more than 4 MiB"


def test_a_rest_group_poll_answers_a_page_and_leases_no_more_until_acked(
    cluster: RestCluster, topics: SyncTopicClient
) -> None:
    topics.create_group("rbulk", mode="queue", topics=["large"], ack_wait_ms=120_000)
    base = cluster.http_url(cluster.follower())
    path = "/v1/namespaces/default/topics/large"
    ask = {"group": "rbulk", "member": "r1", "limit": RECORDS}
    first = call(base, "POST", path + "/poll", ask, timeout=60)
    assert first.status == 200, first.body
    assert first.headers.get("x-raftlog-more") == "true"
    sizes = [len(base64.b64decode(m["payload"])) for m in first.body]
    assert sizes and sum(sizes) <= LEASED_BUDGET
    again = call(base, "POST", path + "/poll", ask, timeout=60)
    assert [m["id"] for m in again.body] == [m["id"] for m in first.body]
    assert topics.describe_group("rbulk").members == {"r1": RECORDS}  # nothing new leased
    seen: list[str] = []
    page = first
    while True:
        assert all(m["deliveries"] == 1 for m in page.body)
        ids = [m["id"] for m in page.body]
        seen += ids
        acked = call(base, "POST", path + "/ack", {"group": "rbulk", "member": "r1",
                                                   "ids": ids})
        assert acked.status == 200, acked.body
        if page.headers.get("x-raftlog-more") != "true":
            break
        page = call(base, "POST", path + "/poll", {**ask, "limit": 1}, timeout=60)
        assert page.status == 200, page.body
    assert len(seen) == len(set(seen)) == RECORDS
    assert topics.describe_group("rbulk").stats.acked == RECORDS
