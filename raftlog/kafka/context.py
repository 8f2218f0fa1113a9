"""What every Kafka handler needs from its peer: the cluster client, the peer's view of who
leads, its applied index, and the listener's settings, in one object."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Final

from raftlog.kafka.coordinator import Coordinator
from raftlog.kafka.fetch_memory import FetchMemory
from raftlog.kafka.protocol import EncodedPayload
from raftlog.kafka.settings import KafkaSettings, node_id, split_kafka_url
from raftlog.observability.view import ViewBox
from raftlog.rest.gateway import ClusterGateway
from raftlog.security.policy import Principal, Role
from raftlog.security.quotas import Quota, QuotaBook
from raftlog.web.auth import Authenticator
from raftlog.web.byte_budget import ByteBudget

SMALL_REQUEST_BYTES: Final = 64 * 1024
"""Request frames of at most this many bytes do not count against ``request_memory_bytes``:
a connection has one frame in hand at a time and ``max_connections`` bounds those, while a
few clients trickling large frames must not hold up every heartbeat, Metadata or small
Produce until ``send_timeout_ms`` drops them."""


@dataclass(frozen=True, slots=True)
class Broker:
    """A peer with a Kafka listener, as Metadata names it."""

    node_id: int
    host: str
    port: int
    peer_id: str


class KafkaContext:
    """The peer-facing side of the listener (built once, used by every connection).

    ``gateway`` is the REST API's cluster gateway (one ``TopicClient`` on this listener's
    loop, leader discovery, the applied-index waits), reused so the Kafka side reaches the
    cluster exactly as REST does: writes through the normal client path to the leader,
    reads from this peer's applied state."""

    def __init__(
        self,
        settings: KafkaSettings,
        gateway: ClusterGateway,
        views: ViewBox,
        *,
        peer_id: str,
        cluster_id: str,
        max_entry_bytes: int,
        request_id_ttl_ms: int | None,
        quota: Quota | None = None,
        auth: Authenticator | None = None,
    ) -> None:
        self.settings = settings
        self.gateway = gateway
        self.views = views
        self.peer_id = peer_id
        self.cluster_id = cluster_id
        self.max_entry_bytes = max_entry_bytes
        self.request_id_ttl_ms = request_id_ttl_ms
        self.brokers = tuple(
            Broker(node_id(pid), *split_kafka_url(url), peer_id=pid)
            for pid, url in settings.brokers
        )
        self.node_id = node_id(peer_id)
        self.auth = auth if auth is not None else Authenticator(None)
        """Checks SASL/PLAIN passwords against the allowlist's REST tokens."""
        self.secure = self.auth.enabled
        self.quota = quota
        """A plaintext cluster's ``[quotas]``, kept per client address like REST's."""
        self.quotas = QuotaBook(None, per_address=not self.secure)
        self.coordinator = Coordinator(settings.groups)
        """Consumer-group membership (used while this peer leads)."""
        self.fetch_memory = FetchMemory(settings.fetch_memory_bytes)
        """The Fetch answer bytes all connections hold together (``[kafka]``)."""
        self.request_memory = ByteBudget(settings.request_memory_bytes,
                                         exempt=SMALL_REQUEST_BYTES)
        """The request frame bytes all connections hold together (``[kafka]``)."""
        self.kept_metadata: dict[object, tuple[tuple[str, ...], EncodedPayload]] = {}
        """Metadata answers for every topic, encoded, with the topic list they list
        (``raftlog.kafka.admin.metadata``)."""

    @property
    def own_url(self) -> str:
        """This peer's ROUTER URL (reads go there)."""
        return self.gateway.own_url

    def leader_node(self) -> int:
        """The Kafka broker id of the Raft leader as this peer last saw it; -1 when the
        leader is unknown or has no Kafka listener (clients then retry Metadata)."""
        view = self.views.latest()
        leader = None if view is None else view.leader_id
        for broker in self.brokers:
            if broker.peer_id == leader:
                return broker.node_id
        return -1

    def allowed(self, who: Principal | None, role: Role, *, publish: str | None = None,
                read: str | None = None, consume: str | None = None) -> bool:
        """Whether the connection's client has ``role`` (and may publish to / read the
        topic, consume in the group): the REST rule (``raftlog.web.auth``,
        ``raftlog.rest.group_routes``); always on a plaintext listener."""
        if not self.secure:
            return True
        if who is None or who.role is None or who.role < role:
            return False
        if publish is not None and not who.publish.allows(publish):
            return False
        if consume is not None and not who.consume.allows(consume):
            return False
        return read is None or who.read.allows(read)

    async def throttle(self, source: str, who: Principal | None, records: int,
                       nbytes: int) -> float:
        """Hold a publish of ``records`` records, ``nbytes`` bytes until its publish quota
        admits it -- the client's own on a secure cluster, else the source address's -- and
        return the seconds held (Kafka's throttle time). Kafka throttles rather than
        refuses, so the batch is delayed, never lost."""
        quota, name = (None, source) if self.secure else (self.quota, source)
        if self.secure and who is not None:
            quota, name = who.quota, who.name
        if quota is None or not quota.limits_publish:
            return 0.0
        held = 0.0
        while wait := self.quotas.publish_wait(name, quota, records, nbytes,
                                               time.monotonic()):
            await asyncio.sleep(wait)
            held += wait
        return held

    def is_leader(self) -> bool:
        """Whether this peer leads (its last published view)."""
        view = self.views.latest()
        return view is not None and view.role == "leader"
