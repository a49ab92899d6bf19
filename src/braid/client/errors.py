"""The client's error categories (``docs/client.md#errors``) and the one broker-error mapping.

Every failure the client surfaces is a :class:`~braid.core.errors.BraidError` in one of the
error model's categories, with a ``retriable`` flag saying whether retrying the same operation may
succeed. Categories that already exist in :mod:`braid.core.errors` are reused as they are
(``NotFoundError``, ``AuthorizationError``, ``AlreadyClosedError``, ``TopicTerminatedError``, the
timeout); the client-only ones live here.

Broker ``ServerError`` codes are translated in exactly one place, :func:`error_for_code`; socket
and codec failures are translated by the connection module into :class:`ConnectError` /
:class:`NotConnectedError`. The error model's retry split (``docs/client.md#errors``) is decided by
:func:`is_transient`: connection loss, not-ready brokers and segment-gone are retried inside the
client and never surface unless retries run out.
"""

from __future__ import annotations

from braid.core.errors import (
    AlreadyClosedError,
    AuthorizationError,
    BraidError,
    DeadlineExceededError,
    FencedError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    TopicTerminatedError,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The error model's Timeout category, under the name applications use (``braid.TimeoutError``).
TimeoutError = DeadlineExceededError


class AuthenticationError(BraidError):
    """The broker rejected the client's credentials."""


class ProducerBusyError(BraidError):
    """An exclusive access mode is held by another producer (or the name is already in use)."""


class ProducerFencedError(ProducerBusyError, FencedError):
    """This producer was fenced by an exclusive-with-fencing producer."""


class ConsumerBusyError(BraidError):
    """A subscription constraint prevents this consumer from attaching."""


class IncompatibleSchemaError(BraidError):
    """The schema is not compatible with the topic's."""


class SchemaSerializationError(InvalidInputError):
    """A value does not fit the schema (send), or a payload does not decode with it
    (``Message.value``)."""


class ConnectError(ServiceUnavailableError):
    """The client could not connect to a broker (retried internally with backoff)."""


class NotConnectedError(ServiceUnavailableError):
    """The connection dropped while the operation was in flight (retried internally)."""


class ServiceNotReadyError(ServiceUnavailableError):
    """The broker is not ready to serve the topic yet (retried internally)."""


class ProducerQueueFullError(BraidError):
    """The producer's pending-message queue is full and the call may not block."""

    retriable = True


class ProducerBlockedQuotaExceededError(ProducerQueueFullError):
    """The topic is over a backlog quota whose policy is ``producer_request_hold``: nothing more
    is accepted until its consumers catch up (retriable: retry after they do)."""


class ProducerBlockedQuotaExceededException(ProducerQueueFullError):
    """The topic is over a backlog quota whose policy is ``producer_exception``: sends fail at
    once until its consumers catch up."""


class MemoryBufferFullError(BraidError):
    """The client's memory limit is reached."""

    retriable = True


class TransactionConflictError(BraidError):
    """A transaction operation conflicts or cannot proceed."""


class TransactionStateError(TransactionConflictError):
    """The transaction is not in a state that allows the operation (``Transaction.state`` says
    which); the subclasses name why."""


class TransactionEndedError(TransactionStateError):
    """The transaction was committed or aborted already (or is being ended)."""


class TransactionTimedOutError(TransactionStateError):
    """The transaction's timeout passed: its coordinator aborts it, so it can no longer commit
    (an abort still succeeds)."""


class TransactionErroredError(TransactionStateError):
    """A send or acknowledgment inside the transaction failed (its error is the ``__cause__``):
    the transaction cannot commit, only abort."""


class CryptoError(BraidError):
    """Encryption or decryption failed."""


class InvalidConfigurationError(InvalidInputError):
    """A producer/consumer/client option is invalid (the message names it)."""


class InvalidServiceURLError(InvalidConfigurationError):
    """The service URL is malformed."""


class InvalidTopicNameError(InvalidConfigurationError):
    """The topic name is malformed or names an internal segment."""


class MessageTooLargeError(InvalidInputError):
    """A message is larger than the broker accepts."""


class NotAllowedError(BraidError):
    """The broker does not allow the operation (e.g. a feature it does not support)."""


class FeatureNotSupportedError(BraidError):
    """The broker does not support what the operation needs (e.g. scalable topics, C15)."""


class BrokerError(BraidError):
    """The broker failed the request for a reason of its own (metadata, storage, unknown)."""


class PersistenceError(BrokerError):
    """The broker could not persist; transient (the producer resends)."""

    retriable = True


class BrokerMetadataError(BrokerError):
    """The broker could not read its metadata (its metadata-store session reconnecting, a
    lookup it was too busy for); transient, as the Java client's ``BrokerMetadataException``:
    the client looks the topic up again, through another broker if this one goes away."""

    retriable = True


_CODE_TO_ERROR: dict[int, type[BraidError]] = {
    pb.UnknownError: BrokerError,
    pb.MetadataError: BrokerMetadataError,
    pb.PersistenceError: PersistenceError,
    pb.AuthenticationError: AuthenticationError,
    pb.AuthorizationError: AuthorizationError,
    pb.ConsumerBusy: ConsumerBusyError,
    pb.ServiceNotReady: ServiceNotReadyError,
    pb.ProducerBlockedQuotaExceededError: ProducerBlockedQuotaExceededError,
    pb.ProducerBlockedQuotaExceededException: ProducerBlockedQuotaExceededException,
    pb.ChecksumError: BrokerError,
    pb.UnsupportedVersionError: FeatureNotSupportedError,
    pb.TopicNotFound: NotFoundError,
    pb.SubscriptionNotFound: NotFoundError,
    pb.ConsumerNotFound: NotFoundError,
    pb.TooManyRequests: ServiceNotReadyError,
    pb.TopicTerminatedError: TopicTerminatedError,
    pb.ProducerBusy: ProducerBusyError,
    pb.InvalidTopicName: InvalidTopicNameError,
    pb.IncompatibleSchema: IncompatibleSchemaError,
    pb.ConsumerAssignError: ConsumerBusyError,
    pb.TransactionCoordinatorNotFound: TransactionConflictError,
    pb.InvalidTxnStatus: TransactionConflictError,
    pb.NotAllowedError: NotAllowedError,
    pb.TransactionConflict: TransactionConflictError,
    pb.TransactionNotFound: TransactionConflictError,
    pb.ProducerFenced: ProducerFencedError,
}


def error_for_code(code: int, message: str, *, context: str = "") -> BraidError:
    """The typed error for a broker ``ServerError`` code (unknown codes -> :class:`BrokerError`).

    The returned error carries ``server_error`` (the code's name) for diagnostics.
    """
    cls = _CODE_TO_ERROR.get(code, BrokerError)
    try:
        name = pb.ServerError.Name(code)  # type: ignore[arg-type]
    except ValueError:
        name = f"ServerError({code})"
    text = f"{context}: {name}: {message}" if context else f"{name}: {message}"
    error = cls(text)
    error.server_error = name  # type: ignore[attr-defined]
    return error


def is_transient(error: BaseException) -> bool:
    """Whether the client retries ``error`` itself (reconnect, re-lookup) instead of surfacing it.

    Connection loss, a not-ready broker, a broker that cannot reach its metadata and broker
    persistence hiccups are transient; timeouts are not (they surface, ``docs/client.md#errors``),
    nor is any deterministic refusal.
    """
    return isinstance(error, ServiceUnavailableError | PersistenceError | BrokerMetadataError)


__all__ = [
    "AlreadyClosedError",
    "AuthenticationError",
    "AuthorizationError",
    "BraidError",
    "BrokerError",
    "BrokerMetadataError",
    "ConnectError",
    "ConsumerBusyError",
    "CryptoError",
    "FeatureNotSupportedError",
    "IllegalStateError",
    "IncompatibleSchemaError",
    "InvalidConfigurationError",
    "InvalidServiceURLError",
    "InvalidTopicNameError",
    "MemoryBufferFullError",
    "MessageTooLargeError",
    "NotAllowedError",
    "NotConnectedError",
    "NotFoundError",
    "PersistenceError",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusyError",
    "ProducerFencedError",
    "ProducerQueueFullError",
    "SchemaSerializationError",
    "ServiceNotReadyError",
    "TimeoutError",
    "TopicTerminatedError",
    "TransactionConflictError",
    "TransactionEndedError",
    "TransactionErroredError",
    "TransactionStateError",
    "TransactionTimedOutError",
    "error_for_code",
    "is_transient",
]
