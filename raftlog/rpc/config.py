"""Peer lists, peer URLs and CONFIG entry payloads (docs/protocol.md §1, §4.2, §10.4).

This module is the single owner of the reference's peer-list rules, so that a configuration
file, a CONFIG entry read from the log or received in an AppendEntries, and a ConfigUpdate
request are all judged the same way -- and ConfigUpdate refusals carry the reference's exact
error names and messages (its ``parsePeers``/``validatePeerUrlFormat``/``join`` checks).

Error policy: everything here raises :class:`~raftlog.errors.ConfigError` (a ``ValueError``),
including an undecodable CONFIG payload. CONFIG data reaches us from disk as well as from the
wire, so a network error type would be misleading; a caller at the network edge wraps it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Final

from raftlog.errors import ConfigError
from raftlog.rpc.frames import JsonDecodeError, pack_json, unpack_json
from raftlog.rpc.messages import ConfigPayload, ConfigUpdateErrorInfo, Peer

_TCP_SCHEME: Final = "tcp://"
_MISSING: Final = object()

MSG_NOT_ARRAY: Final = "peers must be an array"
MSG_BAD_PEER: Final = (
    "peer must be an url string or a tuple [id, url] or an object with 'url' and 'id' properties"
)
MSG_BAD_ID: Final = "peer id must be a non empty string"
MSG_DUPLICATE_ID: Final = "peer id must be unique"
MSG_DUPLICATE_URL: Final = "peer url must be unique"
MSG_INCONSISTENT: Final = "new peers must be consistent with current configuration"
MSG_NO_PEERS: Final = "at least one peer must be defined in a cluster"
MSG_NO_CHANGE: Final = "no change in cluster membership"
MSG_BAD_PAYLOAD: Final = "ClusterConfiguration: argument parsing error"


class PeerListError(ConfigError):
    """A peer list or URL broke one of the reference's rules.

    ``name`` is the JavaScript error class the reference would report (``TypeError``,
    ``AssertionError`` or ``Error``) and ``message`` its exact text, so that a ConfigUpdate
    refusal (status 2) is byte-identical to the reference's.
    """

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message
        super().__init__(message)


def _assert(condition: bool, message: str) -> None:
    if not condition:
        raise PeerListError("AssertionError", message)


# --- peer URLs (§1) ------------------------------------------------------------------------


def _split_host_port(authority: str) -> tuple[str, str, bool]:
    """``host, port, bracketed`` of ``host:port`` / ``[v6]:port`` (port "" when absent)."""
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return authority, "", True
        rest = authority[close + 1 :]
        port = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
        return authority[1:close], port, True
    host, colon, port = authority.rpartition(":")
    if not colon:
        return authority, "", False
    return host, port, False


def _parse_ip(host: str, bracketed: bool) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        if bracketed:
            return None if "%" in host else ipaddress.IPv6Address(host)
        return ipaddress.IPv4Address(host)
    except ValueError:
        return None


def validate_peer_url(url: object) -> str:
    """Check a peer URL against the reference's rule and return it unchanged.

    Accepted: ``tcp://<IPv4 literal>:<port>`` or ``tcp://[<IPv6 literal>]:<port>`` with port
    1-65535; not the unspecified address. Refused (with the reference's assertion messages,
    tested in the reference's order): anything else, e.g. host names, user info, a path, a
    query, a fragment, a trailing slash. Raises :class:`PeerListError`.

    Slightly stricter than the reference on purpose (all are URLs ZeroMQ could not use or that
    only work by accident): the scheme must be lowercase, IPv4 must not be bracketed, IPv6
    scope ids (``%eth0``) and any unspecified IPv6 spelling (not only ``::``) are refused.
    """
    if not isinstance(url, str) or not url:
        raise PeerListError("AssertionError", "peer url must be a non empty string")
    _assert(url.startswith(_TCP_SCHEME), "peer url protocol must be tcp:")
    rest = url[len(_TCP_SCHEME) :]
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if 0 <= found < end:
            end = found
    authority, tail = rest[:end], rest[end:]
    _assert("@" not in authority, "peer url must have no auth")
    _assert(not tail or tail.startswith("#"), "peer url must have no path")
    _assert(not tail, "peer url must have no hash")
    host, port, bracketed = _split_host_port(authority)
    digits = port.lstrip("0")
    _assert(
        port.isascii() and port.isdigit() and 0 < len(digits) <= 5 and int(digits) <= 0xFFFF,
        "peer url port must be in range 1-65535",
    )
    address = _parse_ip(host, bracketed)
    _assert(
        host not in ("0.0.0.0", "::") and not (address is not None and address.is_unspecified),
        "peer url must not be a placeholder address",
    )
    _assert(address is not None, "peer url must have a valid ip address in hostname")
    return url


# --- peer lists (§4.2) ---------------------------------------------------------------------


def _peer_fields(item: object) -> tuple[object, object]:
    """``(id, url)`` of one list item in any of the forms the reference reads."""
    if isinstance(item, Peer):
        return item.id, item.url
    if isinstance(item, str):
        return item, item
    if isinstance(item, list | tuple):
        peer_id = item[0] if item else None
        return peer_id, (item[1] if len(item) > 1 else peer_id)
    if isinstance(item, dict):
        peer_id = item.get("id", _MISSING)
        url = item.get("url", _MISSING)
        if peer_id is _MISSING:
            peer_id = url
        if url is _MISSING:
            url = peer_id
        return (None if peer_id is _MISSING else peer_id), (None if url is _MISSING else url)
    raise PeerListError("AssertionError", MSG_BAD_PEER)


def _parse_peer_list(value: object, old: Sequence[Peer] | None) -> tuple[Peer, ...]:
    """The reference's ``parsePeers(peers, oldPeers)``, same checks in the same order."""
    if not isinstance(value, list | tuple):
        raise PeerListError("TypeError", MSG_NOT_ARRAY)
    old_urls = {p.id: p.url for p in old} if old is not None else None
    old_url_set = set(old_urls.values()) if old_urls is not None else set()
    peers: list[Peer] = []
    ids: set[str] = set()
    urls: set[str] = set()
    for item in value:
        peer_id, url = _peer_fields(item)
        if not isinstance(peer_id, str) or not peer_id:
            raise PeerListError("AssertionError", MSG_BAD_ID)
        _assert(peer_id not in ids, MSG_DUPLICATE_ID)
        checked_url = validate_peer_url(url)
        _assert(checked_url not in urls, MSG_DUPLICATE_URL)
        if old_urls is not None:
            _assert(
                (peer_id not in old_urls and checked_url not in old_url_set)
                or old_urls.get(peer_id) == checked_url,
                MSG_INCONSISTENT,
            )
        ids.add(peer_id)
        urls.add(checked_url)
        peers.append(Peer(peer_id, checked_url))
    _assert(bool(peers), MSG_NO_PEERS)
    return tuple(peers)


def parse_peers(value: object, old: Sequence[Peer] | None = None) -> tuple[Peer, ...]:
    """Validate a peer list given as ``[id, url]`` pairs, bare URL strings (id = url),
    ``{"id", "url"}`` maps (either key optional) or :class:`Peer` objects.

    Checks: an array; non-empty; ids non-empty strings and unique; URLs valid (§1) and unique;
    with ``old``, consistency: an id of ``old`` keeps its URL and an old URL does not reappear
    under another id. Raises :class:`PeerListError` (a ``ConfigError``).
    """
    return _parse_peer_list(value, old)


def check_config_update(
    current: ConfigPayload, new_peers: object
) -> tuple[Peer, ...] | ConfigUpdateErrorInfo:
    """Validate a ConfigUpdate's new peer list against the current configuration.

    Returns the parsed peers, or the ``{name, message}`` the reference answers with status 2:
    ``TypeError: peers must be an array``, an ``AssertionError`` from the list/URL checks
    (including "new peers must be consistent with current configuration"), or
    ``Error: no change in cluster membership`` when the ids are the same in the same order
    (a mere reordering is a change). Consistency is judged against the reference's "old
    cluster": ``current.old`` for a joint configuration (whose caller answers "busy" anyway
    when validation passes), otherwise ``current.new``.
    """
    base = current.old if current.old is not None else current.new
    try:
        peers = _parse_peer_list(new_peers, base)
    except PeerListError as exc:
        return ConfigUpdateErrorInfo(exc.name, exc.message)
    if [p.id for p in peers] == [p.id for p in base]:
        return ConfigUpdateErrorInfo("Error", MSG_NO_CHANGE)
    return peers


# --- CONFIG entry payloads (§4.2) ----------------------------------------------------------


def encode_config_payload(payload: ConfigPayload) -> bytes:
    """Joint = map with ``"old"`` first then ``"new"``; final = array of ``[id, url]``."""
    if payload.old is None:
        return pack_json(peers_to_json(payload.new))
    return pack_json({"old": peers_to_json(payload.old), "new": peers_to_json(payload.new)})


def decode_config_payload(data: bytes) -> ConfigPayload:
    """Parse and validate CONFIG entry data; raises :class:`~raftlog.errors.ConfigError`.

    Like the reference, a map is read as joint when it has array values under ``"old"`` and
    ``"new"`` (other keys are ignored), and ``new`` must be consistent with ``old``.
    """
    try:
        value = unpack_json(bytes(data))
    except JsonDecodeError as exc:
        raise ConfigError(f"CONFIG payload is not MessagePack: {exc}") from None
    if isinstance(value, list):
        return ConfigPayload(new=_parse_peer_list(value, None))
    if isinstance(value, dict):
        old_value, new_value = value.get("old"), value.get("new")
        if isinstance(old_value, list) and isinstance(new_value, list):
            old = _parse_peer_list(old_value, None)
            return ConfigPayload(new=_parse_peer_list(new_value, old), old=old)
    raise PeerListError("TypeError", MSG_BAD_PAYLOAD)


# --- peer lists inside json frames (ConfigUpdate request, RequestConfig response) -----------


def peers_to_json(peers: Sequence[Peer]) -> list[list[str]]:
    """The wire form of a peer list: an array of ``[id, url]`` tuples (what the reference
    always writes)."""
    return [[p.id, p.url] for p in peers]


def peers_from_json(value: object) -> tuple[Peer, ...]:
    """Read a peer list *structurally*, in every form the reference reads (tuples, bare URL
    strings, ``{id, url}`` maps), without the semantic checks of :func:`parse_peers`.

    Used by the codec: a ConfigUpdate's list is judged later by :func:`check_config_update`
    (which must answer status 2 with the reference's message, not drop the request), and a
    RequestConfig answer is the responder's business. Raises :class:`PeerListError` when the
    value cannot be expressed as ``Peer`` objects at all (not an array, an item of the wrong
    kind, a non-string id or URL).
    """
    if not isinstance(value, list | tuple):
        raise PeerListError("TypeError", MSG_NOT_ARRAY)
    peers: list[Peer] = []
    for item in value:
        peer_id, url = _peer_fields(item)
        if not isinstance(peer_id, str):
            raise PeerListError("AssertionError", MSG_BAD_ID)
        if not isinstance(url, str):
            raise PeerListError("AssertionError", "peer url must be a non empty string")
        peers.append(Peer(peer_id, url))
    return tuple(peers)
