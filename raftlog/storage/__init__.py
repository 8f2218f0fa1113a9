"""Durable and in-memory storage behind small interfaces (see ``raftlog.storage.base``)."""
