"""Power-cut schedules: every peer on a lazy file system (``faults.lazyfs``), and a cut drops
whatever a peer had written without making it durable — the one fault ``kill -9`` cannot
show, since a killed process leaves the kernel's page cache behind.

A cut SIGKILLs its peers and then drops their disks' unsynced state; with ``torn`` it keeps a
random prefix of each file's unsynced appends (a writeback that had begun). After a cut the
peers restart; a peer that refuses to start from what its disk kept fails the run with
``RecoveryFailedError`` (a peer must come back from any power cut by itself). The history checker
then judges the run as for every schedule: 0 lost acknowledged writes, 0 duplicated, logs
identical up to the commit index, topic reads equal to the log's records.

Compaction runs continuously in these schedules (``log_compaction_threshold``; request ids
bounded so that compaction can move), so cuts land before, during and after snapshots are
written, and a peer that was down catches up by InstallSnapshot.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

from integration.cluster import probe, wait_for

from faults.cluster import IDENT, FaultCluster
from faults.harness import Chaos, RunOptions
from faults.workload import WorkloadSpec
from raftlog.rpc.messages import RequestVote, RequestVoteResponse
from raftlog.storage.base import HardState
from raftlog.storage.rocks import open_storage

COMPACTING_RAFT = {"log_compaction_threshold": 60, "request_id_cache_max": 400}
"""Compact every 60 applied entries; 400 remembered request ids (far more than the ids a
client retries at once, so exactly-once still holds across every retry of these runs)."""


TOPIC_RETENTION_MS = 3000
"""The load's topic keeps records 3 s: older ones expire, so compaction can pass them."""


class RecoveryFailedError(AssertionError):
    """A peer could not start again from what its disk kept after a power cut."""


class VoteForgottenError(AssertionError):
    """A peer granted a vote, lost power, and came back without it (it could vote twice in
    one term: two leaders)."""


def _last_error(cluster: FaultCluster, peer_id: str) -> str:
    lines = cluster.peers.peers[peer_id].log_path.read_text(errors="replace").splitlines()
    for line in reversed(lines):
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("level") == "error":
                return f"{event.get('event')}: {event.get('error', '')}"
    return lines[-1] if lines else "(empty log)"


def cut(chaos: Chaos, ids: Sequence[str]) -> None:
    """Cut the power of ``ids`` (torn appends half of the time) and count it."""
    torn = chaos.rng.randrange(1 << 30) if chaos.rng.random() < 0.5 else None
    dropped = chaos.cluster.power_cut(ids, torn)
    chaos.down.update(ids)
    chaos.did["power_cuts"] += 1
    chaos.did["coordinated_cuts"] += set(ids) >= set(chaos.members)
    chaos.did["peers_cut"] += len(ids)
    chaos.did["dropped_bytes"] += dropped["bytes"]
    chaos.did["dropped_entries"] += dropped["entries"]


def restart_checked(chaos: Chaos, ids: Sequence[str]) -> None:
    """Restart ``ids`` in random order with small random gaps; wait for a leader; every one
    of them must still be running then (else ``RecoveryFailedError`` with its error)."""
    order = list(ids)
    chaos.rng.shuffle(order)
    for peer_id in order:
        chaos.pause_for(chaos.rng.uniform(0.0, 0.3))
        chaos.restart(peer_id)
    cluster = chaos.cluster

    def settled() -> bool:
        # every restarted peer has either exited or come up (answers RequestLogInfo): a
        # leader elected by the others alone says nothing of a peer still checking its disk
        # -- one that refused its data a moment later was once taken for recovered
        if any(cluster.exit_code(p) is not None for p in order):
            return True
        infos = cluster.log_infos()  # one probe round answers both questions
        return all(infos.get(p) is not None for p in order) and any(
            info is not None and info.is_leader for info in infos.values()
        )

    wait_for("a leader after the power came back", settled, 60, interval=0.1)
    for peer_id in order:
        code = cluster.exit_code(peer_id)
        if code is not None:
            raise RecoveryFailedError(
                f"peer {peer_id} exited with {code} after a power cut: "
                f"{_last_error(cluster, peer_id)}"
            )


def power_cut_all(chaos: Chaos) -> None:
    """Cut every peer at once under load, bring them back, repeat."""
    while chaos.running():
        chaos.wait_acks(10)
        chaos.did["compactions_before"] = len(chaos.cluster.events("log_compacted"))
        cut(chaos, chaos.members)
        restart_checked(chaos, chaos.members)


def power_cut_leader(chaos: Chaos) -> None:
    """Cut the leader alone; the others elect and go on; bring it back; repeat."""
    while chaos.running():
        leader = chaos.leader()
        chaos.wait_acks(5)
        cut(chaos, [leader])
        chaos.did["leader_cuts"] += 1
        chaos.leader(exclude=leader)
        chaos.wait_acks(5)
        restart_checked(chaos, [leader])
        chaos.wait_acks(5)


def power_cut_install_snapshot(chaos: Chaos) -> None:
    """A follower stays down while the others compact past its log, so it catches up by
    InstallSnapshot when it restarts; its power is cut shortly after (during or right after
    the install), then it must catch up again."""
    cluster = chaos.cluster
    while chaos.running():
        leader = chaos.leader()
        follower = chaos.rng.choice([p for p in chaos.members if p != leader])
        info = cluster.log_infos().get(leader)
        last = info.last_index if info is not None else 0
        cut(chaos, [follower])
        # the leader compacts past everything the follower may hold: it needs the snapshot
        _wait_compacted_past(cluster, last)
        installs = _installs(cluster, follower)
        chaos.restart(follower)
        chaos.pause_for(chaos.rng.uniform(0.0, 1.0))
        during = _installs(cluster, follower) == installs
        chaos.did["cut_before_install_done"] += during
        cut(chaos, [follower])
        restart_checked(chaos, [follower])
        _wait_installs(cluster, follower, installs)
        chaos.did["snapshot_installs"] += 1
        chaos.wait_acks(5)


def power_cut_after_vote(chaos: Chaos) -> None:
    """A vote is a promise: once a peer answers "granted", its new term and its vote must
    survive a power cut (Raft's currentTerm/votedFor, persisted before answering). The
    leader's power is cut and the follower cut off from the third peer; the leader's id then
    asks the follower (directly) for a vote in a far higher term, as a candidate with a newer
    log would; the moment it grants it, its power is cut too, and its hard state is read
    from what its disk kept."""
    cluster = chaos.cluster
    while chaos.running():
        leader = chaos.leader()
        voter = chaos.rng.choice([p for p in chaos.members if p != leader])
        chaos.wait_acks(5)
        terms = [i.term for i in cluster.log_infos().values() if i is not None]
        term = max(terms) + 1000
        # the voter must not hear a new leader meanwhile: one that the third peer became
        # would keep it from granting any vote (leader stickiness), so cut that link too
        third = [p for p in chaos.members if p not in (leader, voter)]
        cluster.net.partition([voter], third)
        cut(chaos, [leader])
        ask = RequestVote(leader, term, 1 << 40, term)

        def granted(ask: RequestVote = ask, voter: str = voter) -> bool:
            got = probe(cluster.direct_url(voter), IDENT, ask, timeout=0.5)
            return bool(got) and isinstance(got[0], RequestVoteResponse) and got[0].vote_granted

        wait_for("the vote", granted, 30, 0.05)
        cut(chaos, [voter])
        cluster.net.heal()
        chaos.did["votes_granted"] += 1
        kept = _hard_state(cluster, voter)
        if kept.current_term < term or (kept.current_term == term and kept.voted_for != leader):
            raise VoteForgottenError(
                f"peer {voter} granted {leader} its vote in term {term}, then lost power and "
                f"kept term {kept.current_term}, vote {kept.voted_for!r}"
            )
        restart_checked(chaos, [leader, voter])
        chaos.wait_acks(5)


def _hard_state(cluster: FaultCluster, peer_id: str) -> HardState:
    """What ``peer_id``'s disk holds (the peer must be down)."""
    log, hard_state, snapshots = open_storage(cluster.peers.peers[peer_id].data_dir, read_only=True)
    try:
        return hard_state.load()
    finally:
        log.close()
        hard_state.close()
        snapshots.close()


def power_cut_compaction(chaos: Chaos) -> None:
    """Cut every peer right as one of them compacts (snapshot file written, log prefix
    deleted), at a random point of it."""
    cluster = chaos.cluster
    while chaos.running():
        before = _compacted(cluster)
        _wait_compactions(cluster, before, interval=0.01)
        chaos.did["compactions"] += _compacted(cluster) - before
        cut(chaos, chaos.members)
        restart_checked(chaos, chaos.members)
        chaos.wait_acks(5)


def _compacted(cluster: FaultCluster) -> int:
    return len(cluster.events("log_compacted"))


def _wait_compacted_past(cluster: FaultCluster, index: int) -> None:
    def past() -> bool:
        return any(e["index"] > index for e in cluster.events("log_compacted"))

    wait_for(f"a compaction past {index}", past, 60, 0.1)


def _wait_compactions(cluster: FaultCluster, before: int, interval: float = 0.1) -> None:
    wait_for("a compaction", lambda: _compacted(cluster) > before, 30, interval)


def _wait_installs(cluster: FaultCluster, peer_id: str, before: int) -> None:
    wait_for("a snapshot install", lambda: _installs(cluster, peer_id) > before, 60, 0.1)


def _installs(cluster: FaultCluster, peer_id: str) -> int:
    return sum(1 for e in cluster.events("snapshot_installed") if e["peer"] == peer_id)


def lazy_options(raft: dict[str, object] | None = None) -> RunOptions:
    """Run options of a power-cut schedule: lazy disks under every peer, compaction on."""
    return RunOptions(
        raft={**COMPACTING_RAFT, **(raft or {})},
        setup=FaultCluster.lazy_disks,
        topic_retention_ms=TOPIC_RETENTION_MS,
        spec=WorkloadSpec(transactors=1),
    )
