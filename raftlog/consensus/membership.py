"""Cluster membership: which configuration is in effect, and the ones it may roll back to.

Raft (and docs/protocol.md §12.4) lets a configuration take effect as soon as its CONFIG entry is in
the log, committed or not. A CONFIG entry that is later truncated must therefore be *rolled
back* to the configuration before it (the reference does not; we do). ``ConfigHistory`` keeps
the committed base plus every uncommitted CONFIG entry for that purpose.

A configuration can be *unknown*: InstallSnapshot carries no configuration on this wire, so a
follower whose log was discarded by a snapshot cannot know what changed below the snapshot
index. It keeps its last configuration as a best guess, does not campaign, and accepts votes
requests from any sender until a CONFIG entry after the snapshot arrives (the leader makes sure one
does, see ``replication``). Persisted as ``HardState.config = None`` with a snapshot present.
"""

from __future__ import annotations

from raftlog.entry import EntryType
from raftlog.errors import ConfigError
from raftlog.rpc.config import decode_config_payload
from raftlog.rpc.messages import ConfigPayload
from raftlog.storage.base import HardState, LogStore

_SCAN_BATCH = 4096


class Membership:
    """One configuration with its voter groups precomputed."""

    __slots__ = ("groups", "index", "known", "members", "payload")

    def __init__(self, payload: ConfigPayload, index: int, known: bool = True) -> None:
        self.payload = payload
        self.index = index
        """Index of the CONFIG entry that carried it (0: seed; snapshot index: synthetic)."""
        self.known = known
        new = frozenset(peer.id for peer in payload.new)
        if payload.old is None:
            self.groups: tuple[frozenset[str], ...] = (new,)
            self.members = new
        else:
            old = frozenset(peer.id for peer in payload.old)
            self.groups = (old, new)
            self.members = old | new

    @property
    def is_joint(self) -> bool:
        """Whether this is a joint configuration (old and new majorities both decide)."""
        return self.payload.old is not None

    def accepts_sender(self, peer_id: str) -> bool:
        """RequestVote from outside the configuration is dropped without an answer (§6), so
        removed peers cannot disrupt; with an unknown configuration nobody can be ruled out."""
        return not self.known or peer_id in self.members

    def __repr__(self) -> str:
        state = "" if self.known else ", unknown"
        return f"Membership({sorted(self.members)}, index={self.index}{state})"


class ConfigHistory:
    """The committed base configuration followed by the uncommitted CONFIG entries."""

    def __init__(self, entries: list[Membership]) -> None:
        if not entries:
            raise ValueError("a configuration history needs a base")
        self._entries = entries

    @property
    def current(self) -> Membership:
        """The configuration in force: the latest one in the log, committed or not (Raft §6)."""
        return self._entries[-1]

    def previous_payload(self) -> ConfigPayload | None:
        """The configuration before the one in effect, while it is still remembered."""
        entries = self._entries
        return entries[-2].payload if len(entries) > 1 else None

    def involves(self, peer_id: str) -> bool:
        """Is ``peer_id`` a voter of the committed base or of any uncommitted configuration?

        Such a peer must stay able to campaign even when its newest, uncommitted
        configuration leaves it out: if a leader that removed itself appended C(new) and then
        lost leadership, its log may be the only one holding C(new), and the others (still
        joint) cannot win without its vote. It then leads a cluster it is not part of until
        C(new) commits, as Raft allows.

        An *unknown* configuration rules nobody out (as in ``accepts_sender``). This matters
        after a restart from a compacted log: when the committed joint C(old,new) lies inside
        the snapshot, only C(new) is left, and nothing durable says whether this peer was in
        the old half (``recover_history``). Treating it as a non-voter (CLIENT) deadlocks the
        cluster when it is the removed leader holding the only copy of C(new). Letting it
        campaign is safe: votes are counted under the newest configuration
        (``can_campaign``), and an unknown configuration in effect still forbids
        campaigning."""
        return any(
            not membership.known or peer_id in membership.members for membership in self._entries
        )

    def append(self, membership: Membership) -> None:
        """A configuration entry was appended: it is in force from now on."""
        self._entries.append(membership)

    def truncate_from(self, index: int) -> bool:
        """Forget configurations carried by entries at or after ``index`` (never the base);
        returns True when the configuration in effect changed."""
        entries = self._entries
        before = len(entries)
        while len(entries) > 1 and entries[-1].index >= index:
            entries.pop()
        return len(entries) != before

    def commit_to(self, commit_index: int) -> None:
        """Entries up to ``commit_index`` are committed: the newest of them becomes the base."""
        entries = self._entries
        keep = 0
        for position, membership in enumerate(entries):
            if membership.index <= commit_index:
                keep = position
        if keep:
            del entries[:keep]

    def reset_unknown(self, index: int) -> None:
        """A snapshot at ``index`` replaced the whole log: the configuration is unknown."""
        self._entries = [Membership(self.current.payload, index, known=False)]

    def latest_config_index(self) -> int:
        """The log index of the configuration in force."""
        return self.current.index


def decode_config(data: bytes) -> ConfigPayload | None:
    """CONFIG entry data, or None when it does not decode (it is then not adopted)."""
    try:
        return decode_config_payload(data)
    except ConfigError:
        return None


def _configs_in(store: LogStore, lo: int, hi: int) -> list[Membership]:
    """CONFIG entries of the store in ``[lo, hi)``, ascending."""
    found: list[Membership] = []
    while lo < hi:
        batch = store.entries(lo, min(hi, lo + _SCAN_BATCH))
        for offset, entry in enumerate(batch):
            if entry.entry_type == EntryType.CONFIG:
                payload = decode_config(entry.data)
                if payload is not None:
                    found.append(Membership(payload, lo + offset))
        lo += len(batch)
    return found


def _last_config_before(store: LogStore, hi: int) -> Membership | None:
    """The newest CONFIG entry of the store below ``hi``, scanning backwards."""
    lo_limit = store.first_index
    while hi > lo_limit:
        lo = max(lo_limit, hi - _SCAN_BATCH)
        found = _configs_in(store, lo, hi)
        if found:
            return found[-1]
        hi = lo
    return None


def recover_history(
    store: LogStore, hard_state: HardState, seed: ConfigPayload, last_applied: int
) -> ConfigHistory:
    """Rebuild the configuration history from durable state only.

    The log is the truth for everything it holds: CONFIG entries after ``last_applied`` are
    the uncommitted ones (they may still be rolled back). The committed base comes from the
    hard state when its CONFIG entry is at or below ``last_applied``; otherwise from the log
    below that point (the seed when the log, never compacted, has none); a joint entry's
    predecessor is its ``old`` list; failing all that it is unknown. A hard-state
    configuration whose entry never reached the log (crash between the two writes of one
    Ready) is ignored.

    The predecessor of a final C(new) is the joint C(old,new) (or, for a refresh, the same
    configuration): its ``old`` half is lost with the compacted log, so the guessed base is
    marked unknown -- it keeps this peer a possible voter (``ConfigHistory.involves``) and
    is what a truncation of C(new) would roll back to.
    """
    committed_upto = max(last_applied, store.snapshot_index)
    uncommitted = _configs_in(store, committed_upto + 1, store.last_index + 1)
    base: Membership | None
    saved = hard_state.config
    if saved is None:
        base = Membership(seed, 0, known=store.snapshot_index == 0)
    elif hard_state.config_index <= committed_upto:
        base = Membership(saved, hard_state.config_index)
    else:
        base = _last_config_before(store, committed_upto + 1)
        if base is None and store.snapshot_index == 0:
            base = Membership(seed, 0)  # the whole log was scanned: nothing before the seed
        if base is None:
            first = uncommitted[0].payload if uncommitted else saved
            if first.old is not None:
                base = Membership(ConfigPayload(new=first.old), store.snapshot_index)
            else:
                base = Membership(first, store.snapshot_index, known=False)
    return ConfigHistory([base, *(m for m in uncommitted if m.index > base.index)])
