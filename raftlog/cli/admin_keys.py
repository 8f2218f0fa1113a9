"""``raftlog-admin keys``: make and show CURVE keys, and bootstrap a secure cluster's keys.

Why in the admin CLI: keys are the first thing an operator needs for a secure cluster and
the last thing they want to hand-craft. ``keys init`` reads a cluster file and creates
whatever key it names that does not exist yet (the server key, each peer's key, the client
key) plus an allowlist that makes that client key an admin — so a new secure cluster is one
command away, and running it again changes nothing. When the file's ``[http]`` table names
``tls_cert``/``tls_key``, it also makes a local CA and that certificate
(``raftlog.security.http_tls``), and a bearer token for REST and monitoring, then prints a
``curl`` line that works against the first peer's ``http_url``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from raftlog.cli.admin_io import say
from raftlog.config import load_cluster_file, split_http_url, validate_http_url
from raftlog.errors import ConfigError
from raftlog.security import keys
from raftlog.security.settings import keys_dir_of, path_option, security_table


def add_parsers(sub: Any) -> None:
    """Register ``keys generate|show|init`` on the admin CLI's subcommands."""
    parser = sub.add_parser(
        "keys",
        help="CURVE keys: generate, show, bootstrap a secure cluster's keys",
        description="CURVE key files in ZeroMQ's certificate format (NAME.key is public, "
        "NAME.key_secret holds the secret: keep it on the one host that uses it).",
        epilog="examples:\n"
        "  raftlog-admin keys init --config cluster-configs/local-3-secure.toml\n"
        "  raftlog-admin keys generate billing --dir keys\n"
        "  raftlog-admin keys show keys/billing.key\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ksub = parser.add_subparsers(dest="keys_action", required=True)
    gen = ksub.add_parser(
        "generate",
        help="write NAME.key and NAME.key_secret",
        epilog="examples:\n  raftlog-admin keys generate billing --dir keys/",
    )
    gen.add_argument("name", help="key name (letters, digits, _ . -)")
    gen.add_argument("--dir", default="keys", help="where to write (default ./keys)")
    gen.add_argument("--force", action="store_true", help="replace an existing key")
    show = ksub.add_parser(
        "show",
        help="print a key file's public key (for an allowlist)",
        epilog="examples:\n  raftlog-admin keys show keys/billing.key",
    )
    show.add_argument("file", help="a .key or .key_secret file")
    init = ksub.add_parser(
        "init",
        help="create every missing key a cluster file names, and an admin allowlist",
        epilog="examples:\n  raftlog-admin keys init --config cluster-configs/local-3-secure.toml",
    )
    init.add_argument("--config", "-c", dest="key_config", required=True,
                      help="the cluster file ([security] curve = true)")


def cmd_keys(args: argparse.Namespace) -> int:
    """Run one ``keys`` action; ConfigError propagates (exit 2 in the caller)."""
    if args.keys_action == "generate":
        secret = keys.generate(args.name, args.dir, overwrite=args.force)
        public = keys.load(secret).public.decode()
        say(args, f"{secret.with_suffix(keys.PUBLIC_SUFFIX)}\n{secret}\npublic key: {public}",
            public_file=str(secret.with_suffix(keys.PUBLIC_SUFFIX)), secret_file=str(secret),
            public_key=public)
        return 0
    if args.keys_action == "show":
        public = keys.load(args.file).public.decode()
        say(args, public, public_key=public)
        return 0
    lines = init_cluster_keys(Path(args.key_config))
    say(args, "\n".join(lines), done=lines)
    return 0


def init_cluster_keys(config: Path) -> list[str]:
    """Create the missing keys of ``config``; returns one line per thing created/kept."""
    doc = load_cluster_file(config)
    table = security_table(doc, str(config))  # validated as the peers will read it
    if table is None:
        raise ConfigError(f"{config}: no [security] table with curve = true")
    base = config.resolve().parent
    keys_dir = keys_dir_of(table, base, str(config)).resolve()
    names: list[str] = []
    for raw in [table.get("server_key"), table.get("client_key")] + [
        p.get("key") for p in doc.get("peers", []) if isinstance(p, dict)
    ]:
        if isinstance(raw, str) and raw and raw not in names:
            names.append(raw)
    out: list[str] = []
    for name in names:
        secret = keys_dir / (keys.check_name(name) + keys.SECRET_SUFFIX)
        if secret.exists():
            out.append(f"kept    {secret}")
        else:
            keys.generate(name, keys_dir)
            out.append(f"created {secret}")
    clients = path_option(table, "clients", base, str(config))
    client_key = table.get("client_key")
    if clients is not None and isinstance(client_key, str):
        path = clients.resolve()
        if path.exists():
            out.append(f"kept    {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                "# Who may talk to the cluster (raftlog-peer reloads this on SIGHUP).\n"
                "# role: reader < writer < admin; publish/read: topic names or 'prefix*'.\n"
                f'[[clients]]\nname = "{client_key}"\nkey = "{client_key}"\nrole = "admin"\n'
            )
            out.append(f"created {path} ({client_key} is admin)")
    if clients is not None:
        out += _http_files(doc, config, keys_dir, clients.resolve())
    return out


HTTP_TOKEN_NAME = "http-admin"
"""The allowlist name of the token ``keys init`` makes for REST and monitoring."""


def _http_files(doc: dict[str, Any], config: Path, keys_dir: Path, clients: Path) -> list[str]:
    """The HTTPS certificate of ``[http]`` (with a local CA) and a bearer token, if the
    file wants TLS on its HTTP listeners; the lines to print."""
    from raftlog.observability.http_settings import http_settings  # noqa: PLC0415
    from raftlog.security import http_tls  # noqa: PLC0415 -- cryptography only when needed

    base = config.resolve().parent
    http = http_settings(doc, str(config), base)
    urls = [
        validate_http_url(p["http_url"], f"{config}: peer http_url")
        for p in doc.get("peers", []) if isinstance(p, dict) and p.get("http_url")
    ]
    if http.tls_cert is None or http.tls_key is None or not urls:
        return []
    hosts = [split_http_url(url)[0] for url in urls]
    out = http_tls.ensure_server_cert(keys_dir, http.tls_cert.resolve(), http.tls_key.resolve(),
                                      hosts)
    token, lines = http_tls.ensure_token(keys_dir, clients, HTTP_TOKEN_NAME)
    out += lines
    ca = keys_dir / f"{http_tls.CA_NAME}.crt"
    out.append(f'try:    curl --cacert {ca} -H "Authorization: Bearer $(cat {token})" '
               f"{urls[0]}/metrics")
    return out
