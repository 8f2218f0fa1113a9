"""Bad input never takes a peer down (docs/protocol.md §5.4, §15; RELIABILITY B3-B7, B9)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import msgpack
import pytest
import zmq

from integration.cluster import PEER_BIN, PeerCluster, free_ports, wait_for
from integration.peer.updates import new_request_id, update
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.frames import encode_msg_id
from raftlog.rpc.messages import AppendEntries, InstallSnapshot, RequestVote
from raftlog.rpc.request_encoders import encode_request

GOOD_RID = b"\x00" * 12


def _malformed(ident: bytes) -> list[list[bytes]]:
    """Messages a buggy or hostile sender might produce, each after a valid ident."""
    bomb = b"\x91" * 100_000 + b"\xc0"  # 100k nested one-element arrays
    short_entry = b"\x01" * 12 + b"\x00" + b"\x01" + b"\x00" * 5  # 19 bytes
    return [
        [],
        [b"\x01"],
        [b"\x01", b"?"],
        [b"\x01", b"?", ident],  # RequestVote without arguments
        [b"\x01", b"?", ident, b"1", b"", b"\x01", b"\x01"],  # empty uint
        [b"\x01", b"?", ident, b"1", b"\x01" * 9, b"\x01", b"\x01"],  # uint > 2^53
        [b"\x01", b"?", ident, b"\xff\xfe", b"\x05", b"\x01", b"\x01"],  # bad UTF-8 id
        [b"\x01\x02\x03\x04", b"+", ident, b"1", b"\x05", b"\x00", b"\x00", b"\x00"],  # msgid
        [b"\x01", b"+", ident, b"1", b"\x05", b"\x00", b"\x00", b"\x00", short_entry],
        [b"\x01", b"$", ident, b"1", b"\x05", b"\x01", b"\x01", b"\x00"],
        [GOOD_RID[:5], b"=", ident, b"data"],  # reqid not 12 bytes
        [GOOD_RID, b"&", ident, bomb],  # msgpack bomb
        [GOOD_RID, b"&", ident, b"\x93\x01"],  # truncated msgpack
        [GOOD_RID, b"&", ident, msgpack.packb({"old": 1})],
        [b"\x01", b"<", ident],
        [b"\x01", b"<", ident, b""],
        [b"\x01", b"<", ident, b"\x00", b"\x00\x00", b"\xff" * 9],
        [b"\x01", b"", ident],
        [b"\x01", b"\x00\x01", ident, b"custom"],  # unknown type: no answer
    ]


def _send_all(url: str, messages: list[list[bytes]]) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(url)
    for frames in messages:
        if frames:
            sock.send_multipart(frames)
    sock.close()


def _terms(cluster: PeerCluster) -> dict[str, int]:
    return {p: cluster.log_info(p).term for p in cluster.peers}


def test_malformed_messages_and_random_bytes_leave_peers_alive_and_unchanged(
    cluster: PeerCluster,
) -> None:
    last = update(cluster, b"before")
    ident = cluster.ident.encode()
    leader = cluster.wait_stable_leader()  # every follower knows the term (no lagging 0)
    terms = _terms(cluster)
    rng = random.Random(7)
    noise = [
        [rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 9))] for _ in range(1500)
    ]
    for frames in noise[::2]:  # half of them with the right header so they reach the codec
        frames[:3] = [b"\x01", rng.choice([b"?", b"+", b"$", b"=", b"&", b"<", b"^", b"%"]), ident]
    for peer in cluster.peers.values():
        _send_all(peer.url, _malformed(ident) + noise)
    assert all(p.running for p in cluster.peers.values())
    newer = update(cluster, b"after")  # still serves clients
    assert newer > last
    assert cluster.wait_leader() == leader
    assert _terms(cluster) == terms
    log_text = "".join(p.log_path.read_text() for p in cluster.peers.values())
    assert "malformed_message_dropped" in log_text


def test_wrong_ident_and_unknown_senders_with_huge_terms_change_nothing(
    cluster: PeerCluster,
) -> None:
    update(cluster, b"x")
    leader = cluster.wait_stable_leader()  # every follower knows the term (no lagging 0)
    terms = _terms(cluster)
    huge = terms[leader] + 1_000_000
    entry = LogEntry(b"\x01" * 12, EntryType.STATE, huge, b"evil")
    hostile = [
        RequestVote("intruder", huge, 10**6, huge),
        AppendEntries("intruder", huge, 0, 0, 10**6, (entry,)),
        InstallSnapshot("intruder", huge, 10**6, huge, 0, 10**12, b"x"),
    ]
    for peer in cluster.peers.values():
        msgs = [
            encode_request(m, ident=cluster.ident.encode(), id=encode_msg_id(1)) for m in hostile
        ]
        msgs += [
            encode_request(m, ident=b"wrong-cluster", id=encode_msg_id(2)) for m in hostile[:2]
        ]
        msgs += [
            encode_request(RequestVote(p, huge, 10**6, huge), ident=b"wrong", id=b"\x03")
            for p in cluster.peers
        ]
        _send_all(peer.url, msgs)
    update(cluster, b"y")
    assert cluster.wait_leader() == leader
    assert _terms(cluster) == terms


def test_oversized_update_is_ignored_and_the_peer_keeps_serving(tmp_path: Path) -> None:
    with PeerCluster(tmp_path, raft={"max_log_entry_data_size": 1024}) as cluster:
        cluster.start()
        leader = cluster.wait_leader()
        big = [new_request_id(), b"=", cluster.ident.encode(), b"x" * 4096]
        _send_all(cluster.peers[leader].url, [big])
        log = cluster.peers[leader].log_path
        wait_for("the drop to be logged", lambda: "oversized_update_ignored" in log.read_text())
        index = update(cluster, b"small")
        stored = [raw for _, raw in cluster.read_all(leader)]
        assert index == len(stored) and all(raw[:12] != big[0] for raw in stored)


BAD_CONFIGS = {
    "duplicate id": '[[peers]]\nid="1"\nurl="tcp://127.0.0.1:{a}"\npub_url="tcp://127.0.0.1:{b}"\n'
    '[[peers]]\nid="1"\nurl="tcp://127.0.0.1:{c}"\npub_url="tcp://127.0.0.1:{d}"\n',
    "malformed url": '[[peers]]\nid="1"\nurl="tcp://localhost:{a}"\npub_url="tcp://127.0.0.1:{b}"\n',
    "own id missing": '[[peers]]\nid="2"\nurl="tcp://127.0.0.1:{a}"\npub_url="tcp://127.0.0.1:{b}"\n',
    "bad option": '[raft]\nelection_timeout_min=5\n[[peers]]\nid="1"\nurl="tcp://127.0.0.1:{a}"\n'
    'pub_url="tcp://127.0.0.1:{b}"\n',
    "not toml": "[[peers\n",
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_stops_startup_with_one_error_line_and_touches_nothing(
    tmp_path: Path, case: str
) -> None:
    a, b, c, d = free_ports(4)
    data = tmp_path / "data"
    text = f'[cluster]\nident="t"\ndata_dir="{data}"\n' + BAD_CONFIGS[case].format(
        a=a, b=b, c=c, d=d
    )
    path = tmp_path / "bad.toml"
    path.write_text(text)
    done = subprocess.run(
        [str(PEER_BIN), "-c", str(path), "--id", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("raftlog-peer: error: "), done.stderr
    assert not data.exists()


def test_an_unwritable_data_dir_is_refused(tmp_path: Path) -> None:
    a, b = free_ports(2)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    path = tmp_path / "c.toml"
    path.write_text(
        f'[cluster]\nident="t"\ndata_dir="{blocker}"\n[[peers]]\nid="1"\n'
        f'url="tcp://127.0.0.1:{a}"\npub_url="tcp://127.0.0.1:{b}"\n'
    )
    done = subprocess.run(
        [str(PEER_BIN), "-c", str(path), "--id", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and "data dir" in done.stderr, done
