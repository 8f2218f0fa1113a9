"""Transactions over REST on a real cluster (issue #18): store -> publish makes every
message visible at once at the commit's position, store -> rollback none ever, a timed-out
transaction cannot commit, and each refusal has its status code."""

from __future__ import annotations

import time

import pytest

from integration.cluster import module_cluster

from .helpers import RestCluster, call, started

pytestmark = pytest.mark.timeout(90)
T = "/v1/namespaces/default/topics"


cluster = module_cluster(started, "rest-tx")


def texts(base: str, topic: str) -> list[str]:
    answer = call(base, "POST", f"{T}/{topic}/poll", {"encoding": "text"})
    assert answer.status == 200, answer.body
    return [m["payload"] for m in answer.body]


def test_store_then_publish_commits_everything_at_once(cluster: RestCluster) -> None:
    leader = cluster.http_url(cluster.wait_leader())
    follower = cluster.http_url(cluster.follower())
    for topic in ("tx-a", "tx-b"):
        assert call(leader, "PUT", f"{T}/{topic}").status == 200
    first = call(follower, "POST", f"{T}/tx-a/store",
                 {"messages": ["a1", "a2"], "encoding": "text", "timeoutMs": 30_000})
    assert first.status == 200, first.body
    txid = first.body["transaction"]
    assert first.body["rollback"] == {"transaction": txid} and first.body["stored"] == 2
    second = call(leader, "POST", f"{T}/tx-b/store",
                  {"transaction": txid, "messages": ["b1"], "encoding": "text"})
    assert second.status == 200, second.body
    # through the follower that is read below: it answers once it has applied the write
    call(follower, "POST", f"{T}/tx-a/publish", {"messages": ["plain"], "encoding": "text"})
    assert texts(follower, "tx-a") == ["plain"] and texts(follower, "tx-b") == []
    committed = call(follower, "POST", f"{T}/tx-a/publish",
                     {"transaction": txid, "messages": ["a3"], "encoding": "text"})
    assert committed.status == 200, committed.body
    index = committed.body["commitIndex"]
    assert committed.body["ids"] == [f"{index}-{p}" for p in range(4)]
    assert texts(follower, "tx-a") == ["plain", "a1", "a2", "a3"]
    assert texts(follower, "tx-b") == ["b1"]
    polled = call(follower, "POST", f"{T}/tx-a/poll", {}).body
    assert [m["id"] for m in polled[1:]] == [f"{index}-0", f"{index}-1", f"{index}-3"]
    again = call(leader, "POST", f"{T}/tx-a/publish", {"transaction": txid})
    assert again.status == 409 and again.body["error"] == "TransactionCommitted"
    late = call(leader, "POST", f"{T}/tx-a/rollback", {"transaction": txid})
    assert late.status == 409 and late.body["error"] == "TransactionCommitted"
    stored_late = call(leader, "POST", f"{T}/tx-a/store",
                       {"transaction": txid, "messages": ["x"], "encoding": "text"})
    assert stored_late.status == 409


def test_store_then_rollback_shows_nothing_ever(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{T}/tx-rb").status == 200
    stored = call(base, "POST", f"{T}/tx-rb/store",
                  {"transaction": "rb-1", "messages": ["never"], "encoding": "text"})
    assert stored.status == 200 and stored.body["transaction"] == "rb-1"
    rolled = call(base, "POST", f"{T}/tx-rb/rollback", stored.body["rollback"])
    assert rolled.status == 200 and rolled.body == {"transaction": "rb-1", "rolledBack": True}
    assert call(base, "POST", f"{T}/tx-rb/rollback", {"transaction": "rb-1"}).status == 200
    commit = call(base, "POST", f"{T}/tx-rb/publish", {"transaction": "rb-1"})
    assert commit.status == 409 and commit.body["error"] == "TransactionAborted"
    call(base, "POST", f"{T}/tx-rb/publish", {"messages": ["after"], "encoding": "text"})
    assert texts(base, "tx-rb") == ["after"]


def test_an_abandoned_transaction_times_out(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.wait_leader())
    assert call(base, "PUT", f"{T}/tx-slow").status == 200
    stored = call(base, "POST", f"{T}/tx-slow/store",
                  {"transaction": "slow-1", "timeoutMs": 500, "messages": ["late"],
                   "encoding": "text"})
    assert stored.status == 200, stored.body
    time.sleep(0.8)  # past the deadline: what is tested is that time passing aborts it
    answer = call(base, "POST", f"{T}/tx-slow/publish", {"transaction": "slow-1"})
    assert answer.status == 409 and answer.body["error"] == "TransactionExpired", answer.body
    assert texts(base, "tx-slow") == []


def test_transaction_refusals(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{T}/tx-bad").status == 200
    unknown = call(base, "POST", f"{T}/tx-bad/publish", {"transaction": "never-begun"})
    assert unknown.status == 404 and unknown.body["error"] == "UnknownTransaction"
    # with messages too (issue #33 item 6: it used to begin, store and commit -> 200)
    unknown = call(base, "POST", f"{T}/tx-bad/publish",
                   {"transaction": "never-begun-2", "messages": ["x"], "encoding": "text"})
    assert unknown.status == 404 and unknown.body["error"] == "UnknownTransaction", unknown.body
    assert texts(base, "tx-bad") == []
    for body, code in [
        ({"transaction": "bad id!", "messages": ["YQ=="]}, "InvalidTransactionId"),
        ({"transaction": 5, "messages": ["YQ=="]}, "BadRequest"),
        ({"messages": ["YQ=="], "timeoutMs": 10**9}, "BadRequest"),
        ({"transaction": "t", "messages": []}, "BadRequest"),
    ]:
        answer = call(base, "POST", f"{T}/tx-bad/store", body)
        assert answer.status == 400 and answer.body["error"] == code, (body, answer.body)
    missing = call(base, "POST", f"{T}/tx-bad/rollback", {})
    assert missing.status == 400
    ttl = call(base, "POST", f"{T}/tx-bad/publish", {"transaction": "t", "ttlMs": 5})
    assert ttl.status == 400
    nowhere = call(base, "POST", f"{T}/tx-none/store", {"messages": ["YQ=="]})
    assert nowhere.status == 404 and nowhere.body["error"] == "UnknownTopic"


def test_a_retried_store_with_its_request_id_is_stored_once(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{T}/tx-once").status == 200
    rid = int(time.time()).to_bytes(4, "big").hex() + "fedcba9876543210"
    body = {"transaction": "once-1", "messages": ["m"], "encoding": "text"}
    for _ in range(2):  # the first begins the transaction, the retry changes nothing
        stored = call(base, "POST", f"{T}/tx-once/store", body,
                      headers={"Raftlog-Request-Id": rid})
        assert stored.status == 200, stored.body
    committed = call(base, "POST", f"{T}/tx-once/publish", {"transaction": "once-1"})
    assert committed.status == 200 and len(committed.body["ids"]) == 1, committed.body
    assert texts(base, "tx-once") == ["m"]
