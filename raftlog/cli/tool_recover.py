"""``raftlog-tool force-new-cluster``: bring a cluster back after it lost a majority for good.

Raft cannot elect a leader without a majority of the configuration, and no online command
can change the configuration without one. When the lost peers will never return (disks
gone), the operator stops a survivor and rewrites *its* data directory so that it alone (or
with the peers named in ``--members``) is the configuration -- as etcd's
``--force-new-cluster`` and Redpanda's ``unsafe-recover`` do.

What it writes, in one synced append plus one synced hard-state save:

* a CONFIG entry at ``last_index + 1`` holding exactly ``--members``, in a new term
  (``max(current term, last log term) + 1``): the log's newest configuration is the one in
  effect (docs/protocol.md §6), so at its next start the peer counts votes in the new
  membership only and, alone, elects itself;
* the current term set to that term and the vote cleared.

Nothing of the log is removed: every entry this survivor holds -- its committed prefix and
its uncommitted tail -- stays, and the new leader commits the tail with its first entry.
**What is lost**: entries the lost majority had committed that this survivor never received
(pick the survivor with the highest last index and term: ``raftlog-tool inspect``), and
everything on the other survivors that this one does not hold. Other survivors must rejoin
from an empty data directory (``raftlog-admin config add``), not with their old logs.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Final

from raftlog.bounds import MAX_TERM
from raftlog.entry import EntryType, LogEntry
from raftlog.ids import RequestIdGenerator
from raftlog.rpc.config import encode_config_payload
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage.offline import stopped_peer_stores

WARNING: Final = (
    "force-new-cluster rewrites this peer's membership by hand: entries the lost peers had "
    "committed that this peer never received are LOST, and other survivors must rejoin "
    "with empty data directories. Run it on the survivor with the highest last index "
    "(raftlog-tool inspect), with every other peer stopped."
)


class RecoveryRefusedError(Exception):
    """A refusal of the tool (exit code 2), one line."""


def parse_members(text: str) -> tuple[Peer, ...]:
    """``ID=URL[,ID=URL...]`` into peers; ``RecoveryRefusedError`` on anything else."""
    peers: list[Peer] = []
    for item in text.split(","):
        peer_id, sep, url = item.strip().partition("=")
        if not sep or not peer_id or not url.startswith("tcp://"):
            raise RecoveryRefusedError(f"--members: {item!r} is not ID=tcp://HOST:PORT")
        if any(p.id == peer_id for p in peers):
            raise RecoveryRefusedError(f"--members: peer id {peer_id!r} appears twice")
        peers.append(Peer(peer_id, url))
    return tuple(peers)


def force_new_cluster(data_dir: Path, members: tuple[Peer, ...]) -> tuple[int, int, int]:
    """Rewrite a stopped peer's membership (module docstring); returns ``(index of the new
    CONFIG entry, its term, last_applied kept)``."""
    with stopped_peer_stores(data_dir, RecoveryRefusedError) as (log, hard_state):
        state = hard_state.load()
        last = log.last_index
        term = max(state.current_term, log.term_at(last) or 0) + 1
        if term > MAX_TERM:
            raise RecoveryRefusedError(f"term {term} is above {MAX_TERM}: run reset-term first")
        payload = encode_config_payload(ConfigPayload(members))
        entry = LogEntry(RequestIdGenerator().next(), EntryType.CONFIG, term, payload)
        log.append(last + 1, [entry])  # synced
        hard_state.save(replace(state, current_term=term, voted_for=None))  # synced
        return last + 1, term, state.last_applied


def cmd_force_new_cluster(args: argparse.Namespace) -> int:
    """The ``force-new-cluster`` command: refuse without ``--yes``, else rewrite and report."""
    members = parse_members(args.members)
    print(f"raftlog-tool: WARNING: {WARNING}", flush=True)
    if not args.yes:
        raise RecoveryRefusedError("nothing changed: add --yes once you have read the warning")
    index, term, applied = force_new_cluster(args.data_dir, members)
    names = ", ".join(f"{p.id}={p.url}" for p in members)
    print(
        f"{args.data_dir}: new configuration [{names}] at index {index}, term {term}; "
        f"the log up to index {index - 1} is kept (applied up to {applied}). Start this peer "
        "(only the peers named in --members, with empty data directories for the others)."
    )
    return 0


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``force-new-cluster`` on ``raftlog-tool``'s subcommands."""
    recover = commands.add_parser(
        "force-new-cluster",
        help="UNSAFE: after losing a majority for good, make a stopped survivor a new cluster",
        description=WARNING,
        epilog="example: raftlog-tool force-new-cluster data/1 --members 1=tcp://10.0.0.1:8047 "
        "--yes",
    )
    recover.add_argument("data_dir", metavar="DATA_DIR", type=Path, help="the survivor's data dir")
    recover.add_argument(
        "--members", required=True, metavar="ID=URL,...",
        help="the new configuration (this peer included)",
    )
    recover.add_argument("--yes", action="store_true", help="confirm, having read the warning")
    recover.set_defaults(handler=cmd_force_new_cluster)
