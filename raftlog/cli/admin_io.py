"""Helpers of ``raftlog-admin``: argument parsing, per-peer probes, and output formatting."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

import zmq

from raftlog import sockets
from raftlog.client.models import IndexedEntry
from raftlog.entry import EntryType
from raftlog.errors import RaftlogError
from raftlog.rpc.codec import encode_request
from raftlog.rpc.config import validate_peer_url
from raftlog.rpc.messages import Peer, RequestLogInfo, RequestLogInfoResponse, SnapshotChunk
from raftlog.rpc.responses import decode_response

T = TypeVar("T")
EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNAVAILABLE: Final = 3


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""


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
    """One line of the ``status`` table: a peer and its RequestLogInfo answer (None when it did
    not answer)."""

    peer: Peer
    info: RequestLogInfoResponse | None

    @property
    def is_leader(self) -> bool:
        """Whether this peer says it leads."""
        return self.info is not None and self.info.is_leader

    @property
    def last_index(self) -> int:
        """The peer's last log index (0 when it did not answer)."""
        return self.info.last_index if self.info is not None else 0


def peer_status(peer: Peer, ident: str, timeout: float) -> PeerRow:
    """RequestLogInfo asked of this one peer (not the leader): its own view."""
    sock: zmq.Socket[bytes] = sockets.client_dealer(
        zmq.Context.instance(), peer.url, immediate=False
    )
    try:
        sock.send_multipart(encode_request(RequestLogInfo(), ident=ident.encode(), id=b"\x01"))
        if sock.poll(int(min(timeout, 1.0) * 1000)):
            _, resp = decode_response(b"%", sock.recv_multipart())
            if isinstance(resp, RequestLogInfoResponse):
                return PeerRow(peer, resp)
    except (zmq.ZMQError, RaftlogError):
        pass
    finally:
        sock.close(linger=0)
    return PeerRow(peer, None)


def render_table(rows: Sequence[PeerRow], leader_last: int | None) -> str:
    """The ``status`` table as text; LAG is how far each peer's log trails the leader's."""
    header = ("ID", "URL", "ROLE", "TERM", "COMMIT", "APPLIED", "LAST", "LAG")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        info = row.info
        if info is None:
            lines.append((row.peer.id, row.peer.url, "down", "-", "-", "-", "-", "-"))
            continue
        role = "leader" if info.is_leader else "follower"
        lag = "-" if leader_last is None else str(max(0, leader_last - info.last_applied))
        lines.append(
            (
                row.peer.id,
                row.peer.url,
                role,
                str(info.term),
                str(info.commit_index),
                str(info.last_applied),
                str(info.last_index),
                lag,
            )
        )
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def entry_line(item: IndexedEntry | SnapshotChunk, as_json: bool) -> str:
    """One printable line per entry: ``INDEX TYPE TERM DATA`` or a JSON object."""
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


def progress(done: int, total: int) -> None:
    """A one-line progress bar on stderr (stdout stays clean for pipes)."""
    width = 30
    filled = width * done // max(1, total)
    bar = "#" * filled + "." * (width - filled)
    print(f"\r[{bar}] {done}/{total}", end="", file=sys.stderr, flush=True)


async def publish_all(
    records: Sequence[bytes],
    publish: Callable[[bytes], Awaitable[T]],
    *,
    in_flight: int,
    show_progress: bool,
) -> list[T]:
    """``publish(record)`` for every record, ``in_flight`` at a time; the results."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for record in records:
        queue.put_nowait(record)
    results: list[T] = []

    async def worker() -> None:
        while not queue.empty():
            results.append(await publish(queue.get_nowait()))
            if show_progress:
                progress(len(results), len(records))

    await asyncio.gather(*(worker() for _ in range(min(in_flight, max(1, len(records))))))
    if show_progress:
        print(file=sys.stderr)
    return results
