"""Roles, topic ACLs, peer binding and allowlist parsing (pure: no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.errors import ConfigError
from raftlog.metrics import PeerMetrics
from raftlog.registry import Permission
from raftlog.rpc.messages import (
    TYPE_APPEND_ENTRIES,
    TYPE_CONFIG_UPDATE,
    TYPE_REQUEST_ENTRIES,
    TYPE_REQUEST_UPDATE,
    TYPE_REQUEST_VOTE,
)
from raftlog.security import keys
from raftlog.security.guard import RequestGuard
from raftlog.security.policy import (
    AccessPolicy,
    PolicyHolder,
    Principal,
    Role,
    TopicFilter,
    load_clients,
    needed_permission,
    token_digest,
)
from raftlog.topics.records import Record, TopicCommand, encode_command, encode_records
from raftlog.topics.wire import (
    TYPE_DESCRIBE,
    TYPE_LIST,
    TYPE_PUBLISH,
    TYPE_READ,
    ReadRequest,
    encode_read_request,
)

A, B, C, D = (bytes([65 + n]) * 40 for n in range(4))


def principal(role: str, **acl: list[str]) -> Principal:
    return Principal(
        name=role,
        role=Role.parse(role, "test"),
        publish=TopicFilter.parse(acl.get("publish"), "publish"),
        read=TopicFilter.parse(acl.get("read"), "read"),
    )


@pytest.mark.parametrize(
    ("role", "msg_type", "allowed"),
    [
        ("reader", TYPE_REQUEST_ENTRIES, True),
        ("reader", TYPE_READ, True),
        ("reader", TYPE_REQUEST_UPDATE, False),
        ("reader", TYPE_PUBLISH, False),
        ("writer", TYPE_REQUEST_UPDATE, True),
        ("writer", TYPE_PUBLISH, True),
        ("writer", TYPE_CONFIG_UPDATE, False),
        ("writer", b"AC", False),  # compaction needs admin (its registry row)
        ("admin", TYPE_CONFIG_UPDATE, True),
        ("admin", b"AC", True),
        ("admin", TYPE_REQUEST_VOTE, False),  # clients never send peer RPCs
        ("admin", TYPE_APPEND_ENTRIES, False),
    ],
)
def test_roles_are_cumulative_and_peer_rpcs_are_for_members(
    role: str, msg_type: bytes, allowed: bool
) -> None:
    assert (principal(role).refusal(msg_type) is None) is allowed


def test_unknown_message_types_need_admin() -> None:
    assert needed_permission(b"ZZ") is Permission.ADMIN


def test_members_may_send_peer_rpcs_and_client_requests_for_their_rest_gateway() -> None:
    member = Principal(name="peer 1", peer_id="1")
    assert member.refusal(TYPE_REQUEST_VOTE) is None
    assert member.refusal(TYPE_REQUEST_ENTRIES) is None
    # a member's REST gateway forwards writes it has authorised itself (docs/rest.md)
    assert member.refusal(TYPE_REQUEST_UPDATE) is None
    assert member.may_read("anything") and not member.may_publish("anything")


def test_topic_filters_match_names_and_prefixes() -> None:
    acl = TopicFilter.parse(["orders", "pay.*"], "acl")
    assert acl.allows("orders") and acl.allows("pay.eu") and acl.allows("pay.")
    assert not acl.allows("orders2") and not acl.allows("audit")
    assert TopicFilter.parse(None, "acl").allows("anything")
    assert not TopicFilter.parse([], "acl").allows("anything")
    with pytest.raises(ConfigError, match="may only end"):
        TopicFilter.parse(["a*b"], "acl")


def test_a_key_cannot_carry_two_sets_of_rights() -> None:
    with pytest.raises(ConfigError, match="already used by peer 1"):
        AccessPolicy.build({"1": A}, [principal("admin")], [A])
    with pytest.raises(ConfigError, match="share a public key"):
        AccessPolicy.build({"1": A, "2": A}, [], [])


def test_guard_binds_peer_rpcs_to_the_senders_own_id() -> None:
    policy = AccessPolicy.build({"1": A, "2": B}, [principal("admin")], [C])
    metrics = PeerMetrics()
    guard = RequestGuard(PolicyHolder(policy), metrics.access_refused, owner="3")
    vote_as_1 = [b"r", b"id", TYPE_REQUEST_VOTE, b"ident", b"1", b"\x05"]
    assert guard.refusal(vote_as_1, A.decode()) is None
    assert "may not speak for peer '1'" in (guard.refusal(vote_as_1, B.decode()) or "")
    assert "not a member" in (guard.refusal(vote_as_1, C.decode()) or "")
    assert "not allowed" in (guard.refusal(vote_as_1, D.decode()) or "")
    assert "not allowed" in (guard.refusal(vote_as_1, None) or "")
    refused = {labels: value.value for labels, value in metrics.access_refused.series()}
    assert refused == {("peer_impersonation",): 1, ("role",): 1, ("unknown_key",): 2}


def test_replacing_the_policy_revokes_at_the_next_request() -> None:
    holder = PolicyHolder(AccessPolicy.build({}, [principal("writer")], [A]))
    guard = RequestGuard(holder, PeerMetrics().access_refused, owner="1")
    update = [b"r", b"id", TYPE_REQUEST_UPDATE, b"ident", b"x"]
    assert guard.refusal(update, A.decode()) is None
    holder.replace(AccessPolicy.build({}, [], []))
    assert guard.refusal(update, A.decode()) is not None
    assert holder.generation == 1


def test_allowlist_file_parses_roles_acls_and_key_references(tmp_path: Path) -> None:
    keys.generate("billing", tmp_path)
    inline = keys.load(tmp_path / "billing.key").public.decode()
    keys.generate("audit", tmp_path)
    audit_inline = keys.load(tmp_path / "audit.key").public.decode()
    (tmp_path / "clients.toml").write_text(
        "[[clients]]\nname = 'ghost'\nkey = 'nosuchkey'\nrole = 'reader'\n"
    )
    with pytest.raises(ConfigError, match="no key 'nosuchkey'"):
        load_clients(tmp_path / "clients.toml", tmp_path)
    (tmp_path / "clients.toml").write_text(
        "[[clients]]\nname = 'billing'\nrole = 'writer'\npublish = ['billing.*']\n"
        f"[[clients]]\nname = 'auditor'\nkey = '{audit_inline}'\nrole = 'reader'\n"
    )
    allowed = load_clients(tmp_path / "clients.toml", tmp_path)
    principals, public = allowed.clients, allowed.client_keys
    assert [p.name for p in principals] == ["billing", "auditor"]
    assert public == [inline.encode(), audit_inline.encode()]
    assert principals[0].may_publish("billing.eu") and not principals[0].may_publish("hr")
    assert principals[1].role is Role.READER


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[[clients]]\nname = 'x'\nrole = 'root'\n", "role must be one of"),
        ("[[clients]]\nname = 'x'\nrole = 'admin'\nshoe = 1\n", "unknown field"),
        ("[[clients]]\nrole = 'admin'\n", "needs a non-empty name"),
        ("[clients]\nname = 'x'\n", "must be \\[\\[clients\\]\\] tables"),
        ("[[clients]\n", "not valid TOML"),
    ],
)
def test_bad_allowlists_fail_with_one_line(tmp_path: Path, text: str, error: str) -> None:
    keys.generate("x", tmp_path)
    (tmp_path / "clients.toml").write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_clients(tmp_path / "clients.toml", tmp_path)


def test_key_files_are_standard_and_the_secret_is_private(tmp_path: Path) -> None:
    secret = keys.generate("peer-1", tmp_path)
    assert (secret.stat().st_mode & 0o777) == 0o600
    pair = keys.load(secret)
    assert len(pair.public) == 40 and pair.secret is not None and len(pair.secret) == 40
    assert keys.load(tmp_path / "peer-1.key").secret is None
    with pytest.raises(ConfigError, match="already exists"):
        keys.generate("peer-1", tmp_path)
    with pytest.raises(ConfigError, match="key name"):
        keys.generate("../evil", tmp_path)
    (tmp_path / "junk.key").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"junk\.key"):
        keys.load(tmp_path / "junk.key")


# -- topic rights ---------------------------------------------------------------------------
def _frames(msg_type: bytes, *args: bytes) -> list[bytes]:
    return [b"r", b"id" * 6, msg_type, b"ident", *args]


def test_topic_acls_limit_publishing_reading_and_the_raw_log() -> None:
    limited = principal("writer", publish=["pay.*"], read=["pay.*"])
    unlimited = principal("writer")
    admin = principal("admin")
    policy = AccessPolicy.build({}, [limited, unlimited, admin], [A, B, C])
    guard = RequestGuard(PolicyHolder(policy), PeerMetrics().access_refused, owner="1")
    pay = encode_records([Record("pay.eu", b"1")])
    mixed = encode_records([Record("pay.eu", b"1"), Record("hr", b"2")])
    create = encode_command(TopicCommand("create", "pay.us", {}))

    def refused(key: bytes, msg_type: bytes, *args: bytes) -> str | None:
        return guard.refusal(_frames(msg_type, *args), key.decode())

    assert refused(A, TYPE_PUBLISH, pay) is None
    assert "may not publish to topic 'hr'" in (refused(A, TYPE_PUBLISH, mixed) or "")
    assert "not plain updates" in (refused(A, TYPE_REQUEST_UPDATE, b"plain") or "")
    assert refused(B, TYPE_REQUEST_UPDATE, b"plain") is None
    assert refused(B, TYPE_PUBLISH, mixed) is None
    assert "needs role admin" in (refused(B, TYPE_REQUEST_UPDATE, create) or "")
    assert refused(C, TYPE_REQUEST_UPDATE, create) is None
    assert "use topic reads" in (refused(A, TYPE_REQUEST_ENTRIES, b"\x00") or "")
    assert refused(B, TYPE_REQUEST_ENTRIES, b"\x00") is None
    read_pay = encode_read_request(ReadRequest("pay.eu"))
    read_hr = encode_read_request(ReadRequest("hr"))
    assert refused(A, TYPE_READ, *read_pay) is None
    assert "may not read topic 'hr'" in (refused(A, TYPE_READ, *read_hr) or "")
    assert refused(A, TYPE_DESCRIBE, b"hr") is not None
    assert refused(A, TYPE_LIST) is None  # topic names are not records


def test_rest_tokens_are_listed_by_digest_and_may_stand_without_a_key(tmp_path: Path) -> None:
    keys.generate("billing", tmp_path)
    web, ops = token_digest("web-secret"), token_digest("ops-secret")
    (tmp_path / "clients.toml").write_text(
        f"[[clients]]\nname = 'web'\nrole = 'writer'\npublish = ['web.*']\ntoken_sha256 = '{web}'\n"
        f"[[clients]]\nname = 'billing'\nkey = 'billing'\nrole = 'admin'\ntoken_sha256 = '{ops}'\n"
    )
    allowed = load_clients(tmp_path / "clients.toml", tmp_path)
    assert allowed.client_keys[0] is None  # REST-only: no key file needed
    assert allowed.client_keys[1] == keys.load(tmp_path / "billing.key").public
    policy = AccessPolicy.build({}, allowed.clients, allowed.client_keys, allowed.client_tokens)
    web_client = policy.token_principal("web-secret")
    assert web_client is not None and web_client.name == "web"
    assert web_client.may_publish("web.orders") and not web_client.may_publish("hr")
    assert policy.token_principal("guess") is None
    assert len(policy.principals) == 1  # the REST-only client has no CURVE key
    (tmp_path / "clients.toml").write_text(
        "[[clients]]\nname = 'web'\nrole = 'writer'\ntoken_sha256 = 'web-secret'\n"
    )
    with pytest.raises(ConfigError, match="64 lower-case hex"):
        load_clients(tmp_path / "clients.toml", tmp_path)
    with pytest.raises(ConfigError, match="token is already used"):
        AccessPolicy.build({}, allowed.clients, [None, None], [web, web])
