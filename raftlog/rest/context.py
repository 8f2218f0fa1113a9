"""What every REST handler needs, in one object built once per peer."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from raftlog.rest.answer_memory import AnswerMemory
from raftlog.rest.body_memory import BodyMemory
from raftlog.rest.gateway import ClusterGateway
from raftlog.rest.names import Namespaces
from raftlog.rest.quota_checks import RestQuotas
from raftlog.rest.settings import (
    DEFAULT_ANSWER_MEMORY_BYTES,
    DEFAULT_BODY_MEMORY_BYTES,
    RestSettings,
)
from raftlog.web.auth import Authenticator


@dataclass(frozen=True, slots=True)
class RestContext:
    """The gateway into the cluster, the authenticator, the namespaces and the limits."""

    gateway: ClusterGateway
    auth: Authenticator
    namespaces: Namespaces
    settings: RestSettings
    quotas: RestQuotas = field(default_factory=lambda: RestQuotas(None, None, secure=False))
    """Publish rate and long polls per principal (``raftlog.rest.quota_checks``)."""
    answers: AnswerMemory = field(default_factory=lambda: AnswerMemory(
        DEFAULT_ANSWER_MEMORY_BYTES))
    """Large answers being sent (``raftlog.rest.answer_memory``; ``[rest]
    answer_memory_bytes``)."""
    bodies: BodyMemory = field(default_factory=lambda: BodyMemory(DEFAULT_BODY_MEMORY_BYTES))
    """Request bodies being read or handled (``raftlog.rest.body_memory``; ``[rest]
    body_memory_bytes``)."""

    @property
    def max_body(self) -> int:
        """Largest request body read (``[rest] max_body_bytes``)."""
        return self.settings.max_body_bytes

    def names(self, request: web.Request) -> tuple[str, str, str]:
        """(namespace, REST topic, log topic) of a ``…/topics/{topic}`` request (404 for an
        unknown namespace, 400 for a name that cannot be a topic)."""
        ns = request.match_info["ns"]
        topic = request.match_info["topic"]
        return ns, topic, self.namespaces.log_topic(ns, topic)
