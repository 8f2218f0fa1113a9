"""Exit codes of ``raftlog-peer`` (also listed in README.md and docs/peer-service.md).

Kept in one module so the entry point, tests and docs name the same numbers.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
"""Clean shutdown: SIGTERM/SIGINT, or removed from the cluster (``exit_when_removed``)."""
EXIT_UNEXPECTED: Final = 1
"""Any unexpected error (a bug): a traceback is printed."""
EXIT_CONFIG: Final = 2
"""Bad configuration or command line, or the sockets cannot be bound; nothing touched."""
EXIT_STORAGE: Final = 3
"""Storage failure: full disk, I/O error, corruption. The store itself stays consistent."""
EXIT_OUT_OF_RANGE: Final = 4
"""The data directory holds a term or index above ``raftlog.bounds``' ceiling; repair it
offline with ``raftlog-tool reset-term`` (docs/peer-service.md)."""
