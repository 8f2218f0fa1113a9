"""REST on a CURVE cluster: bearer tokens from the allowlist, the same roles and topic ACLs
as the ZeroMQ side, 401/403, and revocation by editing the allowlist (issue #18)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from integration.cluster import wait_for
from integration.secure_setup import SecureSetup
from raftlog.security.policy import token_digest

from .helpers import RestCluster, call, started

pytestmark = pytest.mark.timeout(90)
T = "/v1/namespaces/default/topics"
B = "/v1/namespaces/billing/topics"


def allowlist(*, writer: bool = True) -> str:
    """The allowlist: the admin's CURVE key (the harness' probes) plus REST-only tokens."""
    rows = [
        ("admin", "admin", None, "key = 'admin'"),
        ("reader", "reader", None, ""),
        ("billing", "writer", "['billing.*']", ""),
    ]
    if writer:
        rows.append(("writer", "writer", None, ""))
    text = ""
    for name, role, acl, extra in rows:
        text += f"[[clients]]\nname = '{name}'\nrole = '{role}'\n{extra}\n"
        text += f"token_sha256 = '{token_digest(name + '-token')}'\n"
        if acl is not None:
            text += f"publish = {acl}\nread = {acl}\n"
    return text


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCluster]:
    directory = tmp_path_factory.mktemp("rest-secure")
    secure = SecureSetup(directory)
    secure.clients_file.write_text(allowlist())
    c = started(directory, security=secure)
    try:
        yield c
    finally:
        c.stop()


def test_no_or_unknown_token_is_401(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    for token in (None, "guessed"):
        answer = call(base, "GET", T, token=token)
        assert answer.status == 401 and answer.body["error"] == "Unauthenticated"
        assert answer.headers["www-authenticate"].startswith("Bearer")
    basic = call(base, "GET", T, headers={"Authorization": "Basic YWRtaW46YWRtaW4="})
    assert basic.status == 401
    assert call(base, "GET", "/v1/openapi.json").status == 200  # the description is public


def test_roles_reader_writer_admin(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())  # writes are forwarded with the member key
    assert call(base, "PUT", f"{T}/roles", token="writer-token").status == 403
    assert call(base, "PUT", f"{T}/roles", token="admin-token").status == 200
    denied = call(base, "POST", f"{T}/roles/publish", {"messages": ["YQ=="]},
                  token="reader-token")
    assert denied.status == 403 and "needs role writer" in denied.body["message"]
    published = call(base, "POST", f"{T}/roles/publish", {"messages": ["YQ=="]},
                     token="writer-token")
    assert published.status == 200, published.body
    polled = call(base, "POST", f"{T}/roles/poll", {}, token="reader-token")
    assert polled.status == 200 and [m["payload"] for m in polled.body] == ["YQ=="]
    assert call(base, "DELETE", f"{T}/roles", token="writer-token").status == 403
    assert call(base, "PUT", f"{T}/roles/properties", {"ttl": 9},
                token="writer-token").status == 403


def test_topic_acls_follow_the_allowlist_patterns(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.wait_leader())
    assert call(base, "PUT", f"{B}/ledger", token="admin-token").status == 200
    assert call(base, "PUT", f"{T}/secret", token="admin-token").status == 200
    ok = call(base, "POST", f"{B}/ledger/publish", {"messages": ["YQ=="]},
              token="billing-token")
    assert ok.status == 200, ok.body
    for method, path in [("POST", f"{T}/secret/publish"), ("POST", f"{T}/secret/poll"),
                         ("GET", f"{T}/secret")]:
        answer = call(base, method, path, {"messages": ["YQ=="]} if "publish" in path else None,
                      token="billing-token")
        assert answer.status == 403 and "secret" in answer.body["message"], (path, answer.body)
    assert call(base, "GET", B, token="billing-token").body == ["ledger"]
    assert "secret" not in call(base, "GET", T, token="billing-token").body
    assert "secret" in call(base, "GET", T, token="reader-token").body


def test_a_token_removed_from_the_allowlist_stops_working(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "GET", T, token="writer-token").status == 200
    security = cluster.security
    assert security is not None
    security.clients_file.write_text(allowlist(writer=False))
    later = time.time() + 5  # a distinct modification time even on coarse clocks
    os.utime(security.clients_file, (later, later))
    try:
        wait_for("revocation", lambda: call(base, "GET", T, token="writer-token").status == 401,
                 timeout=10)
        assert call(base, "GET", T, token="reader-token").status == 200
    finally:
        security.clients_file.write_text(allowlist())
        os.utime(security.clients_file, (later + 5, later + 5))


def test_transactions_need_the_publish_right_on_the_topic(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{B}/escrow", token="admin-token").status == 200
    assert call(base, "PUT", f"{T}/vault", token="admin-token").status == 200
    stored = call(base, "POST", f"{B}/escrow/store", {"messages": ["YQ=="]},
                  token="billing-token")
    assert stored.status == 200, stored.body
    txid = stored.body["transaction"]
    sneaky = call(base, "POST", f"{T}/vault/store", {"transaction": txid,
                                                     "messages": ["YQ=="]},
                  token="billing-token")
    assert sneaky.status == 403
    assert call(base, "POST", f"{B}/escrow/store", {"messages": ["YQ=="]},
                token="reader-token").status == 403
    assert call(base, "POST", f"{T}/vault/rollback", {"transaction": txid},
                token="billing-token").status == 403
    committed = call(base, "POST", f"{B}/escrow/publish", {"transaction": txid},
                     token="billing-token")
    assert committed.status == 200, committed.body
    polled = call(base, "POST", f"{B}/escrow/poll", {}, token="billing-token")
    assert [m["payload"] for m in polled.body] == ["YQ=="]


def test_a_transaction_belongs_to_the_token_that_began_it(cluster: RestCluster) -> None:
    """Issue #25, finding 3: a transaction id is not a capability."""
    base = cluster.http_url(cluster.follower())
    # the revocation test above put the writer back: its reload may take a second
    wait_for("the writer token", lambda: call(base, "GET", T, token="writer-token").status == 200)
    assert call(base, "PUT", f"{B}/owned", token="admin-token").status == 200
    assert call(base, "PUT", f"{T}/orders", token="admin-token").status == 200
    stored = call(base, "POST", f"{T}/orders/store", {"messages": ["YQ=="]},
                  token="admin-token")
    assert stored.status == 200, stored.body
    txid = stored.body["transaction"]
    for token, path in [("billing-token", f"{B}/owned/publish"),
                        ("writer-token", f"{T}/orders/publish")]:
        stolen = call(base, "POST", path, {"transaction": txid}, token=token)
        assert stolen.status == 403 and stolen.body["error"] == "TransactionNotOwned", stolen.body
    for token, path in [("billing-token", f"{B}/owned/rollback"),
                        ("writer-token", f"{T}/orders/rollback")]:
        assert call(base, "POST", path, {"transaction": txid}, token=token).status == 403
    sneaky = call(base, "POST", f"{T}/orders/store", {"transaction": txid,
                                                      "messages": ["Yg=="]},
                  token="writer-token")
    assert sneaky.status == 403
    committed = call(base, "POST", f"{T}/orders/publish", {"transaction": txid},
                     token="admin-token")
    assert committed.status == 200 and len(committed.body["ids"]) == 1, committed.body
    # a writer's own transaction: an admin may end it, another writer may not
    mine = call(base, "POST", f"{B}/owned/store", {"messages": ["YQ=="]},
                token="billing-token")
    assert mine.status == 200, mine.body
    other = mine.body["transaction"]
    assert call(base, "POST", f"{T}/orders/rollback", {"transaction": other},
                token="writer-token").status == 403
    assert call(base, "POST", f"{B}/owned/rollback", {"transaction": other},
                token="admin-token").status == 200
