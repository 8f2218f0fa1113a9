"""The named fault schedules: each a function of ``harness.Chaos`` plus its run options.

Every random choice comes from ``chaos.rng`` (seeded), so a seed names a run. A schedule
records what it did in ``chaos.did``; ``GUARDS`` says how much of it must have happened for
the run to count (a run whose fault never happened proves nothing).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import zmq
from integration.cluster import wait_for

from faults import power
from faults.clock_schedules import (
    clock_entry,
    clock_setup,
    clock_step_follower,
    clock_step_leader,
)
from faults.cluster import IDENT, FaultCluster
from faults.group_schedule import GroupLoad, group_options
from faults.harness import Chaos, FaultFunction, RunOptions
from raftlog import sockets
from raftlog.client import RaftClient
from raftlog.rpc.messages import RequestEntries
from raftlog.rpc.request_encoders import encode_request

SLOW_SYNC_MS = 100
BURST_STREAMS = 200
"""The slow disk: every fsync of the slow peer takes this much longer."""


def leader_kill_loop(chaos: Chaos) -> None:
    """kill -9 the leader as soon as it has taken writes; restart it after a short while."""
    while chaos.running():
        leader = chaos.leader()
        chaos.wait_acks(5)
        chaos.kill(leader)
        chaos.did["leader_kills"] += 1
        chaos.leader(exclude=leader)
        chaos.pause_for(chaos.rng.uniform(0.2, 1.0))
        chaos.restart(leader)
        chaos.wait_acks(5)


def queue_group_leader_kill(chaos: Chaos) -> None:
    """kill -9 the leader while two members lease and ack a queue group (``leader_kill_loop``
    with the group load beside the workload)."""
    load = GroupLoad(chaos.cluster.urls)
    load.start()
    try:
        leader_kill_loop(chaos)
    finally:
        load.stop()
    chaos.did["group_acks"] = load.acks
    chaos.did["group_call_failures"] = load.failures


def random_kill_loop(chaos: Chaos) -> None:
    """kill -9 a random peer (the leader or not), restart it after 0.3-1.5 s."""
    while chaos.running():
        victim = chaos.rng.choice(chaos.members)
        if victim == chaos.cluster.leader():
            chaos.did["leader_kills"] += 1
        chaos.kill(victim)
        chaos.pause_for(chaos.rng.uniform(0.3, 1.5))
        chaos.restart(victim)
        chaos.wait_acks(5)


def stale_leader_pause(chaos: Chaos) -> None:
    """SIGSTOP the leader until the others elect a new one and take writes, then SIGCONT:
    the old leader wakes up believing it still leads (a zombie) and must not ack anything.
    A pause longer than the peer links' heartbeat time-out is counted in ``long_pauses``:
    the new leader's link to the paused peer is closed then, so nothing of it waits for the
    peer when it wakes, and it may campaign at once (``test_schedule`` allows for that)."""
    while chaos.running():
        leader = chaos.leader()
        chaos.cluster.pause(leader)
        paused = time.monotonic()
        chaos.did["pauses"] += 1
        chaos.leader(exclude=leader)
        chaos.did["leader_changes"] += 1
        chaos.wait_acks(5)
        chaos.cluster.resume(leader)
        if time.monotonic() - paused > sockets.PEER_HEARTBEAT_TIMEOUT_MS / 1000:
            chaos.did["long_pauses"] += 1
        chaos.wait_acks(5)


def leader_partition(chaos: Chaos) -> None:
    """Cut the leader off from both followers (clients still reach it), heal, repeat."""
    net = chaos.cluster.net
    while chaos.running():
        leader = chaos.leader()
        others = [p for p in chaos.members if p != leader]
        net.partition([leader], others)
        chaos.did["partitions"] += 1
        chaos.leader(exclude=leader)
        chaos.did["leader_changes"] += 1
        chaos.wait_acks(5)
        chaos.pause_for(chaos.rng.uniform(0.5, 1.5))
        net.heal()
        chaos.wait_acks(5)


def one_way_partition(chaos: Chaos) -> None:
    """A follower hears the leader, but everything it sends (answers, votes) is lost."""
    net = chaos.cluster.net
    while chaos.running():
        leader = chaos.leader()
        follower = chaos.rng.choice([p for p in chaos.members if p != leader])
        net.one_way(follower, leader)
        chaos.did["one_way"] += 1
        chaos.pause_for(chaos.rng.uniform(1.5, 3.0))
        chaos.did["dropped"] += net.dropped(follower, leader)
        net.heal()
        chaos.wait_acks(5)


def partition_membership(chaos: Chaos) -> None:
    """Replace a partitioned follower by a new peer (joint consensus under a partition),
    then stop the removed peer, as an operator would."""
    cluster = chaos.cluster
    leader = chaos.leader()
    gone = chaos.rng.choice([p for p in chaos.members if p != leader])
    newcomer = "4"
    peer = cluster.add_outsider(newcomer)
    cluster.start(newcomer)
    chaos.wait_acks(5)
    cluster.net.partition([gone], [p for p in cluster.ids if p != gone])
    chaos.did["partitions"] += 1
    keep = [p for p in chaos.members if p != gone]
    new_config = [(p, cluster.peers.peers[p].url) for p in keep] + [(newcomer, peer.url)]

    async def change() -> int:
        async with RaftClient(cluster.urls, IDENT, timeout=30.0) as client:
            return await client.config_update(new_config)

    asyncio.run(change())
    chaos.did["config_changes"] += 1
    chaos.members = [*keep, newcomer]
    chaos.wait_acks(5)
    cluster.kill(gone)  # removed: the operator stops it
    chaos.pause_for(chaos.left() / 2)
    cluster.net.heal()
    # the rest of the run: kill the new member once, under load
    chaos.kill(newcomer)
    chaos.pause_for(0.5)
    chaos.restart(newcomer)
    chaos.wait_acks(5)


def all_peers_crash(chaos: Chaos) -> None:
    """kill -9 every peer at once, restart them in random order with random delays."""
    while chaos.running():
        chaos.wait_acks(10)
        chaos.cluster.kill_all()
        chaos.did["crashes"] += 1
        order = list(chaos.members)
        chaos.rng.shuffle(order)
        for peer_id in order:
            chaos.pause_for(chaos.rng.uniform(0.0, 0.5))
            chaos.cluster.restart(peer_id)
        chaos.leader()


def slow_disk_leader(chaos: Chaos) -> None:
    """Peer 1 (slow fsync) starts as the leader; run under load; leadership may move (also
    before the window: a fsync of 100 ms + a loaded host is close to the election timeout,
    so the guard asks that the slow peer led at all, not that it still leads now)."""
    chaos.did["slow_leader"] += any(e["peer"] == "1" for e in chaos.cluster.events("became_leader"))
    while chaos.running():
        chaos.wait_acks(5)
        chaos.pause_for(0.5)


def full_disk_follower(chaos: Chaos) -> None:
    """Fill a follower's (tiny tmpfs) disk; it must stop rather than break a promise; free
    the space and it restarts and catches up (on heal)."""
    cluster = chaos.cluster
    victim = "3"
    cluster.fill_disk(victim)
    chaos.did["disk_filled"] += 1
    wait_for(
        "the full follower to stop",
        lambda: cluster.exit_code(victim) is not None,
        max(chaos.left(), 30.0),
        interval=0.1,
    )
    chaos.did[f"exit_code_{cluster.exit_code(victim)}"] += 1
    cluster.kill(victim)  # reap it
    chaos.wait_acks(10)  # the majority goes on without it
    cluster.free_disk(victim)
    chaos.pause_for(chaos.left())


def cpu_starvation(chaos: Chaos) -> None:
    """A busy process on one core beside the peers, under load, for the whole run."""
    chaos.cluster.cpu_hog(core=0)
    chaos.did["hogs"] += 1
    while chaos.running():
        chaos.wait_acks(5)
        chaos.pause_for(0.5)


def entries_burst(chaos: Chaos) -> None:
    """Bursts of RequestEntries streams from the start of the log that are never read (a
    crowd of slow readers), against the leader, under load."""
    context = zmq.Context()
    try:
        while chaos.running():
            leader = chaos.leader()
            url = chaos.cluster.peers.peers[leader].url
            streams = []
            for n in range(BURST_STREAMS):
                sock = sockets.client_dealer(context, url)
                sock.send_multipart(
                    encode_request(RequestEntries(0), ident=IDENT.encode(), id=n.to_bytes(4, "big"))
                )
                streams.append(sock)
            chaos.did["bursts"] += 1
            chaos.pause_for(1.5)  # the streams sit unread while the leader serves them
            for sock in streams:
                sock.close(linger=0)
            chaos.wait_acks(5)
    finally:
        context.term()


def _slow_leader_setup(cluster: FaultCluster) -> None:
    cluster.slow_disk("1", SLOW_SYNC_MS)
    _prefer_first_leader(cluster, "1")


def _prefer_first_leader(cluster: FaultCluster, favourite: str) -> None:
    """Others wait 8 s longer before their first election, so ``favourite`` leads first (with
    2 s it sometimes did not: on a loaded host one Python peer can start 3 s after another)."""
    for peer_id in cluster.ids:
        if peer_id != favourite:
            cluster.extra_args[peer_id] = ["--set", "first_election_extra=8000"]


def _full_disk_setup(cluster: FaultCluster) -> None:
    cluster.small_disk("3", 32)
    _prefer_first_leader(cluster, "1")


@dataclass
class Schedule:
    name: str
    fault: FaultFunction
    guards: dict[str, int]
    """``chaos.did`` counters that must reach these minimums."""
    options: Callable[[], RunOptions] = field(default=RunOptions)

    def run_options(self, seconds: float) -> RunOptions:
        """The options of one run of ``seconds`` of faults, longer while a guard is short
        (``RunOptions.guards``): a short run in ``make test`` then still does its fault."""
        options = self.options()
        options.duration = seconds
        options.guards = dict(self.guards)
        return options


SCHEDULES: dict[str, Schedule] = {
    s.name: s
    for s in [
        Schedule("leader_kill_loop", leader_kill_loop, {"leader_kills": 2}),
        Schedule("random_kill_loop", random_kill_loop, {"kills": 3}),
        Schedule("stale_leader_pause", stale_leader_pause, {"pauses": 1, "elections": 1}),
        Schedule("leader_partition", leader_partition, {"partitions": 1, "elections": 1}),
        Schedule("one_way_partition", one_way_partition, {"one_way": 1, "dropped": 1}),
        Schedule("partition_membership", partition_membership, {"config_changes": 1}),
        Schedule("all_peers_crash", all_peers_crash, {"crashes": 1}),
        Schedule(
            "slow_disk_leader",
            slow_disk_leader,
            {"slow_leader": 1},
            lambda: RunOptions(setup=_slow_leader_setup),
        ),
        Schedule(
            "full_disk_follower",
            full_disk_follower,
            {"disk_filled": 1},
            lambda: RunOptions(setup=_full_disk_setup),
        ),
        Schedule("cpu_starvation", cpu_starvation, {"hogs": 1}),
        Schedule("entries_burst", entries_burst, {"bursts": 1}),
        Schedule(
            "queue_group_leader_kill",
            queue_group_leader_kill,
            {"leader_kills": 1, "group_acks": 20},
            group_options,
        ),
        Schedule(
            "clock_step_leader",
            clock_step_leader,
            {"clock_steps": 2},
            lambda: RunOptions(setup=clock_setup, own_entries=clock_entry),
        ),
        Schedule(
            "clock_step_follower",
            clock_step_follower,
            {"clock_steps": 2},
            lambda: RunOptions(setup=clock_setup, own_entries=clock_entry),
        ),
        Schedule("power_cut_all", power.power_cut_all, {"power_cuts": 1}, power.lazy_options),
        Schedule(
            "power_cut_leader", power.power_cut_leader, {"leader_cuts": 1}, power.lazy_options
        ),
        Schedule(
            "power_cut_install_snapshot",
            power.power_cut_install_snapshot,
            {"snapshot_installs": 1, "power_cuts": 2},
            power.lazy_options,
        ),
        Schedule(
            "power_cut_after_vote",
            power.power_cut_after_vote,
            {"votes_granted": 1},
            power.lazy_options,
        ),
        Schedule(
            "power_cut_compaction",
            power.power_cut_compaction,
            {"compactions": 1, "power_cuts": 1},
            power.lazy_options,
        ),
    ]
}
POWER_SCHEDULES = [name for name in SCHEDULES if name.startswith("power_cut")]


def unmet_guards(schedule: Schedule, did: dict[str, int]) -> list[str]:
    return [f"{k}={did.get(k, 0)} < {v}" for k, v in schedule.guards.items() if did.get(k, 0) < v]
