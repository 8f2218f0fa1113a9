"""Many REST long polls woken together by one large record: the peer's memory stays bounded.

A REST long poll that finds nothing waits in the peer as a waiting read (an idle one holds
no answer memory). When a record comes, every such read of the topic is woken. Here
``POLLS`` connections from four addresses wait on an empty topic with a tiny receive
buffer, one ``RECORD``-byte record is published, the clients read nothing for 5 s, then
each reads its status line and hangs up. Meanwhile the peer answers RequestLogInfo within
1 s and ``/healthz`` within 2 s, its answer bytes held stay within ``answer_memory_bytes``,
every poll is answered (200 with the record, or 503 ``Busy`` when the memory stayed full
past its wait), an update commits and no election happens.

Measured on the code before: RSS +879 MiB. Three causes, each mended:
- the waiting reads woke *with* their records, which went to the HTTP listener's own
  client ahead of any answer memory: ``POLLS`` copies of the record queued in the peer. A
  long poll now waits with a wake-up (``TF`` without credit: ``more`` once records came),
  then reserves its answer memory and reads. (The peer paces the wake-ups' reads by time,
  ``parked_reads.WAKE_TIME``: 160 reads of the record in one pass stalled its loop 3.8 s;
  and since they each read the same entry from the log, a RequestLogInfo probe still took
  over 1 s on a busy 2-core machine, 30 ms of CPU a read -- now the machine keeps the
  entry decoded, ``raftlog.topics.decoded_entries``: leader's longest pass 330 -> 100 ms
  under two CPU hogs, the test 43 -> 16 s.)
- a poll whose first record needed more room than it reserved waited for room holding its
  reservation and its records: the memory filled with polls waiting for each other. Now it
  drops both, waits, and reads again (``raftlog.rest.pages.answer_within``).
- an answer whose client hung up stayed in a reference cycle through the failed write's
  error until the cyclic collector ran (``raftlog.web.hangups``): +700 MiB here.
Now: RSS +71 MiB, at most 30 MiB held (32 allowed); with ``request_timeout_ms`` 4 s here,
36 of 160 answered 200 and the rest 503 ``Busy`` (with 10 s, 95).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from integration.cluster import PeerCluster, wait_for
from integration.kafka.helpers import native
from integration.peer.updates import update
from integration.thread_gang import ThreadGang

from faults.http_load import (
    PeerWatch,
    cluster_terms,
    json_post,
    limited_cluster,
    metric,
    slow_reader,
)
from raftlog.topics.records import Record

pytestmark = pytest.mark.timeout(240)

POLLS = 160
RECORD = 6 * 1024 * 1024
ANSWER_MEMORY = 32 * 1024 * 1024
POLL = "/v1/namespaces/default/topics/quiet/poll"
RSS_GROWTH_MB = 250
"""What the peer may grow by: a few answers' reads and encodings at once, not ``POLLS``
copies of the record (960 MiB)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    limits = ("[http]", "send_timeout_ms = 3000", "[rest]",
              f"answer_memory_bytes = {ANSWER_MEMORY}", "max_wait_ms = 60000",
              "request_timeout_ms = 4000")
    with limited_cluster(tmp_path_factory.mktemp("rest-woken"), "raftlog-woken", limits,
                         topics=("quiet",)) as running:
        yield running


class WaitingPolls(ThreadGang):
    """Connections that each send one long poll of the empty topic and read its answer's
    status line only once the test lets them (``reading``)."""

    def __init__(self, where: tuple[str, int], sources: list[str], per_source: int) -> None:
        super().__init__(self._run, [(source,) for source in sources for _ in range(per_source)])
        self._request = json_post(POLL, {"waitMs": 60_000, "limit": 10})
        self._where = where
        self.reading = threading.Event()
        self.statuses: list[str] = []
        self._lock = threading.Lock()

    def _run(self, source: str) -> None:
        with slow_reader(self._where, source, self._request) as sock:
            while not (self.reading.wait(0.2) or self.stopping.is_set()):
                pass
            sock.settimeout(30)
            try:
                status = sock.recv(64).split(b"\r\n", 1)[0].decode(errors="replace")
            except OSError as exc:
                status = f"error {exc}"
            with self._lock:
                self.statuses.append(status)


def test_polls_woken_together_hold_no_more_than_the_answer_memory(
    cluster: PeerCluster,
) -> None:
    leader = cluster.wait_stable_leader()
    watch, terms = PeerWatch(cluster, leader), cluster_terms(cluster)
    http = str(cluster.peers[leader].http_url)
    host, port = http.removeprefix("http://").rsplit(":", 1)
    sources = [f"127.0.0.{n}" for n in range(2, 6)]
    with WaitingPolls((host, int(port)), sources, POLLS // len(sources)) as polls:
        wait_for("every poll connected", lambda: metric(
            http, "raftlog_http_connections") >= POLLS, 30.0)
        watch.keeps_answering(1.0)  # their first reads found nothing: they wait
        baseline = peak = watch.rss_mb()
        held: list[float] = []
        with native(cluster) as topics:
            topics.publish_batch([Record("quiet", b"w" * RECORD)])
        woke = time.monotonic()
        while time.monotonic() - woke < 5.0:  # the answers queue behind unread ones
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
            held.append(metric(http, "raftlog_rest_answer_held_bytes"))
        polls.reading.set()  # each reads its status line and hangs up
        reading = time.monotonic()
        while len(polls.statuses) < POLLS and time.monotonic() - reading < 120.0:
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
        for _ in range(4):
            watch.keeps_answering(0.5)
            peak = max(peak, watch.rss_mb())
    answered = sum(s.startswith("HTTP/1.1 200") for s in polls.statuses)
    print(f"RSS {baseline:.0f} -> {peak:.0f} MiB, at most {max(held) / 2**20:.1f} MiB held; "
          f"{answered} of {POLLS} answered 200")
    assert not watch.slow, watch.slow[:10]
    assert len(polls.statuses) == POLLS, f"{len(polls.statuses)} of {POLLS} answered"
    assert all(s.startswith(("HTTP/1.1 200", "HTTP/1.1 503")) for s in polls.statuses), (
        sorted(set(polls.statuses)))
    assert any(s.startswith("HTTP/1.1 200") for s in polls.statuses)
    assert peak - baseline < RSS_GROWTH_MB, f"RSS {baseline:.0f} -> {peak:.0f} MiB"
    assert max(held) <= ANSWER_MEMORY, held
    assert update(cluster, b"after the wake-up") > 0
    assert cluster_terms(cluster) == terms  # no election
