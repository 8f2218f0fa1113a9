"""What the status page shows: this peer's view plus every member's own RequestLogInfo.

Runs in the HTTP listener's event loop, never in the consensus loop: every
``POLL_INTERVAL`` it asks each member of the configuration in the latest
:class:`PeerView` for its log info through the project's one client transport
(:class:`~raftlog.client.RaftClient`, ``peer_url`` + ``fail_fast``), so a member killed
with ``kill -9`` shows as down within about a second. The page's "recent elections" are
the peer's own ring (``PeerView.elections``), so a freshly opened page shows history; the
topics' publish rates come from successive views' publish counters (``PublishRates``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from raftlog.client import RaftClient
from raftlog.errors import RaftlogError
from raftlog.observability.view import MemberView, PeerView, ViewBox
from raftlog.rpc.clock import ClockReading, ask_clock, clock_warning
from raftlog.rpc.messages import RequestLogInfoResponse
from raftlog.security.settings import CurveClient
from raftlog.topics.counters import TopicStat

POLL_INTERVAL: Final = 0.5
"""Seconds between two rounds of RequestLogInfo to every member."""
PROBE_TIMEOUT: Final = 0.8
"""Seconds one member may take to answer before it counts as down this round."""
RATE_WINDOW: Final = 10.0
"""Seconds of publish counters a topic's publish rate is averaged over."""


class PublishRates:
    """Records per second published to each topic, from the views' publish counters
    (``TopicStat[3]``), averaged over the last ``RATE_WINDOW`` seconds."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self._window = window
        self._samples: deque[tuple[float, dict[str, int]]] = deque()

    def observe(self, view: PeerView) -> None:
        """Add the view's counters (once per published view)."""
        if self._samples and self._samples[-1][0] >= view.published_at:
            return
        self._samples.append((view.published_at, {s[0]: s[3] for s in view.topic_stats}))
        while len(self._samples) > 2 and view.published_at - self._samples[1][0] >= self._window:
            self._samples.popleft()

    def rate(self, topic: str) -> float | None:
        """Records/s over the window (None: not two samples of the topic yet). A counter
        that went down (the topic was re-created) counts from zero."""
        if len(self._samples) < 2:
            return None
        (t0, first), (t1, last) = self._samples[0], self._samples[-1]
        if topic not in last or topic not in first or t1 <= t0:
            return None
        gained = last[topic] - first[topic]
        return (last[topic] if gained < 0 else gained) / (t1 - t0)


@dataclass(frozen=True, slots=True)
class MemberState:
    """One member's last answer (None: it did not answer the last round)."""

    info: RequestLogInfoResponse | None
    last_seen: float | None
    """Wall time of its last answer (None: never answered)."""


class ClusterPoller:
    """Polls the members named by the latest view; ``snapshot()`` renders the page's JSON."""

    def __init__(
        self,
        views: ViewBox,
        ident: str,
        http_urls: dict[str, str] | None = None,
        curve: CurveClient | None = None,
    ) -> None:
        """``curve``: this peer's own CURVE client keys in a secure cluster (the members
        admit each other), None for plaintext."""
        self._views = views
        self._curve = curve
        self._ident = ident
        self._http_urls = dict(http_urls or {})
        self._members: dict[str, MemberState] = {}
        self._clocks: dict[str, ClockReading | None] = {}
        self.rates = PublishRates()
        self._client: RaftClient | None = None

    async def run(self) -> None:
        """Poll until cancelled (the listener cancels it when it stops)."""
        try:
            while True:
                view = self._views.latest()
                if view is not None:
                    self.rates.observe(view)
                    await self._round(view)
                await asyncio.sleep(POLL_INTERVAL)
        finally:
            if self._client is not None:
                await self._client.aclose()

    def _client_for(self, view: PeerView) -> RaftClient:
        if self._client is None:
            self._client = RaftClient(
                [m.url for m in view.members] or ["tcp://127.0.0.1:1"],
                self._ident,
                timeout=PROBE_TIMEOUT,
                refused_timeout=PROBE_TIMEOUT / 2,
                curve=self._curve,
            )
        return self._client

    async def _round(self, view: PeerView) -> None:
        client = self._client_for(view)
        members = [m for m in view.members if m.id != view.peer_id]
        answers = await asyncio.gather(
            *(self._ask(client, m.url) for m in members), return_exceptions=False
        )
        clocks = await asyncio.gather(
            *(ask_clock(client, m.url, PROBE_TIMEOUT) for m in view.members)
        )
        now = time.time()
        seen: dict[str, MemberState] = {}
        for member, info in zip(members, answers, strict=True):
            before = self._members.get(member.id)
            last = now if info is not None else (before.last_seen if before else None)
            seen[member.id] = MemberState(info, last)
        self._clocks = {m.id: c for m, c in zip(view.members, clocks, strict=True)}
        self._members = seen

    @staticmethod
    async def _ask(client: RaftClient, url: str) -> RequestLogInfoResponse | None:
        try:
            return await client.request_log_info(
                peer_url=url, fail_fast=True, timeout=PROBE_TIMEOUT
            )
        except (TimeoutError, RaftlogError, OSError):
            return None

    def snapshot(self) -> dict[str, Any]:
        """The page's JSON: this peer, every member as it answered, the leader, the
        configuration, recent elections and topics."""
        view = self._views.latest()
        if view is None:
            return {"ready": False}
        rows = self._rows(view)
        leader = next((r["id"] for r in rows if r["role"] == "leader"), view.leader_id)
        return {
            "ready": True,
            "self": view.peer_id,
            "generated_at": time.time(),
            "leader_id": leader,
            "term": max([view.term, *(r["term"] or 0 for r in rows)]),
            "config": {"index": view.config_index, "joint": view.config_joint},
            "members": rows,
            "elections": [
                {"time": e.time, "term": e.term, "leader_id": e.leader_id, "reason": e.reason}
                for e in view.elections
            ],
            "topics": {
                "count": view.topics,
                "names": list(view.topic_names),
                "stats": [self._topic_row(stat) for stat in view.topic_stats],
            },
            "groups": [  # issue #27
                dict(zip(("name", "mode", "lag", "pending", "redelivered", "dead_lettered",
                          "delivered", "acked"), stat, strict=True))
                for stat in view.group_stats
            ],
            "pending_updates": view.pending_updates,
            "disk": {
                "free_bytes": view.disk_free_bytes,
                "min_free_bytes": view.min_free_disk_bytes,
                "publishes_refused": view.disk_free_bytes is not None
                and view.disk_free_bytes < view.min_free_disk_bytes,
            },
            "request_entries_streams": view.open_entries_streams,
            "clock_warnings": [
                w for pid, r in sorted(self._clocks.items()) if (w := clock_warning(pid, r))
            ],
        }

    def _rows(self, view: PeerView) -> list[dict[str, Any]]:
        """Every member's row, each with its ``lag``: entries its applied index is behind
        the highest commit index any member reports (the leader's, or newer than ours)."""
        rows = [self._member_row(view, m) for m in view.members]
        if not any(r["id"] == view.peer_id for r in rows):  # a CLIENT-state peer
            rows.append(self._member_row(view, MemberView(view.peer_id, "", "none")))
        commit = max((r["commit_index"] or 0 for r in rows), default=0)
        for row in rows:
            applied = row["applied_index"]
            row["lag"] = None if applied is None or not commit else max(0, commit - applied)
        return rows

    def lags(self, view: PeerView) -> dict[str, int]:
        """The lag of every member that answered the last round (the history's lag chart)."""
        return {r["id"]: r["lag"] for r in self._rows(view) if r["lag"] is not None}

    def _topic_row(self, stat: TopicStat) -> dict[str, Any]:
        name, records, size, published, published_bytes, expired, _ = stat
        return {
            "name": name,
            "records": records,
            "bytes": size,
            "published": published,
            "published_bytes": published_bytes,
            "expired": expired,
            "rate": self.rates.rate(name),
        }

    def _member_row(self, view: PeerView, member: MemberView) -> dict[str, Any]:
        pid = member.id
        row: dict[str, Any] = {
            "id": pid,
            "url": member.url,
            "voter_in": member.voter_in,
            "http_url": self._http_urls.get(pid),
            "self": pid == view.peer_id,
            "link_up": None if pid == view.peer_id else member.link_up,
        }
        reading = self._clocks.get(pid)
        row["clock_offset_ms"] = None if reading is None else reading.offset_ms
        if pid == view.peer_id:
            row.update(
                up=True,
                role=view.role,
                term=view.term,
                commit_index=view.commit_index,
                applied_index=view.applied_index,
                last_index=view.last_index,
                last_seen=view.wall_time,
            )
            return row
        state = self._members.get(pid)
        info = state.info if state is not None else None
        row["last_seen"] = state.last_seen if state is not None else None
        if info is None:
            row.update(
                up=False,
                role="down",
                term=None,
                commit_index=None,
                applied_index=None,
                last_index=None,
            )
        else:
            row.update(
                up=True,
                role="leader" if info.is_leader else "follower",
                term=info.term,
                commit_index=info.commit_index,
                applied_index=info.last_applied,
                last_index=info.last_index,
            )
        return row
