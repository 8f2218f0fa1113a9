"""Peer URLs, peer lists, CONFIG payloads and ConfigUpdate validation (docs/protocol.md §1, §4.2,
§10.4), with the reference's error names and messages."""

from __future__ import annotations

import msgpack
import pytest

from raftlog.errors import ConfigError
from raftlog.rpc.config import (
    PeerListError,
    check_config_update,
    decode_config_payload,
    encode_config_payload,
    parse_peers,
    peers_from_json,
    validate_peer_url,
)
from raftlog.rpc.messages import ConfigPayload, ConfigUpdateErrorInfo, Peer

A = Peer("A", "tcp://10.0.0.1:8047")
B = Peer("B", "tcp://10.0.0.2:8047")
C = Peer("C", "tcp://10.0.0.3:8047")
D = Peer("D", "tcp://10.0.0.4:8047")


@pytest.mark.parametrize(
    "url",
    [
        "tcp://127.0.0.1:8047",
        "tcp://10.0.0.1:1",
        "tcp://10.0.0.1:65535",
        "tcp://[::1]:8047",
        "tcp://[2001:db8::7]:9000",
        "tcp://[::ffff:10.0.0.1]:9000",
    ],
)
def test_valid_urls_are_returned_unchanged(url: str) -> None:
    assert validate_peer_url(url) == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "peer url must be a non empty string"),
        (42, "peer url must be a non empty string"),
        ("http://10.0.0.1:8047", "peer url protocol must be tcp:"),
        ("10.0.0.1:8047", "peer url protocol must be tcp:"),
        ("tcp://user@10.0.0.1:8047", "peer url must have no auth"),
        ("tcp://10.0.0.1:8047/", "peer url must have no path"),
        ("tcp://10.0.0.1:8047/x", "peer url must have no path"),
        ("tcp://10.0.0.1:8047?a=b", "peer url must have no path"),
        ("tcp://10.0.0.1:8047#frag", "peer url must have no hash"),
        ("tcp://10.0.0.1", "peer url port must be in range 1-65535"),
        ("tcp://10.0.0.1:0", "peer url port must be in range 1-65535"),
        ("tcp://10.0.0.1:65536", "peer url port must be in range 1-65535"),
        ("tcp://10.0.0.1:80a", "peer url port must be in range 1-65535"),
        ("tcp://10.0.0.1:" + "9" * 5000, "peer url port must be in range 1-65535"),
        ("tcp://[::1]", "peer url port must be in range 1-65535"),
        ("tcp://0.0.0.0:8047", "peer url must not be a placeholder address"),
        ("tcp://[::]:8047", "peer url must not be a placeholder address"),
        ("tcp://[0:0::0]:8047", "peer url must not be a placeholder address"),
        ("tcp://localhost:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://example.com:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://10.0.0.256:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://010.0.0.1:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://::1:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://[10.0.0.1]:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://[fe80::1%eth0]:8047", "peer url must have a valid ip address in hostname"),
        ("tcp://:8047", "peer url must have a valid ip address in hostname"),
    ],
)
def test_invalid_urls_get_the_reference_message(url: object, message: str) -> None:
    with pytest.raises(PeerListError) as info:
        validate_peer_url(url)
    assert (info.value.name, info.value.message) == ("AssertionError", message)
    assert isinstance(info.value, ConfigError)


def test_parse_peers_reads_every_form_the_reference_reads() -> None:
    url = "tcp://10.0.0.9:8047"
    value = [
        ["A", A.url],
        url,
        {"id": "C", "url": C.url},
        {"url": "tcp://10.0.0.5:1"},  # id defaults to url
        ["tcp://10.0.0.6:1"],  # one-element tuple: url = id
        D,
    ]
    assert parse_peers(value) == (
        A,
        Peer(url, url),
        C,
        Peer("tcp://10.0.0.5:1", "tcp://10.0.0.5:1"),
        Peer("tcp://10.0.0.6:1", "tcp://10.0.0.6:1"),
        D,
    )
    assert parse_peers((A, B)) == (A, B)


@pytest.mark.parametrize(
    ("value", "name", "message"),
    [
        ({"A": A.url}, "TypeError", "peers must be an array"),
        ("tcp://10.0.0.1:8047", "TypeError", "peers must be an array"),
        ([], "AssertionError", "at least one peer must be defined in a cluster"),
        (
            [42],
            "AssertionError",
            "peer must be an url string or a tuple [id, url] or an object with 'url' and 'id' "
            "properties",
        ),
        (
            [None],
            "AssertionError",
            "peer must be an url string or a tuple [id, url] or an "
            "object with 'url' and 'id' properties",
        ),
        ([["", A.url]], "AssertionError", "peer id must be a non empty string"),
        ([[1, A.url]], "AssertionError", "peer id must be a non empty string"),
        ([[]], "AssertionError", "peer id must be a non empty string"),
        ([{}], "AssertionError", "peer id must be a non empty string"),
        ([["A", None]], "AssertionError", "peer url must be a non empty string"),
        ([["A", A.url], ["A", B.url]], "AssertionError", "peer id must be unique"),
        ([["A", A.url], ["B", A.url]], "AssertionError", "peer url must be unique"),
        (
            [["A", "tcp://localhost:1"]],
            "AssertionError",
            "peer url must have a valid ip address in hostname",
        ),
    ],
)
def test_parse_peers_errors(value: object, name: str, message: str) -> None:
    with pytest.raises(PeerListError) as info:
        parse_peers(value)
    assert (info.value.name, info.value.message) == (name, message)


def test_parse_peers_checks_consistency_with_an_old_list() -> None:
    assert parse_peers([A, B, D], old=(A, B, C)) == (A, B, D)
    for bad in ([Peer("A", D.url)], [Peer("X", A.url)]):
        with pytest.raises(PeerListError, match="consistent with current configuration"):
            parse_peers(bad, old=(A, B, C))


# --- check_config_update (§10.4) ----------------------------------------------------------

CURRENT = ConfigPayload(new=(A, B, C))


def test_config_update_accepts_a_real_change() -> None:
    assert check_config_update(
        CURRENT, [["A", A.url], ["B", B.url], ["C", C.url], ["D", D.url]]
    ) == (
        A,
        B,
        C,
        D,
    )
    assert check_config_update(CURRENT, (A, B)) == (A, B)  # removal
    assert check_config_update(CURRENT, (C, B, A)) == (C, B, A)  # reordering is a change


@pytest.mark.parametrize(
    ("new_peers", "expected"),
    [
        ("nope", ConfigUpdateErrorInfo("TypeError", "peers must be an array")),
        (None, ConfigUpdateErrorInfo("TypeError", "peers must be an array")),
        (
            [["D", "tcp://host:1"]],
            ConfigUpdateErrorInfo(
                "AssertionError", "peer url must have a valid ip address in hostname"
            ),
        ),
        (
            [A, B, Peer("C", "tcp://10.0.0.9:8047")],  # an id changes its URL
            ConfigUpdateErrorInfo(
                "AssertionError", "new peers must be consistent with current configuration"
            ),
        ),
        (
            [A, B, Peer("D", C.url)],  # an old URL under another id
            ConfigUpdateErrorInfo(
                "AssertionError", "new peers must be consistent with current configuration"
            ),
        ),
        ([A, B, C], ConfigUpdateErrorInfo("Error", "no change in cluster membership")),
        (
            [["A", A.url], ["B", B.url], ["C", C.url]],
            ConfigUpdateErrorInfo("Error", "no change in cluster membership"),
        ),
        (
            [],
            ConfigUpdateErrorInfo(
                "AssertionError", "at least one peer must be defined in a cluster"
            ),
        ),
    ],
)
def test_config_update_refusals_match_the_reference(
    new_peers: object, expected: ConfigUpdateErrorInfo
) -> None:
    assert check_config_update(CURRENT, new_peers) == expected


def test_config_update_against_a_joint_config_uses_its_old_half() -> None:
    joint = ConfigPayload(new=(A, B, D), old=(A, B, C))
    assert check_config_update(joint, (A, B, C, D)) == (A, B, C, D)
    assert check_config_update(joint, (A, B, C)) == ConfigUpdateErrorInfo(
        "Error", "no change in cluster membership"
    )


# --- CONFIG payloads (§4.2) ----------------------------------------------------------------


def test_payload_round_trip_and_key_order() -> None:
    joint = ConfigPayload(new=(A, B, D), old=(A, B, C))
    data = encode_config_payload(joint)
    assert data[:5] == b"\x82\xa3old"  # "old" first, like the reference
    assert decode_config_payload(data) == joint
    final = ConfigPayload(new=(A,))
    assert decode_config_payload(encode_config_payload(final)) == final


def test_payload_reader_is_lenient_like_the_reference() -> None:
    # Extra keys are ignored; {"url": u} and a bare string both mean id = url.
    old = [{"url": A.url}, {"id": "B", "url": B.url}]
    new = [A.url, ["B", B.url], D.url]
    data = msgpack.packb({"new": new, "old": old, "x": 1})
    a_by_url, d_by_url = Peer(A.url, A.url), Peer(D.url, D.url)
    assert decode_config_payload(data) == ConfigPayload(
        new=(a_by_url, B, d_by_url), old=(a_by_url, B)
    )


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc0",
        b"\x92",  # truncated
        msgpack.packb({"old": [["A", A.url]]}),
        msgpack.packb({"old": "x", "new": []}),
        msgpack.packb([]),
        msgpack.packb([["A", A.url], ["A", B.url]]),
        msgpack.packb({"old": [["A", A.url]], "new": [["A", B.url]]}),  # inconsistent
        b"\x91" * 5000 + b"\xc0",
    ],
)
def test_bad_payloads_raise_config_error(data: bytes) -> None:
    with pytest.raises(ConfigError):
        decode_config_payload(data)


def test_peers_from_json_is_structural_only() -> None:
    # No URL or uniqueness checks: those belong to check_config_update.
    assert peers_from_json([["A", "x"], ["A", "x"]]) == (Peer("A", "x"), Peer("A", "x"))
    for bad in ("x", [1], [["A", 2]], [[None]]):
        with pytest.raises(PeerListError):
            peers_from_json(bad)
