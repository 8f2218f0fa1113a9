"""A local certificate authority for the peers' HTTPS listeners, and a REST/monitoring token.

Why here: ``raftlog-admin keys init`` already makes every CURVE key a cluster file names, so
that ``make run-secure`` starts from nothing. A cluster file whose ``[http]`` table names a
``tls_cert`` and ``tls_key`` gets them the same way: a CA (``http-ca.crt``/``http-ca.key`` in
the keys directory; clients trust ``http-ca.crt``) and one certificate for the hosts of the
file's ``https://`` URLs, signed by it. Production clusters bring certificates of their own
CA; this is for a laptop. The ``cryptography`` package does the X.509 work.

The token: ``/metrics``, the status page and the REST API of a secure cluster want a bearer
token of the allowlist. ``ensure_token`` writes one to ``<keys_dir>/<name>.token`` (0600)
and lists its SHA-256 as an admin client of the allowlist, once.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from raftlog.security.policy import token_digest

CA_NAME: Final = "http-ca"
VALID_DAYS: Final = 825
"""What browsers accept for a leaf certificate (and long enough for a development CA)."""


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def ensure_ca(keys_dir: Path) -> tuple[Path, list[str]]:
    """The CA certificate (created with its key if missing); what was done, one line each."""
    cert_path = keys_dir / f"{CA_NAME}.crt"
    key_path = keys_dir / f"{CA_NAME}.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, [f"kept    {cert_path}"]
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("raftlog local HTTP CA"))
        .issuer_name(_name("raftlog local HTTP CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _pem_key(key))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, [f"created {cert_path} (clients trust this CA)"]


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys([*hosts, "localhost", "127.0.0.1"]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def ensure_server_cert(keys_dir: Path, cert_path: Path, key_path: Path,
                       hosts: Iterable[str]) -> list[str]:
    """A server certificate for ``hosts`` signed by the local CA, unless both files exist."""
    if cert_path.exists() and key_path.exists():
        return [f"kept    {cert_path}"]
    ca_cert_path, out = ensure_ca(keys_dir)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    ca_key = serialization.load_pem_private_key((keys_dir / f"{CA_NAME}.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    host_list = list(hosts)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host_list[0] if host_list else "localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(_san(host_list), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(key_path, _pem_key(key))
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return [*out, f"created {cert_path} (HTTPS for {', '.join(host_list) or 'localhost'})"]


def ensure_token(keys_dir: Path, clients_file: Path, name: str) -> tuple[Path, list[str]]:
    """A bearer token in ``<keys_dir>/<name>.token``, listed in ``clients_file`` as an admin
    client ``name`` (REST-only: a token and no key); kept if the file exists."""
    path = keys_dir / f"{name}.token"
    if path.exists():
        return path, [f"kept    {path}"]
    token = secrets.token_urlsafe(32)
    with clients_file.open("a") as f:
        f.write(f'\n[[clients]]  # REST and monitoring (token in {path.name})\n'
                f'name = "{name}"\nrole = "admin"\ntoken_sha256 = "{token_digest(token)}"\n')
    _write_private(path, (token + "\n").encode())
    return path, [f"created {path} (listed as admin {name!r} in {clients_file.name})"]
