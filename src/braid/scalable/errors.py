"""Errors of the scalable-topic layer (controller, coordinators, DAG watch, service).

Each is a :mod:`braid.core.errors` category, so the wire (``broker.errors.to_server_error``) and
REST (``admin.errors.status_for``) translations need no special cases: not the leader is
*unavailable* (retriable: ServiceNotReady / 503), an operation already running is a *conflict*
(409), an invalid split or merge is an *illegal state* (409), scalable topics switched off is
*invalid input* (NotAllowed / 400).
"""

from __future__ import annotations

from braid.core.errors import (
    ConflictError,
    IllegalStateError,
    InvalidInputError,
    ServiceUnavailableError,
)


class NotLeader(ServiceUnavailableError):
    """This broker is not the controller leader of the topic; the message names the leader."""


class OperationInProgress(ConflictError):
    """Another split, merge or prune of the topic is still running."""


class MaxSegmentsReached(IllegalStateError):
    """A split would take the topic past its ``scalableTopicMaxSegments`` active segments (the
    effective policy: topic override, namespace override, ``broker.conf``); refused on every
    path - admin, auto-scale, consumer-driven - before anything is recorded."""


class ScalableTopicsDisabled(InvalidInputError):
    """The broker runs with ``scalableTopicEnabled=false``."""


__all__ = ["MaxSegmentsReached", "NotLeader", "OperationInProgress", "ScalableTopicsDisabled"]
