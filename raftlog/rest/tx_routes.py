"""Transactions over REST: CDAP TMS's store / publish / rollback on raftlog's transactions
(``raftlog.topics.client_tx``; docs/topics.md, "Transactions").

* ``POST …/{topic}/store`` ``{"messages": [...], "transaction"?: ID, "timeoutMs"?: N}``:
  stores the messages under transaction ID, invisible to every reader until the commit.
  Without an ID a new transaction is begun (its timeout ``timeoutMs``, default 60 s); with an
  ID that no peer knows the transaction is begun under that ID (CDAP's producer brings its
  own transaction, so the first store begins it). Answers ``{"transaction": ID,
  "rollback": {"transaction": ID}}``: the rollback handle.
* ``POST …/{topic}/publish`` ``{"transaction": ID, "messages"?: [...]}``: stores the
  messages (if any) and commits: every message of the transaction, in every topic, becomes
  visible at once at the commit's log index. Answers the ids of all of them.
* ``POST …/{topic}/rollback`` ``{"transaction": ID}`` (the handle): none of its messages will
  ever be visible. Idempotent; 409 if it committed.

A transaction spans topics: the topic in the path is the one stored to (store, publish), and
the one whose publish right a rollback needs.

A transaction belongs to the token's client that began it (issue #25): the gateway sends
every entry on behalf of that client (``records_tx.Actor``), and the cluster refuses a
store, publish or rollback by any other client except an admin with 403
``TransactionNotOwned``. With security off there are no clients and no owners.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from raftlog.errors import ClusterUnavailableError, TopicError, UnknownTransactionError
from raftlog.rest.bodies import (
    check_fields,
    decode_messages,
    format_id,
    json_reply,
    optional_int,
    read_json_object,
    request_id_of,
)
from raftlog.rest.context import RestContext
from raftlog.rest.message_routes import TransactionalPublish
from raftlog.security.guard import actor_of
from raftlog.security.policy import Principal, Role
from raftlog.topics.client_tx import Transaction
from raftlog.topics.records_tx import MAX_TX_TIMEOUT_MS, Actor
from raftlog.web.errors import RestError, from_cluster

STORE_FIELDS: Final = frozenset({"messages", "encoding", "transaction", "timeoutMs"})
ROLLBACK_FIELDS: Final = frozenset({"transaction"})


def _actor(who: Principal | None) -> Actor | None:
    """The actor the gateway's entries carry for caller ``who`` (None: security off)."""
    return None if who is None else actor_of(who)


def _txid(body: dict[str, Any], *, required: bool) -> str | None:
    txid = body.get("transaction")
    if txid is None and not required:
        return None
    if not isinstance(txid, str):
        raise RestError(400, "BadRequest", "transaction must be a transaction id (string)")
    return txid


async def _store(ctx: RestContext, tx: Transaction, name: str, payloads: list[bytes], *,
                 timeout_ms: int | None, request_id: bytes | None) -> int:
    """Store under ``tx``; a transaction no peer knows is begun under its id first."""
    topics = ctx.gateway.topics
    try:
        return await tx.store(name, payloads, request_id=request_id,
                              timeout=ctx.gateway.timeout)
    except UnknownTransactionError:
        pass
    await topics.begin_transaction(
        timeout=None if timeout_ms is None else timeout_ms / 1000,
        txid=tx.id,
        exist_ok=True,
        request_timeout=ctx.gateway.timeout,
        on_behalf_of=tx.actor,
    )
    return await tx.store(name, payloads, request_id=request_id, timeout=ctx.gateway.timeout)


def add_transaction_routes(app: web.Application, ctx: RestContext) -> TransactionalPublish:
    """Register store and rollback; return the handler of a publish naming a transaction."""
    base = "/namespaces/{ns}/topics/{topic}"

    async def store(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        who = ctx.auth.require(request, Role.WRITER, publish=name)
        actor = _actor(who)
        body = await read_json_object(request, ctx.max_body)
        check_fields(body, STORE_FIELDS)
        payloads = decode_messages(body)
        ctx.quotas.payloads(request, who, payloads)  # 429 over the publish quota
        timeout_ms = optional_int(body, "timeoutMs", 1, MAX_TX_TIMEOUT_MS)
        txid = _txid(body, required=False)
        topics = ctx.gateway.topics
        try:
            if txid is None:
                tx = await topics.begin_transaction(
                    timeout=None if timeout_ms is None else timeout_ms / 1000,
                    request_timeout=ctx.gateway.timeout,
                    on_behalf_of=actor,
                )
            else:
                tx = topics.resume_transaction(txid, actor)
            index = await _store(ctx, tx, name, payloads, timeout_ms=timeout_ms,
                                   request_id=request_id_of(request))
        except RestError:
            raise
        except Exception as exc:
            raise from_cluster(exc) from exc
        await ctx.gateway.caught_up(index)
        return json_reply(
            {"transaction": tx.id, "stored": len(payloads), "rollback": {"transaction": tx.id}}
        )

    async def commit(
        request: web.Request, ctx_: RestContext, name: str, body: dict[str, Any]
    ) -> web.Response:
        txid = _txid(body, required=True)
        assert txid is not None
        payloads = decode_messages(body, required=False)
        if "ttlMs" in body:
            raise RestError(400, "BadRequest", "ttlMs is not supported with a transaction")
        topics = ctx_.gateway.topics
        who = ctx_.auth.principal(request)  # the publish route checked its rights
        actor = _actor(who)
        ctx_.quotas.payloads(request, who, payloads)  # 429 over the publish quota
        try:
            tx = topics.resume_transaction(txid, actor)
            if payloads:
                # storing under an unknown id would begin a new transaction and this commit
                # would then succeed: the documented answer is 404 (issue #33 item 6), so
                # the transaction must be known before anything is stored
                await tx.status(timeout=ctx_.gateway.timeout)
                await _store(ctx_, tx, name, payloads, timeout_ms=None,
                             request_id=request_id_of(request))
            index = await tx.commit(timeout=ctx_.gateway.timeout)
        except RestError:
            raise
        except Exception as exc:
            raise from_cluster(exc) from exc
        ids: list[str] | None
        try:  # the leader remembers a finished transaction: the messages it committed
            info = await tx.status(timeout=ctx_.gateway.timeout)
            ids = [format_id(rid) for rid in info.record_ids]
        except (TopicError, ClusterUnavailableError):
            ids = None  # committed all the same: answer so, without the ids
        await ctx_.gateway.caught_up(index)
        return json_reply({"transaction": txid, "commitIndex": index, "ids": ids})

    async def rollback(request: web.Request) -> web.Response:
        _ns, _topic, name = ctx.names(request)
        actor = _actor(ctx.auth.require(request, Role.WRITER, publish=name))
        body = await read_json_object(request, ctx.max_body)
        check_fields(body, ROLLBACK_FIELDS)
        txid = _txid(body, required=True)
        assert txid is not None
        try:
            await ctx.gateway.topics.resume_transaction(txid, actor).rollback(
                timeout=ctx.gateway.timeout
            )
        except Exception as exc:
            raise from_cluster(exc) from exc
        return json_reply({"transaction": txid, "rolledBack": True})

    app.router.add_post(base + "/store", store)
    app.router.add_post(base + "/rollback", rollback)
    return commit
