"""Namespaces as a documented mapping onto topic names (docs/rest.md, "Namespaces").

Why a mapping and not a new concept in the log: the topic state machine, its snapshots and
the ZeroMQ clients already agree on flat topic names, and the security allowlist already
grants topics by prefix (``publish = ["billing.*"]``). So topic ``T`` of namespace ``ns`` is
the log topic ``ns.T``, and a topic of the ``default`` namespace is the log topic ``T``
itself (which therefore may not contain a ``.``). Every log topic has exactly one REST
name: the part before its first ``.`` is its namespace; names without a ``.`` are in
``default``. A log topic whose prefix names a namespace that is not configured (or is
``default`` itself) is not visible through REST, only through the ZeroMQ clients.
"""

from __future__ import annotations

from raftlog.rest.settings import DEFAULT_NAMESPACE, RestSettings
from raftlog.topics.records import check_topic_name
from raftlog.web.errors import RestError


class Namespaces:
    """The configured namespaces and the mapping between REST and log topic names."""

    def __init__(self, settings: RestSettings) -> None:
        self._known = frozenset(settings.namespaces)

    def check(self, namespace: str) -> None:
        """404 ``NamespaceNotFound`` unless ``namespace`` is configured."""
        if namespace not in self._known:
            raise RestError(
                404,
                "NamespaceNotFound",
                f"namespace {namespace!r} does not exist (configured: "
                f"{', '.join(sorted(self._known))}; see [rest] namespaces)",
            )

    def log_topic(self, namespace: str, topic: str) -> str:
        """The log topic of REST topic ``namespace/topic`` (400 if it cannot be one)."""
        self.check(namespace)
        if namespace == DEFAULT_NAMESPACE and "." in topic:
            raise RestError(
                400,
                "InvalidTopicName",
                f"topic {topic[:80]!r}: topics of the default namespace cannot contain '.' "
                "(the part before a '.' is a namespace)",
            )
        name = topic if namespace == DEFAULT_NAMESPACE else f"{namespace}.{topic}"
        check_topic_name(name)  # RecordFormatError -> 400 InvalidTopicName
        return name

    def rest_name(self, log_topic: str) -> tuple[str, str] | None:
        """(namespace, topic) of a log topic, or None if REST does not show it."""
        namespace, dot, rest = log_topic.partition(".")
        if not dot:
            return DEFAULT_NAMESPACE, log_topic
        if namespace == DEFAULT_NAMESPACE or namespace not in self._known or not rest:
            return None
        return namespace, rest

    def topics_of(self, namespace: str, log_topics: tuple[str, ...]) -> list[str]:
        """The REST names of ``namespace``'s topics among ``log_topics``, sorted."""
        out = []
        for name in log_topics:
            mapped = self.rest_name(name)
            if mapped is not None and mapped[0] == namespace:
                out.append(mapped[1])
        return sorted(out)
