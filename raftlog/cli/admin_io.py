"""Helpers of ``raftlog-admin``: exit codes, argument parsing, per-peer probes, output.

Tables are drawn with ``rich`` on a terminal; anything else (a pipe, a script) gets plain
columns separated by two spaces, which stay stable for ``awk`` and tests.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from raftlog.cli.formats import render
from raftlog.client import RaftClient
from raftlog.client.models import IndexedEntry
from raftlog.entry import EntryType
from raftlog.errors import ClusterUnavailableError, RaftlogError
from raftlog.rpc.config import validate_peer_url
from raftlog.rpc.messages import Peer, RequestLogInfoResponse, SnapshotChunk

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_DEGRADED: Final = 1
"""``status``: the cluster answers but a member is down (Nagios' WARNING, as ``health``)."""
EXIT_USAGE: Final = 2
EXIT_UNAVAILABLE: Final = 3
EXIT_INTERRUPTED: Final = 130

PEER_PROBE_TIMEOUT: Final = 1.0
"""Seconds one peer may take to answer a status probe before it is shown as down."""


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""


class SafetyCheckError(RaftlogError):
    """A safety check of the CLI refused the command (exit code 1, like a refusal by the
    cluster); the message says what failed and how to override it, if it can be."""


def subcommand(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    examples: str,
) -> argparse.ArgumentParser:
    """A subcommand with its own description and examples in ``--help``."""
    return sub.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )



def subcommand_example(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, example: str
) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` ends with one example (``raftlog-admin EXAMPLE``): the
    topics and kv actions, each with a single line to copy."""
    parser = subcommand(sub, name, summary, "")
    parser.epilog = f"example:\n  raftlog-admin {example}\n"
    return parser

def key_from_cwd(reference: str | None) -> str | None:
    """A key given on the command line (or in the environment) that names an existing file
    relative to the current directory, made absolute: a shell user typing
    ``--auth-key keys/billing.key_secret`` means that file, not ``keys_dir/keys/...``
    (issue #33). Anything else (a NAME in the cluster file's keys_dir) is left alone."""
    if reference is None or not Path(reference).is_file():
        return reference
    return str(Path(reference).resolve())


def say(args: object, text: str, **doc: object) -> None:
    """Print one result: ``text`` for people, or with ``-o json`` the one JSON document
    ``doc`` (issue #33: every command speaks JSON for scripts; streams print JSON lines)."""
    if getattr(args, "output", "table") == "json":
        print(json.dumps(doc), flush=True)
    else:
        print(text, flush=True)


def parse_peer_args(items: Sequence[str]) -> list[Peer]:
    """``ID=URL`` or ``URL/ID`` items as peers, URLs validated as the protocol requires."""
    peers: list[Peer] = []
    for item in items:
        if "=" in item:
            peer_id, url = item.split("=", 1)
        elif item.startswith("tcp://") and item.count("/") >= 3:
            url, peer_id = item.rsplit("/", 1)
        else:
            raise UsageError(f"peer {item!r}: write ID=URL or URL/ID, e.g. 4=tcp://10.0.0.4:8047")
        if not peer_id:
            raise UsageError(f"peer {item!r}: empty id")
        try:
            validate_peer_url(url)
        except (ValueError, RaftlogError) as exc:
            raise UsageError(f"peer {item!r}: {exc}") from None
        peers.append(Peer(peer_id, url))
    ids = [p.id for p in peers]
    if len(set(ids)) != len(ids):
        raise UsageError("duplicate peer ids")
    return peers


@dataclass(frozen=True, slots=True)
class PeerRow:
    """One peer's own view of the log (None: it did not answer)."""

    peer: Peer
    info: RequestLogInfoResponse | None
    member: bool = True
    """False for a peer outside the configuration (CLIENT state: catching up, or removed)."""

    @property
    def role(self) -> str:
        """``leader``, ``follower``, ``client`` (answers, not a member) or ``down``."""
        if self.info is None:
            return "down"
        if self.info.is_leader:
            return "leader"
        return "follower" if self.member else "client"

    @property
    def is_leader(self) -> bool:
        """Whether this peer says it is the leader."""
        return self.info is not None and self.info.is_leader

    @property
    def last_index(self) -> int:
        """The peer's last log index (0 when it did not answer)."""
        return self.info.last_index if self.info is not None else 0


async def peer_status(
    client: RaftClient, peer: Peer, timeout: float, *, member: bool = True
) -> PeerRow:
    """RequestLogInfo asked of this one peer (not the leader), over the client's transport:
    its own view, or ``info=None`` when it refuses or stays silent."""
    try:
        info = await client.request_log_info(
            peer_url=peer.url, fail_fast=True, timeout=min(timeout, PEER_PROBE_TIMEOUT)
        )
    except (ClusterUnavailableError, RaftlogError):
        return PeerRow(peer, None, member)
    return PeerRow(peer, info, member)


async def peer_statuses(
    client: RaftClient, peers: Sequence[Peer], timeout: float, *, member: bool = True
) -> list[PeerRow]:
    """:func:`peer_status` of every peer, asked concurrently."""
    asked = (peer_status(client, p, timeout, member=member) for p in peers)
    return list(await asyncio.gather(*asked))


STATUS_HEADER: Final = (
    "ID",
    "URL",
    "ROLE",
    "TERM",
    "COMMIT",
    "APPLIED",
    "LAST",
    "LAG",
    "MEMBER",
)


def status_cells(rows: Sequence[PeerRow], leader_last: int | None) -> list[tuple[str, ...]]:
    """The status table's cells, one tuple per peer (lag is measured against the leader's
    last index: how many entries the peer still has to apply)."""
    cells: list[tuple[str, ...]] = []
    for row in rows:
        info = row.info
        member = "yes" if row.member else "no"
        if info is None:
            cells.append((row.peer.id, row.peer.url, "down", "-", "-", "-", "-", "-", member))
            continue
        lag = "-" if leader_last is None else str(max(0, leader_last - info.last_applied))
        cells.append(
            (
                row.peer.id,
                row.peer.url,
                row.role,
                str(info.term),
                str(info.commit_index),
                str(info.last_applied),
                str(info.last_index),
                lag,
                member,
            )
        )
    return cells


def render_table(rows: Sequence[PeerRow], leader_last: int | None) -> str:
    """The status table as plain text columns (the form scripts and pipes get)."""
    return plain_table(STATUS_HEADER, status_cells(rows, leader_last))


def plain_table(header: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """Columns separated by two spaces, padded to the widest cell."""
    lines = [tuple(header), *(tuple(c) for c in cells)]
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def print_table(
    header: Sequence[str], cells: Sequence[Sequence[str]], out: TextIO | None = None
) -> None:
    """Print a table: drawn by rich on a terminal, :func:`plain_table` otherwise."""
    stream = sys.stdout if out is None else out
    if not stream.isatty():
        print(plain_table(header, cells), file=stream)
        return
    table = Table(*header, box=None, header_style="bold", pad_edge=False)
    styles = {"leader": "green", "down": "red", "client": "magenta"}
    for row in cells:
        table.add_row(*(Text(v, style=styles.get(v, "")) for v in row))
    Console(file=stream).print(table)


def entry_line(item: IndexedEntry | SnapshotChunk, as_json: bool, fmt: str | None = None) -> str:
    """One printable line per entry: ``INDEX TYPE TERM DATA``, a JSON object, or ``fmt``
    (``raftlog.cli.formats``)."""
    if fmt is not None and isinstance(item, IndexedEntry):
        value = item.entry.data.decode("utf-8", "backslashreplace")
        return render(fmt, {"i": str(item.index), "v": value, "S": str(len(item.entry.data))})
    if isinstance(item, SnapshotChunk):
        text = f"snapshot index={item.index} offset={item.offset}/{item.total_size}"
        return json.dumps({"snapshot": text}) if as_json else text
    entry = item.entry
    kind = EntryType(entry.entry_type).name if entry.entry_type <= 2 else str(entry.entry_type)
    try:
        data_text: str | None = entry.data.decode("utf-8")
    except UnicodeDecodeError:
        data_text = None
    if as_json:
        record: dict[str, object] = {
            "index": item.index,
            "term": entry.term,
            "type": kind,
            "request_id": entry.request_id.hex(),
        }
        if data_text is not None:
            record["data"] = data_text
        else:
            record["data_base64"] = base64.b64encode(entry.data).decode()
        return json.dumps(record)
    shown = (
        data_text if data_text is not None else "base64:" + base64.b64encode(entry.data).decode()
    )
    return f"{item.index}\t{kind}\t{entry.term}\t{shown}"
