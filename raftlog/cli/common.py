"""What every raftlog command line shares: ``--version``.

Why a helper: the four CLIs (``raftlog-admin``, ``raftlog-peer``, ``raftlog-tool``,
``raftlog-local-cluster``) should answer ``--version`` the same way, from the installed
package metadata (what pip installed), falling back to ``raftlog.__version__`` when run
from a source tree that was not installed.
"""

from __future__ import annotations

import argparse
from importlib import metadata

import raftlog


def package_version() -> str:
    """The installed raftlog version."""
    try:
        return metadata.version("raftlog")
    except metadata.PackageNotFoundError:
        return raftlog.__version__


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--version`` (prints ``PROG VERSION`` and exits 0) to ``parser``."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
