"""One seeded simulation run: a chaos phase, then heal and a liveness phase.

Chaos: partitions (two-way, one-way, isolating the leader), flaky links, crashes (also in the
middle of a Ready), restarts from durable state, membership changes through ConfigUpdate,
log compaction (so that lagging peers need InstallSnapshot), client retries with the same
request id. Invariants are checked after every step. Then every link is healed and every node
restarted: within ``liveness_ticks`` a leader must exist, every client operation must have been
acknowledged, the last membership change must be complete and every member must have applied
everything the leader committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random

from raftlog.consensus import Bug, CoreConfig
from sim.cluster import SimCluster
from sim.invariants import InvariantError, Invariants
from sim.network import LinkRule
from sim.tracing import Trace
from sim.workload import Workload


class SimulationError(AssertionError):
    def __init__(self, seed: int, cause: BaseException, trace: str) -> None:
        self.seed = seed
        self.cause = cause
        super().__init__(
            f"simulation seed {seed} failed: {type(cause).__name__}: {cause}\n"
            f"re-run alone with RAFTLOG_SIM_SEED={seed}\n--- last events ---\n{trace}"
        )


@dataclass(frozen=True)
class SimParams:
    seed: int
    steps: int = 2000
    liveness_ticks: int = 8000
    members: int = 3
    spares: int = 1
    drop: float = 0.02
    duplicate: float = 0.01
    delay: tuple[int, int] = (1, 4)
    chaos_rate: float = 0.02
    crash_in_ready: float = 0.0005
    membership: bool = True
    compaction: bool = True
    clients: int = 3
    client_rate: float = 0.3
    max_ops: int = 10_000
    max_append_bytes: int = 256
    max_inflight_messages: int = 4
    prevent_spiral_elections: bool = True
    check_quorum: bool = False
    leader_stickiness: bool = True
    restart_after: tuple[int, int] = (1, 150)
    max_persist_delay: int = 0
    actions: tuple[str, ...] = (
        "partition",
        "isolate_leader",
        "one_way",
        "flaky",
        "crash",
        "crash_leader",
        "compact",
        "compact",
        "membership",
        "membership",
        "swap_kind",
    )
    request_id_ttl_ms: int = 4000
    request_id_accept_margin_ms: int = 1000
    bugs: frozenset[Bug] = field(default_factory=frozenset)


def random_params(seed: int, steps: int, bugs: frozenset[Bug] = frozenset()) -> SimParams:
    """Vary the cluster shape and the fault mix with the seed."""
    rng = Random(seed * 7919 + 17)
    spiral = rng.random() < 0.8
    members = rng.choice((1, 3, 3, 3, 4, 5, 5))
    return SimParams(
        seed=seed,
        steps=steps,
        members=members,
        spares=rng.choice((0, 1, 1, 2)),
        drop=rng.choice((0.0, 0.01, 0.05, 0.15)),
        duplicate=rng.choice((0.0, 0.01, 0.05)),
        delay=rng.choice(((1, 1), (1, 3), (1, 6), (2, 12))),
        chaos_rate=rng.choice((0.005, 0.02, 0.04)),
        crash_in_ready=rng.choice((0.0, 0.0005, 0.002)),
        max_persist_delay=rng.choice((0, 0, 1, 4)),
        membership=rng.random() < 0.6,
        compaction=rng.random() < 0.7,
        clients=rng.choice((1, 3, 5)),
        client_rate=rng.choice((0.05, 0.3, 0.8)),
        max_append_bytes=rng.choice((128, 512, 65536)),
        max_inflight_messages=rng.choice((1, 4, 16)),
        prevent_spiral_elections=spiral,
        check_quorum=rng.random() < 0.3,
        # Without either guard removed peers disrupt forever (Raft paper §6): no liveness.
        leader_stickiness=not spiral or rng.random() < 0.7,
        bugs=bugs,
    )


@dataclass
class SimStats:
    seed: int
    ticks: int
    committed: int
    acked: int
    elections: int
    liveness_ticks: int
    config_results: dict[str, int]
    counters: dict[str, int]


class _Chaos:
    def __init__(self, cluster: SimCluster, workload: Workload, rng: Random, p: SimParams):
        self.cluster = cluster
        self.workload = workload
        self.rng = rng
        self.p = p
        self.heal_at: int | None = None

    def act(self) -> None:
        cluster, rng = self.cluster, self.rng
        if self.heal_at is not None and cluster.tick >= self.heal_at:
            self.heal_at = None
            cluster.network.heal()
            cluster.trace.add("heal")
        if rng.random() >= self.p.chaos_rate:
            return
        ids = sorted(cluster.nodes)
        everyone = set(ids)
        action = rng.choice(self.p.actions)
        leader = cluster.leader()
        if action == "partition":
            side = set(rng.sample(ids, rng.randint(1, max(1, len(ids) // 2))))
            cluster.network.partition(side, everyone - side)
            self._heal_later(action, sorted(side))
        elif action == "isolate_leader" and leader is not None:
            cluster.network.isolate(leader.id, everyone)
            self._heal_later(action, leader.id)
        elif action == "one_way":
            src, dst = rng.sample(ids, 2) if len(ids) > 1 else (ids[0], ids[0])
            cluster.network.cut_one_way(src, dst)
            self._heal_later(action, src, dst)
        elif action == "flaky" and len(ids) > 1:
            src, dst = rng.sample(ids, 2)
            cluster.network.set_rule(src, dst, LinkRule(drop=0.5, duplicate=0.2, delay=(1, 30)))
            self._heal_later(action, src, dst)
        elif action in ("crash", "crash_leader"):
            victim = leader.id if action == "crash_leader" and leader else rng.choice(ids)
            cluster.crash(victim)
            cluster.restart_at[victim] = cluster.tick + rng.randint(*self.p.restart_after)
        elif action == "compact" and self.p.compaction:
            node = leader.id if leader is not None and rng.random() < 0.5 else rng.choice(ids)
            cluster.compact(node, self.p.request_id_ttl_ms)
        elif action == "membership" and self.p.membership:
            self.workload.change_membership()
        elif action == "swap_kind":
            peer = rng.choice(ids)
            cluster.unmarked ^= {peer}
            cluster.counters["swap_kind"] += 1
            cluster.trace.add("swap_kind", peer, peer in cluster.unmarked)

    def _heal_later(self, *what: object) -> None:
        self.cluster.trace.add("fault", *what)
        self.heal_at = self.cluster.tick + self.rng.randint(20, 300)


def _converged(cluster: SimCluster, workload: Workload) -> bool:
    leader = cluster.leader()
    if leader is None or workload.outstanding:
        return False
    core = leader.core
    assert core is not None
    if core.commit_index != core.last_index or core.config.is_joint or not core.config_known:
        return False
    for peer in core.config.new:
        node = cluster.nodes[peer.id]
        if node.core is None or node.sm.index != core.commit_index:
            return False
    return True


def run_simulation(p: SimParams) -> SimStats:
    rng = Random(p.seed)
    trace = Trace()
    ids = [f"n{i}" for i in range(p.members + p.spares)]

    def make_config(peer_id: str) -> CoreConfig:
        return CoreConfig(
            peer_id,
            first_election_extra_ticks=rng.choice((0, 30)),
            max_append_bytes=p.max_append_bytes,
            max_inflight_messages=p.max_inflight_messages,
            max_inflight_bytes=p.max_inflight_messages * p.max_append_bytes,
            prevent_spiral_elections=p.prevent_spiral_elections,
            check_quorum=p.check_quorum,
            leader_stickiness=p.leader_stickiness,
            request_id_ttl_ms=p.request_id_ttl_ms,
            request_id_accept_margin_ms=p.request_id_accept_margin_ms,
            bugs=p.bugs,
        )

    link = LinkRule(drop=p.drop, duplicate=p.duplicate, delay=p.delay)
    cluster = SimCluster(ids, ids[: p.members], rng, link, trace, make_config)
    invariants = Invariants(cluster)
    workload = Workload(cluster, Random(rng.random()), p.clients, p.max_ops, p.client_rate)
    chaos = _Chaos(cluster, workload, rng, p)
    cluster.crash_in_ready = p.crash_in_ready
    cluster.restart_after = p.restart_after
    cluster.max_persist_delay = p.max_persist_delay
    liveness = 0
    try:
        cluster.start_all()
        for _ in range(p.steps):
            chaos.act()
            workload.act(allow_new=True)
            cluster.step()
            invariants.check(cluster.tick)
        cluster.network.heal()
        cluster.crash_in_ready = 0.0
        trace.add("heal_all")
        for node_id in ids:
            cluster.restart(node_id)
        while not _converged(cluster, workload):
            liveness += 1
            if liveness > p.liveness_ticks:
                raise InvariantError(
                    f"liveness: no convergence {p.liveness_ticks} ticks after healing "
                    f"(outstanding client operations: {workload.outstanding})"
                )
            workload.act(allow_new=False)
            cluster.step()
            invariants.check(cluster.tick)
        invariants.check_log_matching()
        for request_id, index in workload.acked():
            entry = invariants.canon.get(index)
            if entry is None or entry.request_id != request_id:
                raise InvariantError(f"acknowledged request {request_id.hex()} lost at {index}")
    except Exception as exc:
        raise SimulationError(p.seed, exc, trace.render()) from exc
    return SimStats(
        seed=p.seed,
        ticks=cluster.tick,
        committed=len(invariants.canon),
        acked=len(workload.acked()),
        elections=len(invariants.leaders),
        liveness_ticks=liveness,
        config_results=dict(workload.config_results),
        counters=dict(cluster.counters),
    )
