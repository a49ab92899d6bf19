"""Broker errors and their translation into the wire's ``ServerError`` codes.

Every refusal the broker sends to a client (``ERROR``, ``SEND_ERROR``) carries one of Pulsar's
``ServerError`` codes and a human-readable message. The broker raises typed errors from this module
(each a subclass of a :mod:`braid.core.errors` category) and :func:`to_server_error` maps *any*
exception - ours or a lower layer's - to a ``(code, message)`` pair exactly once, at the connection.
The official client treats some codes as retriable (``ServiceNotReady``, ``PersistenceError``) and
others as fatal (``TopicNotFound``, ``ProducerBusy``, ``ConsumerBusy``), so the choice matters.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

from braid.core import names
from braid.core.errors import (
    AlreadyClosedError,
    AuthorizationError,
    BraidError,
    FencedError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    TopicTerminatedError,
)
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.storage.api import StorageReadOnly

#: Pulsar's ``ServerError`` codes as sent on the wire: the generated protobuf enum itself, so no
#: code can be missing or drift. ``ServerError.TopicNotFound`` is a wire value (an ``int``),
#: ``ServerError.Name(code)`` its name.
ServerError = pb.ServerError

#: The type of one ``ServerError`` value.
ServerErrorCode: TypeAlias = pb.ServerError.ValueType


class BrokerError(BraidError):
    """Root of the errors the broker reports to clients; ``code`` is what goes on the wire."""

    code: ClassVar[ServerErrorCode] = ServerError.UnknownError


class TopicNotFound(BrokerError, NotFoundError):
    """The topic (or its tenant/namespace) does not exist and may not be auto-created."""

    code = ServerError.TopicNotFound


class InvalidTopicName(BrokerError, InvalidInputError):
    """A topic name that does not parse, or a domain this broker path does not serve."""

    code = ServerError.InvalidTopicName


class ProducerBusy(BrokerError, IllegalStateError):
    """A producer with that name is connected, or the access mode excludes this producer."""

    code = ServerError.ProducerBusy


class ProducerFenced(BrokerError, FencedError):
    """An exclusive producer holds the topic (or fenced this one out)."""

    code = ServerError.ProducerFenced


class ConsumerBusy(BrokerError, IllegalStateError):
    """The subscription refuses this consumer (Exclusive taken, other type, consumers attached)."""

    code = ServerError.ConsumerBusy


class SubscriptionNotFound(BrokerError, NotFoundError):
    """The named subscription does not exist."""

    code = ServerError.SubscriptionNotFound


class ConsumerNotFound(BrokerError, NotFoundError):
    """A command named a consumer id this connection does not have."""

    code = ServerError.ConsumerNotFound


class ProducerNotFound(BrokerError, NotFoundError):
    """A command named a producer id this connection does not have."""

    code = ServerError.UnknownError


class TopicTerminated(BrokerError, TopicTerminatedError):
    """The topic was terminated: no more messages, no new producers."""

    code = ServerError.TopicTerminatedError


class TopicFenced(BrokerError, FencedError):
    """Another writer took the topic's managed ledger over (Pulsar's ``TopicFencedException``):
    the send was not stored and gets no receipt; the broker closes the producer and gives the
    topic up, and the client reconnects and resends (ADR 0040)."""

    code = ServerError.ServiceNotReady


class ChecksumMismatch(BrokerError, InvalidInputError):
    """A SEND whose CRC32C does not match its metadata and payload."""

    code = ServerError.ChecksumError


class InvalidMessage(BrokerError, InvalidInputError):
    """A SEND whose body no consumer could read (metadata that does not parse, a batch count the
    payload does not hold) or whose payload exceeds ``maxMessageSize``: refused, not stored.

    The wire code is ``ChecksumError`` although the checksum may be fine: it is the one
    ``SEND_ERROR`` the official clients answer by failing that message alone (any other code makes
    them reconnect and resend it forever); the message text names the real reason.
    """

    code = ServerError.ChecksumError


class NotSupported(BrokerError, InvalidInputError):
    """A feature Braid does not implement yet (Key_Shared, ...): refused, never ignored."""

    code = ServerError.NotAllowedError


class NotAllowedOnNonPersistent(NotSupported):
    """An operation that needs stored messages (seek, reset-cursor, peek, last message id,
    compaction, ...) asked of a ``non-persistent://`` topic, which stores none: Pulsar's
    ``NotAllowed`` (HTTP 405 in the admin API)."""


class ConsumerAssignError(BrokerError, InvalidInputError):
    """A Key_Shared consumer that cannot be given hashes (STICKY ranges that conflict with
    another consumer's or are invalid, no range left to split)."""

    code = ServerError.ConsumerAssignError


class ServiceNotReady(BrokerError, ServiceUnavailableError):
    """The broker is starting or closing; the client retries."""

    code = ServerError.ServiceNotReady


class TopicBusy(BrokerError, IllegalStateError):
    """A delete without ``force`` of a topic that producers or consumers are connected to
    (Pulsar's ``TopicBusyException``; the admin API answers 412). The message names them."""

    code = ServerError.NotAllowedError


class TooManyRequests(BrokerError, ServiceUnavailableError):
    """A per-connection or broker-wide cap on concurrent requests or sessions was reached
    (``maxConcurrentLookupRequest``, ...): the client retries later. The message names the key."""

    code = ServerError.TooManyRequests


class UnknownListener(BrokerError, NotFoundError):
    """A lookup named a listener that is not one of the broker's ``advertisedListeners``."""

    code = ServerError.MetadataError


class DuplicateInFlight(BrokerError, IllegalStateError):
    """A resend of a message whose first copy is still being persisted (Pulsar's
    ``MessageDupUnknownException``): the producer is closed so the client resends later."""

    code = ServerError.PersistenceError


class TransactionsDisabled(BrokerError, IllegalStateError):
    """A transaction command (or a SEND/ACK in a transaction) while
    ``transactionCoordinatorEnabled`` is off: Pulsar's ``NotAllowed``."""

    code = ServerError.NotAllowedError


class CoordinatorNotFound(BrokerError, NotFoundError):
    """A transaction coordinator id this broker does not serve (Pulsar's
    ``TransactionCoordinatorNotFound``: the client looks the coordinator up again)."""

    code = ServerError.TransactionCoordinatorNotFound


class TransactionNotFound(BrokerError, NotFoundError):
    """No open or ending transaction has that id (never begun, committed, aborted or timed out)."""

    code = ServerError.TransactionNotFound


class InvalidTxnStatus(BrokerError, IllegalStateError):
    """The transaction is not in a state that allows the request (a commit of an aborting one,
    a partition added to one that is ending)."""

    code = ServerError.InvalidTxnStatus


class TransactionConflict(BrokerError, IllegalStateError):
    """An acknowledgement in a transaction of a message already acknowledged, or held by
    another transaction's pending acknowledgement."""

    code = ServerError.TransactionConflict


def to_server_error(exc: BaseException) -> tuple[ServerErrorCode, str]:
    """Map any exception to the ``ServerError`` code and message a client should receive.

    Broker errors carry their own code; lower layers' typed errors map by category; anything else
    is an ``UnknownError`` whose message names the exception type (it is a bug we want to see).
    """
    message = str(exc) or type(exc).__name__
    if isinstance(exc, BrokerError):
        return exc.code, message
    if isinstance(exc, TopicTerminatedError):
        return ServerError.TopicTerminatedError, message
    if isinstance(exc, FencedError):
        # The managed ledger moved to another owner: the client should look the topic up again.
        return ServerError.ServiceNotReady, message
    if isinstance(exc, StorageReadOnly):
        # The bookies' disks are full: Pulsar's code for "could not persist", with the reason.
        return ServerError.PersistenceError, message
    if isinstance(exc, ServiceUnavailableError | AlreadyClosedError):
        return ServerError.ServiceNotReady, message
    if isinstance(exc, AuthorizationError):
        return ServerError.AuthorizationError, message
    if isinstance(exc, NotFoundError):
        return ServerError.TopicNotFound, message
    if isinstance(exc, names.InvalidTopicName):
        return ServerError.InvalidTopicName, message
    if isinstance(exc, InvalidInputError):
        return ServerError.NotAllowedError, message
    if isinstance(exc, BraidError | OSError):
        return ServerError.PersistenceError, message
    return ServerError.UnknownError, f"{type(exc).__name__}: {message}"


__all__ = [
    "BrokerError",
    "ChecksumMismatch",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "CoordinatorNotFound",
    "DuplicateInFlight",
    "InvalidMessage",
    "InvalidTopicName",
    "InvalidTxnStatus",
    "NotAllowedOnNonPersistent",
    "NotSupported",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotFound",
    "ServerError",
    "ServerErrorCode",
    "ServiceNotReady",
    "SubscriptionNotFound",
    "TooManyRequests",
    "TopicBusy",
    "TopicFenced",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionNotFound",
    "TransactionsDisabled",
    "UnknownListener",
    "to_server_error",
]
