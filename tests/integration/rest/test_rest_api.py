"""The REST API on a real 3-peer cluster: every endpoint and status code, on the leader and
on a follower, and bad input that must get a clear 4xx and leave the peer unharmed
(issue #18, part 3). One cluster for the module; each test uses its own topics."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, module_cluster, wait_for

from .helpers import Answer, RestCluster, call, started

pytestmark = pytest.mark.timeout(90)
T = "/v1/namespaces/default/topics"


cluster = module_cluster(started, "rest")


@pytest.fixture(params=["leader", "follower"])
def base(request: pytest.FixtureRequest, cluster: RestCluster) -> str:
    """The HTTP URL of the leader or of a follower: both must behave the same."""
    leader = cluster.wait_leader()
    peer = leader if request.param == "leader" else cluster.follower()
    return cluster.http_url(peer)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_topic_lifecycle_and_status_codes(base: str) -> None:
    name = f"life-{base.rsplit(':', 1)[1]}"
    created = call(base, "PUT", f"{T}/{name}", {"ttl": "3600", "max_bytes": 1_000_000})
    assert created.status == 200, created.body
    assert call(base, "PUT", f"{T}/{name}").status == 409
    assert call(base, "PUT", f"{T}/{name}").body["error"] == "TopicExists"
    got = call(base, "GET", f"{T}/{name}")
    assert got.status == 200
    assert got.body["properties"]["retention_ms"] == 3_600_000
    assert got.body["properties"]["ttl"] == 3600
    assert got.body["properties"]["max_bytes"] == 1_000_000
    assert name in call(base, "GET", T).body
    updated = call(base, "PUT", f"{T}/{name}/properties", {"max_bytes": None, "ttl": 60})
    assert updated.status == 200, updated.body
    props = call(base, "GET", f"{T}/{name}").body["properties"]
    assert props["max_bytes"] is None and props["retention_ms"] == 60_000
    assert call(base, "DELETE", f"{T}/{name}").status == 200
    for method, path, body in [
        ("GET", f"{T}/{name}", None),
        ("DELETE", f"{T}/{name}", None),
        ("PUT", f"{T}/{name}/properties", {"ttl": 5}),
        ("POST", f"{T}/{name}/publish", {"messages": [b64(b"x")]}),
        ("POST", f"{T}/{name}/poll", {}),
    ]:
        answer = call(base, method, path, body)
        assert answer.status == 404, (method, path, answer.body)
        assert answer.body["error"] == "UnknownTopic"
    assert name not in call(base, "GET", T).body


def test_a_topic_description_round_trips_through_rest(base: str) -> None:
    """Issue #26's worked example on a real cluster: REST -> gateway client -> TP admin
    command -> every peer's state machine -> TD -> REST."""
    name = f"described-{base.rsplit(':', 1)[1]}"
    text = "orders of the shop — ü"
    assert call(base, "PUT", f"{T}/{name}", {"description": text, "ttl": 60}).status == 200
    props = call(base, "GET", f"{T}/{name}").body["properties"]
    assert props["description"] == text and props["retention_ms"] == 60_000
    assert call(base, "PUT", f"{T}/{name}/properties", {"description": None}).status == 200
    props = call(base, "GET", f"{T}/{name}").body["properties"]
    assert props["description"] is None and props["retention_ms"] == 60_000
    bad = call(base, "PUT", f"{T}/{name}/properties", {"description": 5})
    assert bad.status == 400 and bad.body["error"] == "InvalidProperty"
    assert call(base, "DELETE", f"{T}/{name}").status == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"colour": 1}, "unknown topic property"),
        ({"ttl": -1}, "positive integer"),
        ({"ttl": "soon"}, "positive integer"),
        ({"ttl": 1, "retention_ms": 5}, "not both"),
        ({"max_bytes": 2**60}, "2^53"),
    ],
)
def test_bad_properties_are_400(cluster: RestCluster, body: dict[str, object],
                                fragment: str) -> None:
    base = cluster.http_url(cluster.follower())
    answer = call(base, "PUT", f"{T}/badprops", body)
    assert answer.status == 400 and answer.body["error"] == "InvalidProperty"
    assert fragment in answer.body["message"]
    assert call(base, "GET", f"{T}/badprops").status == 404  # nothing was created


def test_publish_and_poll_by_id_time_inclusive_and_limit(base: str) -> None:
    name = f"msgs-{base.rsplit(':', 1)[1]}"
    assert call(base, "PUT", f"{T}/{name}").status == 200
    before = int(time.time() * 1000) - 1
    first = call(base, "POST", f"{T}/{name}/publish",
                 {"messages": [b64(b"\x00\xffbin"), b64(b"two")]})
    assert first.status == 200, first.body
    ids = first.body["ids"]
    assert len(ids) == 2 and ids[0].endswith("-0") and ids[1].endswith("-1")
    second = call(base, "POST", f"{T}/{name}/publish",
                  {"messages": [{"n": 3}, [4]], "encoding": "json"})
    ids += second.body["ids"]
    texts = call(base, "POST", f"{T}/{name}/publish",
                 {"messages": ["fünf"], "encoding": "text"})
    ids += texts.body["ids"]

    everything = call(base, "POST", f"{T}/{name}/poll", {})
    assert everything.status == 200
    assert [m["id"] for m in everything.body] == ids
    assert base64.b64decode(everything.body[0]["payload"]) == b"\x00\xffbin"
    assert everything.headers["x-raftlog-more"] == "false"
    as_json = call(base, "POST", f"{T}/{name}/poll",
                   {"startFrom": ids[2], "encoding": "json"}).body
    assert as_json[2]["payloadBase64"] == b64("fünf".encode())  # not JSON: bytes as stored
    assert as_json[:2] == [
        {"id": ids[2], "timestamp": as_json[0]["timestamp"], "payload": {"n": 3}},
        {"id": ids[3], "timestamp": as_json[1]["timestamp"], "payload": [4]},
    ]
    after = call(base, "POST", f"{T}/{name}/poll",
                 {"startFrom": ids[1], "inclusive": False, "limit": 2}).body
    assert [m["id"] for m in after] == ids[2:4]
    text = call(base, "POST", f"{T}/{name}/poll",
                {"startFrom": ids[4], "encoding": "text"}).body
    assert text[0]["payload"] == "fünf"
    binary_as_text = call(base, "POST", f"{T}/{name}/poll",
                          {"limit": 1, "encoding": "text"}).body
    assert base64.b64decode(binary_as_text[0]["payloadBase64"]) == b"\x00\xffbin"
    by_time = call(base, "POST", f"{T}/{name}/poll", {"startFrom": before}).body
    assert [m["id"] for m in by_time] == ids
    stamp = everything.body[-1]["timestamp"]
    assert call(base, "POST", f"{T}/{name}/poll",
                {"startFrom": stamp + 10_000}).body == []
    limited = call(base, "POST", f"{T}/{name}/poll", {"limit": 1})
    assert len(limited.body) == 1 and limited.headers["x-raftlog-more"] == "true"


def test_long_poll_waits_for_a_publish(cluster: RestCluster) -> None:
    leader = cluster.http_url(cluster.wait_leader())
    follower = cluster.http_url(cluster.follower())
    assert call(follower, "PUT", f"{T}/waiting").status == 200  # applied there on return
    got: dict[str, object] = {}

    def poll() -> None:
        started_at = time.monotonic()
        answer = call(follower, "POST", f"{T}/waiting/poll",
                      {"waitMs": 4000, "encoding": "text"})
        got["answer"], got["took"] = answer, time.monotonic() - started_at

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)  # let the poll start waiting (what is tested is that it waits)
    assert call(leader, "POST", f"{T}/waiting/publish",
                {"messages": ["late"], "encoding": "text"}).status == 200
    thread.join(10)
    answer = got["answer"]
    assert answer.status == 200 and [m["payload"] for m in answer.body] == ["late"]
    assert got["took"] < 3.5  # answered by the publish, not by the deadline
    started_at = time.monotonic()
    empty = call(follower, "POST", f"{T}/waiting/poll",
                 {"startFrom": answer.body[0]["id"], "inclusive": False, "waitMs": 300})
    assert empty.body == [] and time.monotonic() - started_at >= 0.3


def test_namespaces_map_onto_prefixed_topic_names(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "GET", "/v1/namespaces").body == ["billing", "default"]
    assert call(base, "PUT", "/v1/namespaces/billing/topics/invoices").status == 200
    assert call(base, "GET", "/v1/namespaces/billing/topics").body == ["invoices"]
    assert "billing.invoices" not in call(base, "GET", T).body  # one REST name per topic
    published = call(base, "POST", "/v1/namespaces/billing/topics/invoices/publish",
                     {"messages": ["i-1"], "encoding": "text"})
    assert published.status == 200
    for method, path in [("GET", "/v1/namespaces/nope/topics"),
                         ("PUT", "/v1/namespaces/nope/topics/x"),
                         ("POST", "/v1/namespaces/nope/topics/x/poll")]:
        answer = call(base, method, path)
        assert answer.status == 404 and answer.body["error"] == "NamespaceNotFound"
    dotted = call(base, "PUT", f"{T}/billing.sneaky")
    assert dotted.status == 400 and dotted.body["error"] == "InvalidTopicName"
    bad = call(base, "PUT", f"{T}/{'x' * 300}")
    assert bad.status == 400 and bad.body["error"] == "InvalidTopicName"


@pytest.mark.parametrize(
    ("path", "raw", "status", "code"),
    [
        (f"{T}/bad/publish", b"{not json", 400, "MalformedJson"),
        (f"{T}/bad/publish", b"\xff\xfe", 400, "MalformedJson"),
        (f"{T}/bad/publish", b"[1, 2]", 400, "BadRequest"),
        (f"{T}/bad/publish", b"", 400, "BadRequest"),
        (f"{T}/bad/publish", b'{"messages": []}', 400, "BadRequest"),
        (f"{T}/bad/publish", b'{"messages": ["***"]}', 400, "BadRequest"),
        (f"{T}/bad/publish", b'{"messages": [1]}', 400, "BadRequest"),
        (f"{T}/bad/publish", b'{"messages": ["YQ=="], "encoding": "rot13"}', 400, "BadRequest"),
        (f"{T}/bad/publish", b'{"messages": ["YQ=="], "mesages": 1}', 400, "BadRequest"),
        (f"{T}/bad/poll", b'{"startFrom": "12"}', 400, "BadRequest"),
        (f"{T}/bad/poll", b'{"startFrom": -5}', 400, "BadRequest"),
        (f"{T}/bad/poll", b'{"limit": 0}', 400, "BadRequest"),
        (f"{T}/bad/poll", b'{"inclusive": "yes"}', 400, "BadRequest"),
        (f"{T}/bad/poll", b'{"waitMs": 1.5}', 400, "BadRequest"),
        (f"{T}/bad", b'{"ttl": {"a": 1}}', 400, "InvalidProperty"),
    ],
)
def test_bad_input_is_a_clear_4xx(cluster: RestCluster, path: str, raw: bytes, status: int,
                                  code: str) -> None:
    base = cluster.http_url(cluster.follower())
    call(base, "PUT", f"{T}/bad")
    method = "PUT" if path == f"{T}/bad" else "POST"
    answer = call(base, method, path, raw=raw)
    assert answer.status == status, answer.raw
    assert answer.body["error"] == code and answer.body["message"]


def test_huge_bodies_unknown_routes_and_methods_then_the_peer_is_unharmed(
    cluster: RestCluster,
) -> None:
    peer = cluster.follower()
    base = cluster.http_url(peer)
    call(base, "PUT", f"{T}/huge")
    big = json.dumps({"messages": [b64(b"x" * 70_000)]}).encode()
    answer = call(base, "POST", f"{T}/huge/publish", raw=big)
    assert answer.status == 413 and answer.body["error"] == "BodyTooLarge"
    # a body sent without Content-Length (chunked) is cut off the same way
    chunked = call(base, "POST", f"{T}/huge/publish", chunks=[b'{"messages": ["'] +
                   [b"eHh4" * 4096] * 8 + [b'"]}'])
    assert chunked.status == 413 and chunked.body["error"] == "BodyTooLarge"
    lying = call(base, "POST", f"{T}/huge/publish", raw=b"{}",
                 headers={"Content-Length": str(10**9)}, timeout=5)
    assert lying.status == 413
    wrong_method = call(base, "PATCH", f"{T}/huge")
    assert wrong_method.status == 405 and wrong_method.body["error"]
    nowhere = call(base, "GET", "/v1/nothing/here")
    assert nowhere.status == 404 and nowhere.body["error"]
    assert cluster.peers[peer].running
    assert call(base, "GET", "/healthz").status == 200
    fine = call(base, "POST", f"{T}/huge/publish", {"messages": ["b2s="]})
    assert fine.status == 200


def test_openapi_describes_every_route(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.wait_leader())
    spec = call(base, "GET", "/v1/openapi.json")
    assert spec.status == 200 and spec.body["openapi"].startswith("3.")
    paths = spec.body["paths"]
    for path, methods in {
        "/v1/namespaces/{ns}/topics": {"get"},
        "/v1/namespaces/{ns}/topics/{topic}": {"put", "get", "delete"},
        "/v1/namespaces/{ns}/topics/{topic}/properties": {"put"},
        "/v1/namespaces/{ns}/topics/{topic}/publish": {"post"},
        "/v1/namespaces/{ns}/topics/{topic}/poll": {"post"},
    }.items():
        assert methods <= set(paths[path]), path


def test_writes_survive_a_leader_change(cluster: PeerCluster, tmp_path: Path) -> None:
    """A follower forwards to whoever leads now: kill the leader, publish again through a
    surviving follower (it waits for the new leader within its request timeout)."""
    assert isinstance(cluster, RestCluster)
    leader = cluster.wait_leader()
    survivor = cluster.follower()
    base = cluster.http_url(survivor)
    assert call(base, "PUT", f"{T}/failover").status == 200
    cluster.kill(leader)
    try:
        answer = call(base, "POST", f"{T}/failover/publish",
                      {"messages": ["after"], "encoding": "text"}, timeout=20)
        assert answer.status == 200, answer.body
        polled = call(base, "POST", f"{T}/failover/poll", {"encoding": "text"}).body
        assert [m["payload"] for m in polled] == ["after"]
    finally:
        cluster.start(leader)
        cluster.wait_stable_leader()


def test_a_waiting_long_poll_does_not_hold_a_stopping_peer(cluster: RestCluster) -> None:
    peer = cluster.follower()
    base = cluster.http_url(peer)
    assert call(base, "PUT", f"{T}/quiet").status == 200
    got: dict[str, object] = {}

    def poll() -> None:
        try:
            got["answer"] = call(base, "POST", f"{T}/quiet/poll", {"waitMs": 5000})
        except OSError as exc:  # the connection closed by the stopping peer is fine too
            got["answer"] = exc

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)  # the poll is waiting now
    started_at = time.monotonic()
    try:
        assert cluster.terminate(peer) == 0
        assert time.monotonic() - started_at < 3.0  # not the 5 s the poll asked to wait
        thread.join(10)
        answer = got["answer"]
        if isinstance(answer, Answer):  # what it had, or "retry elsewhere"
            assert answer.body == [] or answer.body["error"] == "ShuttingDown", answer.body
    finally:
        cluster.start(peer)
        cluster.wait_stable_leader()
        wait_for("REST back", lambda: call(base, "GET", "/v1/namespaces").status == 200)


def test_a_start_below_what_retention_removed_is_410_with_the_first_available(
    cluster: RestCluster,
) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{T}/small", {"max_bytes": 250}).status == 200
    ids = []
    for n in range(4):  # 100 bytes each: only the newest two fit in 250 bytes
        ids += call(base, "POST", f"{T}/small/publish",
                    {"messages": [b64(bytes([n]) * 100)]}).body["ids"]
    gone = call(base, "POST", f"{T}/small/poll", {"startFrom": ids[0]})
    assert gone.status == 410 and gone.body["error"] == "RecordsExpired", gone.body
    assert gone.body["firstAvailable"] == ids[2]
    kept = call(base, "POST", f"{T}/small/poll", {"startFrom": gone.body["firstAvailable"]})
    assert [m["id"] for m in kept.body] == ids[2:]


def test_without_a_quorum_writes_are_503_and_local_reads_still_answer(
    cluster: RestCluster,
) -> None:
    leader = cluster.wait_leader()
    alone = cluster.follower()
    other = next(p for p in cluster.peers if p not in (leader, alone))
    base = cluster.http_url(alone)
    assert call(base, "PUT", f"{T}/minority").status == 200
    assert call(base, "POST", f"{T}/minority/publish", {"messages": ["YQ=="]}).status == 200
    cluster.kill(leader)
    cluster.kill(other)
    try:
        started_at = time.monotonic()
        refused = call(base, "POST", f"{T}/minority/publish", {"messages": ["Yg=="]})
        assert refused.status == 503 and refused.body["error"] == "Unavailable", refused.body
        assert time.monotonic() - started_at < 10  # [rest] request_timeout_ms = 4000
        local = call(base, "POST", f"{T}/minority/poll", {})
        assert local.status == 200 and [m["payload"] for m in local.body] == ["YQ=="]
    finally:
        cluster.start(leader, other)
        cluster.wait_stable_leader()


def test_a_retried_publish_with_its_request_id_is_applied_once(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{T}/once").status == 200
    rid = int(time.time()).to_bytes(4, "big").hex() + "0123456789abcdef"
    head = {"Raftlog-Request-Id": rid}
    first = call(base, "POST", f"{T}/once/publish", {"messages": ["YQ=="]}, headers=head)
    again = call(base, "POST", f"{T}/once/publish", {"messages": ["YQ=="]}, headers=head)
    assert first.status == again.status == 200 and first.body == again.body
    assert len(call(base, "POST", f"{T}/once/poll", {}).body) == 1
    for bad in ("xyz", "00" * 12, "ab" * 11):
        answer = call(base, "POST", f"{T}/once/publish", {"messages": ["YQ=="]},
                      headers={"Raftlog-Request-Id": bad})
        assert answer.status == 400 and "Raftlog-Request-Id" in answer.body["message"]
    stale = call(base, "POST", f"{T}/once/publish", {"messages": ["YQ=="]},
                 headers={"Raftlog-Request-Id": "00000001" + "77" * 8})
    assert stale.status == 400 and stale.body["error"] == "RequestIdExpired", stale.body


def test_conditional_publish_and_the_key_value_endpoints(base: str) -> None:
    """Issue #29 over REST, from the leader and from a follower alike."""
    port = base.rsplit(":", 1)[1]
    log, kv = f"cas-{port}", f"kv-{port}"
    assert call(base, "PUT", f"{T}/{log}").status == 200
    first = call(base, "POST", f"{T}/{log}/publish",
                 {"messages": ["a"], "encoding": "text", "expectLastId": "none"})
    assert first.status == 200, first.body
    again = call(base, "POST", f"{T}/{log}/publish",
                 {"messages": ["b"], "encoding": "text", "expectLastId": "none"})
    assert again.status == 409 and again.body["error"] == "ExpectationFailed"
    assert again.body["lastId"] == first.body["ids"][0]
    chained = call(base, "POST", f"{T}/{log}/publish",
                   {"messages": ["c"], "encoding": "text", "expectLastId": first.body["ids"][0]})
    assert chained.status == 200, chained.body

    assert call(base, "PUT", f"{T}/{kv}", {"cleanup_policy": "compact"}).status == 200
    put = call(base, "PUT", f"{T}/{kv}/keys/alice", {"value": "10", "encoding": "text"})
    assert put.status == 200, put.body
    stale = call(base, "PUT", f"{T}/{kv}/keys/alice",
                 {"value": "11", "encoding": "text", "expectRevision": "none"})
    assert stale.status == 409 and stale.body["lastId"] == put.body["revision"]
    cas = call(base, "PUT", f"{T}/{kv}/keys/alice",
               {"value": "25", "encoding": "text", "expectRevision": put.body["revision"]})
    assert cas.status == 200, cas.body
    assert call(base, "PUT", f"{T}/{kv}/keys/bob", {"value": "5", "encoding": "text"}).status == 200
    got = call(base, "GET", f"{T}/{kv}/keys/alice?encoding=text")  # this peer has applied it
    assert got.body == {"key": "alice", "revision": cas.body["revision"], "payload": "25"}
    listed = call(base, "GET", f"{T}/{kv}/keys?prefix=a").body
    assert listed == {"keys": [{"key": "alice", "revision": cas.body["revision"]}], "more": False}
    deleted = call(base, "DELETE", f"{T}/{kv}/keys/bob")
    assert deleted.status == 200
    assert call(base, "GET", f"{T}/{kv}/keys/bob").body["error"] == "KeyNotFound"
    watched = call(base, "POST", f"{T}/{kv}/watch", {"fromRevision": 1, "encoding": "text"})
    assert [(e["type"], e["key"]) for e in watched.body["events"]] == [
        ("put", "alice"), ("delete", "bob"),
    ]
    later = call(base, "POST", f"{T}/{kv}/watch", {"fromRevision": watched.body["next"]})
    assert later.body["events"] == []
    # a waiting watch: woken by the next put (its wake-up brings no records; it reads them)
    waited: list[Answer] = []
    watcher = threading.Thread(target=lambda: waited.append(call(
        base, "POST", f"{T}/{kv}/watch",
        {"fromRevision": later.body["next"], "waitMs": 20_000, "encoding": "text"},
        timeout=30)))
    watcher.start()
    time.sleep(0.3)  # most likely waiting by now; if not, it finds the put at once
    assert call(base, "PUT", f"{T}/{kv}/keys/carol", {"value": "7", "encoding": "text"}).status \
        == 200
    watcher.join(30)
    assert [(e["type"], e["key"], e["payload"]) for e in waited[0].body["events"]] == [
        ("put", "carol", "7")]
    plain = call(base, "GET", f"{T}/{log}/keys/alice")
    assert plain.status == 400 and plain.body["error"] == "NotCompacted"
