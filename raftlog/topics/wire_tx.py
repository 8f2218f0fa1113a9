"""Transaction RPCs (issue #18): pure frame codecs.

Every transactional *write* -- begin, store, commit, rollback -- is a topic entry
(``raftlog.topics.records_tx``) sent with ``TP`` (``raftlog.topics.wire``): RequestUpdate plus a
"refused" answer, so each call has a request id the leader appends at most once, across
leader changes, and a refusal (unknown, expired, aborted transaction; a limit) comes back
typed (``raftlog.errors.TransactionError``). Only the status needs a message of its own:

``TS`` transaction status -- any peer:

    request   [id, "TS", ident, txid(, actor)]        txid: UTF-8; actor: see below
    response  [id, 01, json info]
              [id, "", json error]                    UnknownTransaction, BadRequest

  info ``{txid, state, begin_index, deadline, records, bytes, end_index, commit_index}``:
  ``state`` one of ``open``, ``committed``, ``aborted``, ``expired``; ``deadline`` is the
  log-clock time (ms) at which an open transaction times out; ``end_index`` the index of
  the entry that ended it (commit, rollback, or the entry whose time passed the deadline)
  and ``commit_index`` the commit's index (its records' ids are ``(commit_index, 0..
  records-1)``), nil while open; ``owner`` the principal that began it (nil: none, e.g. on a
  plaintext cluster). A peer answers from its applied state; finished transactions are
  remembered until their entries are compacted.

A peer without transactions ignores ``TS`` (clients time out); a reference peer never sees
it. The type needs the ``read`` role (``raftlog.security.policy``), and on a CURVE cluster
the transaction's owner, an admin or a member (issue #25): there the request guard replaces
any ``actor`` frame with the asking key's ``[name, admin]`` (MessagePack), and a peer answers
``TransactionNotOwned`` to an actor that is neither the owner nor an admin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import msgpack

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import TRUE_FRAME, decode_json, json_to_uint, pack_json
from raftlog.topics.records import RecordFormatError, RecordId
from raftlog.topics.records_tx import Actor, check_txid, decode_actor
from raftlog.topics.wire import bad_request
from raftlog.topics.wire_errors import check_status

TYPE_TX_STATUS: Final = b"TS"
TxState = Literal["open", "committed", "aborted", "expired"]
TX_STATES: Final = ("open", "committed", "aborted", "expired")


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """What a peer knows of one transaction (see the module docstring)."""

    txid: str
    state: TxState
    begin_index: int
    deadline_ms: int
    records: int
    bytes: int
    end_index: int | None = None
    commit_index: int | None = None
    owner: str | None = None
    """The principal that began it (issue #25; None: nobody, e.g. a plaintext cluster)."""

    @property
    def record_ids(self) -> list[RecordId]:
        """The message ids of a committed transaction's records, in store order across its
        topics: ``(commit_index, 0 .. records-1)`` (empty unless committed)."""
        if self.state != "committed" or self.commit_index is None:
            return []
        return [RecordId(self.commit_index, k) for k in range(self.records)]


def encode_status_request(txid: str, actor: Actor | None = None) -> list[bytes]:
    """``TS``'s arguments: the id, and (the request guard's, issue #25) who asks."""
    frames = [check_txid(txid).encode()]
    if actor is not None:
        frames.append(msgpack.packb(actor.packed(), use_bin_type=True))
    return frames


def decode_status_request(args: Sequence[bytes]) -> tuple[str, Actor | None]:
    """The server side: the id and the asking actor (None: not checked -- a member, or a
    plaintext cluster); a malformed request raises ``TopicError`` (answered, not dropped)."""
    if len(args) not in (1, 2):
        raise bad_request("a transaction status request has one frame: the transaction id")
    try:
        txid = args[0].decode()
    except UnicodeDecodeError:
        raise bad_request("the transaction id is not UTF-8") from None
    actor = None
    if len(args) == 2:
        try:
            actor = decode_actor(msgpack.unpackb(args[1]))
        except (ValueError, msgpack.UnpackException, RecordFormatError):
            raise bad_request("the actor frame of TS is not [name, admin]") from None
    return check_txid(txid), actor


def encode_status_response(info: TransactionInfo) -> list[bytes]:
    body = {
        "txid": info.txid,
        "state": info.state,
        "begin_index": info.begin_index,
        "deadline": info.deadline_ms,
        "records": info.records,
        "bytes": info.bytes,
        "end_index": info.end_index,
        "commit_index": info.commit_index,
        "owner": info.owner,
    }
    return [TRUE_FRAME, pack_json(body)]


def decode_status_response(frames: Sequence[bytes]) -> TransactionInfo:
    """The frames after the id; an error answer raises its (typed) ``TopicError``."""
    check_status(frames, 1)
    body = decode_json(frames[1], 1)
    if not isinstance(body, dict) or not isinstance(body.get("txid"), str):
        raise RemoteProtocolError("transaction info must be a map with a txid", 1)
    state = body.get("state")
    if state not in TX_STATES:
        raise RemoteProtocolError(f"unknown transaction state {state!r}", 1)

    def optional(key: str) -> int | None:
        value = body.get(key)
        return None if value is None else json_to_uint(value, 1, key)

    return TransactionInfo(
        txid=body["txid"],
        state=state,
        begin_index=json_to_uint(body.get("begin_index"), 1, "begin_index"),
        deadline_ms=json_to_uint(body.get("deadline"), 1, "deadline"),
        records=json_to_uint(body.get("records"), 1, "records"),
        bytes=json_to_uint(body.get("bytes"), 1, "bytes"),
        end_index=optional("end_index"),
        commit_index=optional("commit_index"),
        owner=body["owner"] if isinstance(body.get("owner"), str) else None,
    )
