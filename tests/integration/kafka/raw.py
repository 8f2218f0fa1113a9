"""A bare Kafka protocol client for the tests that must send exactly one request (a retried
batch, a follower, a malformed frame): kio encodes and decodes, a socket carries."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

import crc32c
from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from raftlog.kafka.batches import HEADER, encode_batch
from raftlog.topics.records import LoggedRecord, Record, RecordId


class RawKafka:
    """One connection to a listener (``with RawKafka(host, port) as k: k.call(...)``)."""

    def __init__(self, host: str, port: int, *, source: str | None = None) -> None:
        self.sock = socket.create_connection(
            (host, port), timeout=20, source_address=None if source is None else (source, 0))
        self._next = 1

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the listener")
            out += chunk
        return out

    def call(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        """Send request ``name`` of (api_key, version) built from ``fields``; the decoded
        response payload."""
        req_mod = load_payload_module(api_key, version, EntityType.request)
        cls = getattr(req_mod, name)
        header_cls = cls.__header_schema__
        out = io.BytesIO()
        correlation = self._next
        self._next += 1
        entity_writer(header_cls)(out, header_cls(
            request_api_key=api_key, request_api_version=version,
            correlation_id=correlation, client_id="raw-test"))
        entity_writer(cls)(out, cls(**fields))
        self.send_frame(out.getvalue())
        frame = self.read_frame()
        resp_mod = load_payload_module(api_key, version, EntityType.response)
        resp_cls = getattr(resp_mod, name.replace("Request", "Response"))
        header, used = entity_reader(resp_cls.__header_schema__)(frame, 0)
        assert header.correlation_id == correlation
        return entity_reader(resp_cls)(frame, used)[0]

    def module(self, api_key: int, version: int) -> Any:
        return load_payload_module(api_key, version, EntityType.request)


def idempotent_batch(topic: str, values: list[bytes], producer_id: int, sequence: int) -> bytes:
    """A v2 batch as an idempotent producer sends it (producer id, epoch 0, base sequence)."""
    plain = encode_batch([LoggedRecord(RecordId(0, n), 1, Record(topic, v, None, {}, 1))
                          for n, v in enumerate(values)])
    fields = list(HEADER.unpack_from(plain))
    fields[9], fields[10], fields[11] = producer_id, 0, sequence
    body = HEADER.pack(*fields)[21:] + plain[HEADER.size:]
    fields[4] = crc32c.crc32c(body)
    return HEADER.pack(*fields) + plain[HEADER.size:]
