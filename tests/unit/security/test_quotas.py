"""Quotas per principal (issue #25): token buckets, caps, configuration, the ZeroMQ gate."""

from __future__ import annotations

import re
import timeit
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from raftlog.config import load_peer_config
from raftlog.errors import ConfigError
from raftlog.metrics import PeerMetrics
from raftlog.rpc.denied import QuotaRefusal, quota_refusal_of
from raftlog.rpc.messages import TYPE_REQUEST_ENTRIES, TYPE_REQUEST_LOG_INFO, TYPE_REQUEST_UPDATE
from raftlog.security import keys
from raftlog.security.policy import AccessPolicy, PolicyHolder, Principal, Role, load_clients
from raftlog.security.quotas import PublishBucket, Quota, QuotaBook
from raftlog.server.quota_gate import (
    DROP,
    QuotaGate,
    gate_for,
    member_addresses,
    record_count,
)
from raftlog.topics.records import Record, encode_records
from raftlog.topics.records_tx import encode_tx_store
from raftlog.topics.wire import TYPE_PUBLISH, TYPE_READ, ReadRequest, encode_read_request


def test_bucket_admits_a_burst_then_refuses_with_the_exact_wait() -> None:
    bucket = PublishBucket(Quota(records_per_s=10), now=0.0)
    assert [bucket.take(1, 0, 0.0) for _ in range(10)] == [0.0] * 10  # burst: 1 s worth
    assert bucket.take(1, 0, 0.0) == pytest.approx(0.1)
    assert bucket.take(1, 0, 0.05) == pytest.approx(0.05)  # nothing was taken by a refusal
    assert bucket.take(1, 0, 0.1) == 0.0
    assert bucket.take(3, 0, 0.3) == pytest.approx(0.1)  # 2 refilled, 3 needed


def test_bucket_limits_bytes_and_records_together() -> None:
    bucket = PublishBucket(Quota(records_per_s=1000, bytes_per_s=100, bytes_burst=200), 0.0)
    assert bucket.take(1, 150, 0.0) == 0.0
    assert bucket.take(1, 100, 0.0) == pytest.approx(0.5)  # 50 left, 100 needed at 100/s


def test_a_request_larger_than_the_burst_passes_when_full_and_leaves_debt() -> None:
    bucket = PublishBucket(Quota(records_per_s=5), 0.0)
    assert bucket.take(20, 0, 0.0) == 0.0  # never refused for ever
    assert bucket.take(1, 0, 0.0) == pytest.approx((1 + 15) / 5)
    assert bucket.take(1, 0, 3.2) == 0.0


def test_book_counts_refusals_by_principal_and_bounds_address_labels() -> None:
    metrics = PeerMetrics()
    book = QuotaBook(metrics.quota_refusals, per_address=True)
    quota = Quota(records_per_s=1)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert book.publish_wait(address, quota, 1, 1, 0.0) == 0.0
        assert book.publish_wait(address, quota, 1, 1, 0.0) > 0
    assert metrics.quota_refusals.labels(principal="address", kind="publish_rate").value == 3


def test_book_forgets_idle_buckets_past_its_bound() -> None:
    book = QuotaBook(max_tracked=4)
    quota = Quota(records_per_s=1)
    for n in range(100):
        book.publish_wait(f"10.0.0.{n}", quota, 1, 1, float(n))
    assert len(book._buckets) <= 4


def test_reloaded_equal_quota_keeps_the_bucket_a_changed_one_starts_afresh() -> None:
    book = QuotaBook()
    assert book.publish_wait("a", Quota(records_per_s=1), 1, 0, 0.0) == 0.0
    assert book.publish_wait("a", Quota(records_per_s=1), 1, 0, 0.0) > 0  # equal: same bucket
    assert book.publish_wait("a", Quota(records_per_s=100), 1, 0, 0.0) == 0.0


def test_caps_admit_up_to_the_cap_and_forget_ended_keys() -> None:
    book = QuotaBook()
    open_keys: set[Hashable] = set()

    def live(key: Hashable) -> bool:
        return key in open_keys

    for key in ("s1", "s2"):
        open_keys.add(key)
        assert book.admit("c", "streams", key, 2, live)
    assert book.admit("c", "streams", "s1", 2, live)  # a resent request: same slot
    assert not book.admit("c", "streams", "s3", 2, live)
    open_keys.discard("s1")  # ended without telling the book
    assert book.admit("c", "streams", "s3", 2, live)
    book.release("c", "streams", "s3")
    assert book.holding("c", "streams") == 1


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({"records_per_s": 0}, "records_per_s must be a positive number"),
        ({"bytes_per_s": "fast"}, "bytes_per_s must be a positive number"),
        ({"records_per_s": float("inf")}, "records_per_s must be a positive number"),
        ({"streams": 1.5}, "streams must be a positive integer"),
        ({"waiting_reads": True}, "waiting_reads must be a positive integer"),
        ({"records_burst": 5}, "records_burst needs records_per_s"),
        ({"connection": 5}, "unknown quota field(s) ['connection']"),
        ({"connections": 0}, "connections must be a positive integer"),
        ([1], "must be a table"),
    ],
)
def test_bad_quota_tables_fail_with_one_line(table: object, error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        Quota.parse(table, "test")


def test_allowlist_role_defaults_and_client_overrides(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        keys.generate(name, tmp_path)
    (tmp_path / "clients.toml").write_text(
        "[quotas.writer]\nrecords_per_s = 100\nstreams = 2\n"
        "[quotas.reader]\nwaiting_reads = 3\n"
        '[[clients]]\nname = "a"\nrole = "writer"\n'
        '[[clients]]\nname = "b"\nrole = "writer"\nquota = { records_per_s = 5, '
        "bytes_per_s = 1000 }\n"
        '[[clients]]\nname = "c"\nrole = "admin"\n'
    )
    by_name = {p.name: p for p in load_clients(tmp_path / "clients.toml", tmp_path).clients}
    assert by_name["a"].quota == Quota(records_per_s=100, streams=2)
    assert by_name["b"].quota == Quota(records_per_s=5, bytes_per_s=1000, streams=2)
    assert by_name["c"].quota is None  # no default for admin: unlimited


def test_a_client_burst_may_go_with_its_roles_rate(tmp_path: Path) -> None:
    keys.generate("a", tmp_path)
    (tmp_path / "clients.toml").write_text(
        "[quotas.writer]\nrecords_per_s = 10\n"
        '[[clients]]\nname = "a"\nrole = "writer"\nquota = { records_burst = 100 }\n'
    )
    (client,) = load_clients(tmp_path / "clients.toml", tmp_path).clients
    assert client.quota == Quota(records_per_s=10, records_burst=100)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[quotas.owner]\nstreams = 1\n", r"quotas for unknown role\(s\) \['owner'\]"),
        ("[quotas.writer]\nstreams = -1\n", r"\[quotas.writer\]: streams must be a positive"),
        ('[[clients]]\nname = "x"\nrole = "writer"\nquota = { records_per_s = -5 }\n',
         r"client 1 \(x\) quota: records_per_s must be a positive number"),
        ('[[clients]]\nname = "x"\nrole = "writer"\nquota = { bytes_burst = 5 }\n',
         r"client 1 \(x\) quota: bytes_burst needs bytes_per_s"),
    ],
)
def test_bad_allowlist_quotas_fail_with_one_line(tmp_path: Path, text: str, error: str) -> None:
    keys.generate("x", tmp_path)
    (tmp_path / "clients.toml").write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_clients(tmp_path / "clients.toml", tmp_path)


PLAIN = """
[cluster]
ident = "q"
[[peers]]
id = "1"
url = "tcp://127.0.0.1:1"
pub_url = "tcp://127.0.0.1:2"
"""


def test_cluster_file_quotas_are_per_address_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(PLAIN + "[quotas]\nrecords_per_s = 50\nwaiting_reads = 4\n")
    assert load_peer_config(path, "1").quotas == Quota(records_per_s=50, waiting_reads=4)
    path.write_text(PLAIN)
    assert load_peer_config(path, "1").quotas is None
    path.write_text(PLAIN + "[quotas]\nrecords_per_s = 0\n")
    with pytest.raises(ConfigError, match=r"\[quotas\]: records_per_s must be a positive"):
        load_peer_config(path, "1")


def test_record_count_reads_batches_and_transaction_stores() -> None:
    records = [Record("t", b"v")] * 20
    assert record_count(encode_records(records[:3])) == 3
    assert record_count(encode_records(records)) == 20  # array16 header
    assert record_count(encode_tx_store("tx1", records[:7])) == 7
    assert record_count(b"plain update") == 1


class _Log:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, **fields})


KEY_A, KEY_B = b"A" * 40, b"B" * 40


def _secure_gate(clock: list[float], rate: float = 2) -> QuotaGate:
    limited = Principal("limited", role=Role.WRITER,
                        quota=Quota(records_per_s=rate, streams=1, waiting_reads=1))
    free = Principal("free", role=Role.WRITER)
    holder = PolicyHolder(AccessPolicy.build({}, [limited, free], [KEY_A, KEY_B]))
    gate = gate_for(None, holder, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log())
    assert gate is not None
    gate._clock = lambda: clock[0]
    return gate


def _publish(n: int = 1) -> list[bytes]:
    return [b"r", b"id", TYPE_PUBLISH, b"ident", encode_records([Record("t", b"v")] * n)]


def test_gate_refuses_the_limited_key_and_never_the_other() -> None:
    clock = [0.0]
    gate = _secure_gate(clock)
    assert gate.check(_publish(2), KEY_A.decode()) is None
    refusal = gate.check(_publish(), KEY_A.decode())
    assert refusal == QuotaRefusal(500, "publish_rate", refusal.reason if refusal else "")
    assert "limited is over its publish quota (2 records/s)" in (refusal.reason if refusal else "")
    assert all(gate.check(_publish(), KEY_B.decode()) is None for _ in range(1000))
    assert gate.check([b"r", b"id", TYPE_REQUEST_LOG_INFO, b"ident", b""], KEY_A.decode()) is None
    clock[0] = 0.5
    assert gate.check(_publish(), KEY_A.decode()) is None


def test_gate_caps_streams_and_waiting_reads() -> None:
    gate = _secure_gate([0.0])
    stream = [b"r", b"s1", TYPE_REQUEST_ENTRIES, b"ident", b"\x00", b"\x00"]
    assert gate.check(stream, KEY_A.decode()) is None
    refusal = gate.check([*stream[:1], b"s2", *stream[2:]], KEY_A.decode())
    assert refusal is not None and refusal.kind == "streams"
    wait = encode_read_request(ReadRequest("t", wait_ms=1000))
    nowait = encode_read_request(ReadRequest("t"))
    assert gate.check([b"r", b"w1", TYPE_READ, b"ident", *wait], KEY_A.decode()) is None
    assert gate.check([b"r", b"w2", TYPE_READ, b"ident", *nowait], KEY_A.decode()) is None
    refusal = gate.check([b"r", b"w3", TYPE_READ, b"ident", *wait], KEY_A.decode())
    assert refusal is not None and refusal.kind == "waiting_reads"


def test_plaintext_gate_is_per_address_and_drops_what_a_reference_client_cannot_read() -> None:
    gate = gate_for(Quota(records_per_s=1), None, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log())
    assert gate is not None
    update = [b"r", b"id", TYPE_REQUEST_UPDATE, b"ident", b"data"]
    assert gate.check(update, "10.0.0.1") is None
    assert gate.check(update, "10.0.0.1") is DROP  # "=": no answer a reference client reads
    assert gate.check(update, "10.0.0.2") is None  # another address, another bucket
    refusal = gate.check(_publish(), "10.0.0.1")  # TP: raftlog's own, typed answer
    assert refusal is not None and refusal is not DROP and refusal.kind == "publish_rate"


def test_no_gate_without_a_quota() -> None:
    holder = PolicyHolder(AccessPolicy.build({}, [Principal("x", role=Role.WRITER)], [KEY_A]))
    assert gate_for(None, holder, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log()) is None
    assert gate_for(None, None, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log()) is None


def test_quota_refusal_decodes_and_a_bad_retry_after_reads_as_one_second() -> None:
    assert quota_refusal_of([b"id", b"!QUOTA-EXCEEDED", b"250", b"streams", b"why"]) == (
        QuotaRefusal(250, "streams", "why")
    )
    assert quota_refusal_of([b"id", b"!QUOTA-EXCEEDED", b"soon"]) == QuotaRefusal(
        1000, "quota", "quota exceeded"
    )
    assert quota_refusal_of([b"id", b"\xc3"]) is None


def test_a_limited_publish_check_costs_a_few_microseconds() -> None:
    """Not a timing assertion (those belong in benchmarks): prints the figure the docs
    quote, and checks the check stays in the microseconds, not the milliseconds."""
    gate = _secure_gate([0.0], rate=1e12)
    frames, user = _publish(), KEY_A.decode()
    n = 20_000
    per_call = timeit.timeit(lambda: gate.check(frames, user), number=n) / n
    print(f"quota check of a limited publish: {per_call * 1e6:.2f} us")
    assert per_call < 1e-3


class _Backlog:
    """What the connections cap asks of ``ConnectionBacklog``: identities and shedding."""

    def __init__(self) -> None:
        self.inodes: dict[int, int] = {}
        self.unreported: dict[int, int] = {}
        """Connections accepted whose accept event the monitor thread has not handled."""
        self.shed_fds: list[int] = []

    def identity(self, fd: int) -> int | None:
        return self.inodes.get(fd)

    def track(self, fd: int) -> int | None:
        if fd in self.unreported:
            self.inodes[fd] = self.unreported.pop(fd)
        return self.inodes.get(fd)

    def shed(self, fd: int, reason: str) -> bool:
        self.shed_fds.append(fd)
        self.inodes.pop(fd, None)
        return True


def test_connections_cap_sheds_the_connection_past_it_and_counts_ended_ones_out() -> None:
    backlog = _Backlog()
    limited = Principal("limited", role=Role.WRITER, quota=Quota(connections=2))
    holder = PolicyHolder(AccessPolicy.build({}, [limited], [KEY_A]))
    gate = gate_for(None, holder, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log(),
                    connections=backlog)  # type: ignore[arg-type]
    assert gate is not None
    info = [b"r", b"id", TYPE_REQUEST_LOG_INFO, b"ident"]
    backlog.inodes.update({10: 100, 11: 101, 12: 102})
    for fd in (10, 11, 10, 11):  # two connections, each asking again: fine
        assert gate.check(info, KEY_A.decode(), fd) is None
    refusal = gate.check(info, KEY_A.decode(), 12)
    assert refusal is not None and refusal.kind == "connections" and backlog.shed_fds == [12]
    backlog.inodes[10] = 999  # fd 10 closed, its number reused by another connection
    backlog.inodes[12] = 103
    assert gate.check(info, KEY_A.decode(), 12) is None  # the ended one no longer counts
    backlog.unreported[13] = 104  # its first request before the monitor thread saw it
    refusal = gate.check(info, KEY_A.decode(), 13)
    assert refusal is not None and refusal.kind == "connections" and backlog.shed_fds[-1] == 13


def test_plaintext_members_addresses_are_never_limited() -> None:
    exempt = member_addresses(["tcp://10.0.0.5:8047", "tcp://[::1]:8047"])
    assert exempt == {"10.0.0.5", "::1"}
    gate = gate_for(Quota(records_per_s=1), None, QuotaBook(), stream_open=lambda _k: True,
                    read_waiting=lambda _k: True, log=_Log(), exempt=exempt)
    assert gate is not None
    update = [b"r", b"id", TYPE_REQUEST_UPDATE, b"ident", b"data"]
    assert all(gate.check(update, "10.0.0.5") is None for _ in range(10))  # a REST gateway
    assert gate.check(update, "10.0.0.6") is None
    assert gate.check(update, "10.0.0.6") is DROP
