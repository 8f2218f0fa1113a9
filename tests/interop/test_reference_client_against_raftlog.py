"""The reference's own client classes (npm ``zmq-raft``) against a three-peer raftlog cluster.

Why: raftlog claims that existing zmq-raft applications work unchanged against it. The
strongest evidence is to run the reference's ``ZmqRaftClient`` (leader discovery, retries with
the same request id, pipelined RequestEntries) and ``ZmqRaftSubscriber`` (broadcast URL
discovery, StateBroadcast, gap filling) against our peers, and to cross-check what they see
with what our peers store (``PeerCluster.read_all`` / the peers' own storage).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_peers import (
    BackgroundUpdater,
    PeerCluster,
    entry_bytes,
    processes_mentioning,
    quiet_peer_cluster,
    read_our_log,
    wait_for,
)
from reference import (
    iter_state_data,
    js_config_and_log_info,
    js_idempotent_retry,
    js_read_log,
    js_updates,
    run_node_script,
)

from raftlog.entry import EntryType, LogEntry

pytestmark = pytest.mark.timeout(120)

IDENT = "raftlog-interop"


def _dump_logs(cluster: PeerCluster) -> None:
    for peer in cluster.peers.values():
        print(f"----- raftlog peer {peer.id} ({peer.url}) log tail -----")
        with contextlib.suppress(OSError):
            print("\n".join(peer.log_path.read_text(errors="replace").splitlines()[-40:]))


@pytest.fixture(scope="module")
def shared_cluster(
    reference_installed: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PeerCluster]:
    """Three raftlog peers with a leader, shared by the non-destructive tests of this module
    (each test only relies on the entries it writes itself)."""
    directory = tmp_path_factory.mktemp("raftlog-shared")
    with quiet_peer_cluster(directory, ident=IDENT) as cluster:
        cluster.start()
        cluster.wait_leader()
        try:
            yield cluster
        finally:
            if any(not p.running for p in cluster.peers.values()):
                _dump_logs(cluster)
            assert all(p.running for p in cluster.peers.values()), "a peer died"
    left = processes_mentioning(directory)
    assert not left, f"processes left running: {left}"


@pytest.fixture
def cluster(shared_cluster: PeerCluster, request: pytest.FixtureRequest) -> Iterator[PeerCluster]:
    yield shared_cluster
    rep = getattr(request.node, "_interop_rep_call", None)
    if rep is None or rep.failed:
        _dump_logs(shared_cluster)


def _leader_info(cluster: PeerCluster) -> tuple[str, int]:
    leader = cluster.wait_leader()
    info = cluster.log_info(leader)
    assert info is not None
    return leader, info.last_index


def _term(cluster: PeerCluster) -> int:
    """The highest term any peer reports: a change tells a test that an election happened
    meanwhile (on a loaded machine a follower may time out), so leader-specific checks that
    assume one leader throughout are skipped rather than failing spuriously."""
    return max((i.term for p in cluster.peers if (i := cluster.log_info(p)) is not None), default=0)


def _state_only(entries: list[tuple[int, bytes]]) -> list[tuple[int, LogEntry]]:
    """STATE entries of ``read_all`` output; a new leader's CHECKPOINT entries are skipped."""
    out = [(i, LogEntry.from_bytes(raw)) for i, raw in entries]
    for i, e in out:
        assert e.entry_type in (EntryType.STATE, EntryType.CHECKPOINT), (i, e)
    return [(i, e) for i, e in out if e.entry_type == EntryType.STATE]


def _wait_all_applied(cluster: PeerCluster, index: int, timeout: float = 15.0) -> None:
    for pid in cluster.peers:
        wait_for(
            f"peer {pid} to commit and apply {index}",
            lambda p=pid: (
                (i := cluster.log_info(p)) is not None
                and i.commit_index >= index
                and i.last_applied >= index
            ),
            timeout,
        )


def test_request_config_discovers_leader_and_three_peers(cluster: PeerCluster) -> None:
    leader = cluster.wait_leader()
    term = _term(cluster)
    res = js_config_and_log_info(cluster.urls, IDENT).run()
    assert res["isLeader"] is True
    assert res["leaderId"] in cluster.peers
    if _term(cluster) == term:
        assert res["leaderId"] == leader
    leader = res["leaderId"]
    term = _term(cluster)
    expected = [[pid, p.url] for pid, p in cluster.peers.items()]
    assert res["peers"] == expected  # configuration order, responder included
    assert res["urls"] == {pid: p.url for pid, p in cluster.peers.items()}

    # Ask every peer alone: followers name the leader and return the same configuration.
    for pid, peer in cluster.peers.items():
        one = run_node_script(
            r"""
(async () => {
  const client = new ZmqRaftClient([P.url], {secret: P.ident, lazy: false});
  const cfg = await client.requestConfig(5000);
  client.close();
  done({leaderId: cfg.leaderId, peers: cfg.peers});
})().catch(fail);
""",
            params={"url": peer.url, "ident": IDENT},
        )
        if _term(cluster) == term:
            assert one["leaderId"] == leader, (pid, one)
        assert one["peers"] == expected, (pid, one)


def test_request_log_info_fields_are_sane(cluster: PeerCluster) -> None:
    js_updates(cluster.urls, IDENT, 3).run()
    res = js_config_and_log_info(cluster.urls, IDENT).run()
    info = res["logInfo"]
    leader = res["leaderId"]
    ours = cluster.log_info(leader)
    assert ours is not None
    assert info["isLeader"] is True
    assert info["leaderId"] == leader
    assert 1 <= info["currentTerm"] <= ours.term
    assert info["firstIndex"] == 1
    assert info["snapshotSize"] == 0
    assert 3 <= info["lastApplied"] <= info["commitIndex"] <= info["lastIndex"]
    assert info["lastIndex"] <= ours.last_index
    # prune index (§12.7): the oldest cached request id's index - 1; nothing is expired here.
    assert 0 <= info["pruneIndex"] <= info["lastIndex"]
    assert set(info) == {
        "isLeader",
        "leaderId",
        "currentTerm",
        "firstIndex",
        "lastApplied",
        "commitIndex",
        "lastIndex",
        "snapshotSize",
        "pruneIndex",
    }


def test_fifty_updates_commit_with_increasing_indexes(cluster: PeerCluster) -> None:
    _, before = _leader_info(cluster)
    payloads = [b"fifty-%02d" % n for n in range(50)]
    res = js_updates(cluster.urls, IDENT, payloads).run()
    indexes = res["indexes"]
    assert len(indexes) == 50
    assert all(isinstance(i, int) for i in indexes), indexes
    assert indexes == sorted(set(indexes)) and indexes[0] > before, (before, indexes)
    _wait_all_applied(cluster, indexes[-1])

    # Sequential and alone: the log after ``before`` holds exactly these 50, in order, at the
    # returned indexes (a CHECKPOINT could sit between them only if a new leader was elected).
    leader = cluster.wait_leader()
    state = _state_only(cluster.read_all(leader, before))
    assert [(i, e.data, e.request_id.hex()) for i, e in state] == list(
        zip(indexes, payloads, res["reqids"], strict=True)
    )

    # Many in flight at once through one client: distinct indexes, all after the others.
    conc = js_updates(
        cluster.urls, IDENT, [b"conc-%d" % i for i in range(16)], concurrent=True
    ).run()
    assert len(set(conc["indexes"])) == 16 and min(conc["indexes"]) > indexes[-1]
    state = _state_only(cluster.read_all(cluster.wait_leader(), indexes[-1]))
    assert sorted(i for i, _ in state) == sorted(conc["indexes"])


def test_idempotent_retry_returns_the_same_index_and_stores_once(cluster: PeerCluster) -> None:
    res = js_idempotent_retry(cluster.urls, IDENT, payload=b"only-once").run()
    assert res["first"] == res["second"] == res["third"], res
    leader = cluster.wait_leader()
    entries = cluster.read_all(leader)
    same = [(i, raw) for i, raw in entries if raw[:12].hex() == res["reqid"]]
    assert len(same) == 1, same
    index, raw = same[0]
    assert index == res["first"]
    assert LogEntry.from_bytes(raw).data == b"only-once"  # the retry's data is not stored

    # A retry after the entry is long applied (not just pending) still finds it.
    again = js_idempotent_retry(
        cluster.urls, IDENT, payload=b"only-once", reqid=bytes.fromhex(res["reqid"])
    ).run()
    assert again["first"] == again["second"] == again["third"] == res["first"], again
    entries = cluster.read_all(cluster.wait_leader())
    assert sum(1 for _, r in entries if r[:12].hex() == res["reqid"]) == 1


def test_request_entries_reads_the_whole_log(cluster: PeerCluster) -> None:
    # 40 KB entries force several <= 64 KiB batches, so the pipelined acknowledgements of the
    # reference client are exercised (docs/protocol.md §10.5).
    payloads = [b"small-%d" % i for i in range(30)] + [bytes([65 + i]) * 40_000 for i in range(6)]
    payloads += [b"tail-%d" % i for i in range(10)]
    written = js_updates(cluster.urls, IDENT, payloads).run()["indexes"]
    _wait_all_applied(cluster, written[-1])

    log = js_read_log(cluster.urls, IDENT).run()
    assert log["complete"] is True
    assert log["snapshots"] == []
    assert log["batches"] > 1
    assert [e["index"] for e in log["entries"]] == list(range(1, log["count"] + 1))
    assert log["lastIndex"] >= written[-1]
    data = dict(iter_state_data(log["entries"]))
    assert [data[i] for i in written] == payloads  # what was written, in order

    # The reference client's view equals what our leader serves and what every peer stores.
    seen = [entry_bytes(e) for e in log["entries"]]
    leader = cluster.wait_leader()
    served = cluster.read_all(leader)
    assert seen == [raw for _, raw in served[: log["count"]]]
    for peer in cluster.peers.values():
        stored = read_our_log(peer.data_dir)
        assert stored[: written[-1]] == seen[: written[-1]], peer.id

    # A bounded read in the middle.
    part = js_read_log(cluster.urls, IDENT, prev_index=written[0] + 1, count=7).run()
    assert part["complete"] is True
    assert [e["index"] for e in part["entries"]] == list(range(written[0] + 2, written[0] + 9))


# Subscribes from ``P.lastIndex``; once the ``P.catchUp`` existing entries arrived (RequestEntries
# gap filling), commits ``P.live`` updates with a separate ZmqRaftClient and waits for them on the
# subscriber (StateBroadcast). Records the order of events.
_JS_SUBSCRIBE_LIVE = r"""
(async () => {
  const sub = new ZmqRaftSubscriber(P.urls, {secret: P.ident, lastIndex: P.lastIndex});
  const entries = [];
  let writer = null, written = null, finished = false;
  const want = P.catchUp + P.live.length;
  const timer = setTimeout(() => fail(new Error(
    `subscriber timeout: got ${entries.length} of ${want} entries`)), P.timeoutMs);
  sub.on('error', fail);
  const finish = () => {
    finished = true;
    clearTimeout(timer);
    const pubUrl = sub.url;
    sub.close();
    if (writer) writer.close();
    done({pubUrl, entries, written});
  };
  let states = 0;  // STATE entries (a new leader's CHECKPOINT is delivered too, not counted)
  sub.on('data', (chunk) => {
    if (finished) return;
    entries.push({index: chunk.logIndex, type: chunk.entryType, term: chunk.readEntryTerm(),
                  reqid: chunk.readRequestKey('hex'), data: hex(chunk.readEntryData())});
    if (chunk.entryType === 0) ++states;
    if (chunk.entryType === 0 && states === P.catchUp) {
      writer = newClient();
      (async () => {
        const out = [];
        for (const p of P.live) out.push(await writer.requestUpdate(genIdent('hex'), unhex(p)));
        written = out;
        if (states >= want) finish();
      })().catch(fail);
    }
    if (states >= want && written) finish();
  });
})().catch(fail);
"""


def test_subscriber_catches_up_and_receives_live_broadcasts(cluster: PeerCluster) -> None:
    before = [b"before-%d" % i for i in range(6)]
    idx = js_updates(cluster.urls, IDENT, before).run()["indexes"]
    leader = cluster.wait_leader()
    term = _term(cluster)
    live = [b"live-%d" % i for i in range(8)]
    res = run_node_script(
        _JS_SUBSCRIBE_LIVE,
        params={
            "urls": cluster.urls,
            "ident": IDENT,
            "lastIndex": idx[0] - 1,
            "catchUp": len(before),
            "live": [p.hex() for p in live],
            "timeoutMs": 20000,
        },
        timeout=35,
    )
    entries = res["entries"]
    # Every entry after lastIndex, contiguous; first the existing ones, then the live ones.
    assert [e["index"] for e in entries] == list(range(idx[0], idx[0] + len(entries)))
    state = [e for e in entries if e["type"] == 0]
    got = [bytes.fromhex(e["data"]) for e in state]
    assert got[: len(before)] == before
    assert got[len(before) :] == live
    assert res["written"] == [e["index"] for e in state[len(before) :]]
    served = dict(cluster.read_all(cluster.wait_leader(), idx[0] - 1))
    assert [entry_bytes(e) for e in entries] == [served[e["index"]] for e in entries]
    # The subscriber asked the leader for its broadcast URL (RequestBroadcastStateUrl).
    assert res["pubUrl"] in {p.pub_url for p in cluster.peers.values()}
    if _term(cluster) == term:
        assert len(state) == len(entries)
        assert res["pubUrl"] == cluster.peers[leader].pub_url


def test_leader_kill9_while_the_reference_client_updates(
    reference_installed: Path, tmp_path: Path
) -> None:
    """kill -9 of our leader under load from the reference client: it fails over by itself,
    its retries (same reqid) create no duplicates, and no acknowledged update is lost."""
    (tmp_path / "raftlog").mkdir()
    with quiet_peer_cluster(tmp_path / "raftlog", ident=IDENT) as cluster:
        try:
            cluster.start()
            old = cluster.wait_leader()
            with BackgroundUpdater(tmp_path / "load", cluster.urls, IDENT, workers=4) as load:
                load.wait_acked(40)
                cluster.kill(old)
                t_kill = time.time() * 1000
                new = cluster.wait_leader(exclude=old)
                after_kill = lambda: [r for r in load.progress() if r["at"] > t_kill]  # noqa: E731
                wait_for("40 updates acknowledged after the kill", lambda: len(after_kill()) >= 40)
                result = load.finish()
            acked = result["acked"]
            entries = cluster.read_all(cluster.wait_leader())
            state = [(i, LogEntry.from_bytes(raw)) for i, raw in entries]
            state = [(i, e) for i, e in state if e.entry_type == EntryType.STATE]
            by_rid = Counter(e.request_id.hex() for _, e in state)
            dups = {rid: n for rid, n in by_rid.items() if n > 1}
            assert not dups, f"duplicated request ids: {dups}"
            where = {e.request_id.hex(): (i, e.data, e.term) for i, e in state}
            for rec in acked:
                got = where.get(rec["reqid"])
                assert got is not None and got[:2] == (rec["index"], bytes.fromhex(rec["data"])), (
                    rec,
                    got,
                )
            # Updates that outlived the client's 500 ms peer timeout were resent (same reqid)
            # to the new leader; those whose entry carries the old term were appended by the
            # killed leader and answered by the new one from its request-id cache.
            old_term = min(e.term for _, e in state)
            slow = [r for r in acked if r["ms"] >= 400]
            cached = [r for r in slow if where[r["reqid"]][2] == old_term]
            print(
                f"leader {old} killed, new leader {new}; {len(acked)} updates acknowledged; "
                f"{len(slow)} took >= 400 ms (max {max(r['ms'] for r in acked)} ms), "
                f"{len(cached)} of them found in the new leader's cache"
            )
            # Every STATE entry is an acknowledged update (nothing unacknowledged slipped in).
            assert len(state) == len(acked)
            assert len({r["index"] for r in acked}) == len(acked)

            # The killed peer restarts and catches up with everything.
            cluster.start(old)
            last = entries[-1][0]
            wait_for(
                f"restarted peer {old} to catch up to {last}",
                lambda: (i := cluster.log_info(old)) is not None and i.last_applied >= last,
            )
            assert cluster.wait_leader() in cluster.peers
            assert read_our_log(cluster.peers[old].data_dir)[:last] == [r for _, r in entries]
        except BaseException:
            _dump_logs(cluster)
            raise
    left = processes_mentioning(tmp_path)
    assert not left, f"processes left running: {left}"
