"""A lazy file system for power-cut tests: FUSE in front of an in-memory tree that keeps what
was fsynced apart from what was only written (``model``), served by ``python -m faults.lazyfs``
and driven by ``mount.LazyMount``."""
