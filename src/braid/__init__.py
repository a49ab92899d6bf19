"""Braid: elastic, key-ordered messaging over the Apache Pulsar binary protocol.

A Braid topic is a *scalable topic*: a DAG of hash-range segments that split when hot and merge when
cold without breaking per-key order. See README.md and docs/ for the tour; the package map and the
layering rules are in docs/decisions/0003-package-layering.md.

The client is the public surface of this package::

    import braid

    with braid.Client("pulsar://127.0.0.1:6650") as client:
        producer = client.create_producer("persistent://public/default/orders")
        producer.send(b"hello", key="customer-1")

Everything in ``__all__`` is public API (names are a contract, see docs/client.md).
"""

import importlib as _importlib
import importlib.util as _importlib_util
import typing as _typing

if _typing.TYPE_CHECKING:
    from braid.client import (
        AsyncCheckpointConsumer,
        AsyncClient,
        AsyncProducer,
        AsyncQueueConsumer,
        AsyncSegmentReader,
        AsyncStreamConsumer,
        AsyncTransaction,
        CheckpointConsumer,
        Client,
        Message,
        MessageColumns,
        Producer,
        QueueConsumer,
        Schema,
        SegmentReader,
        StreamConsumer,
        Transaction,
        TransactionState,
    )
    from braid.client.auth import (
        AuthenticationBasic,
        AuthenticationTLS,
        AuthenticationToken,
    )
    from braid.client.errors import (
        AlreadyClosedError,
        AuthenticationError,
        AuthorizationError,
        BraidError,
        BrokerError,
        ConnectError,
        ConsumerBusyError,
        CryptoError,
        FeatureNotSupportedError,
        IllegalStateError,
        IncompatibleSchemaError,
        InvalidConfigurationError,
        InvalidServiceURLError,
        InvalidTopicNameError,
        MemoryBufferFullError,
        MessageTooLargeError,
        NotAllowedError,
        NotConnectedError,
        NotFoundError,
        ProducerBlockedQuotaExceededError,
        ProducerBlockedQuotaExceededException,
        ProducerBusyError,
        ProducerFencedError,
        ProducerQueueFullError,
        SchemaSerializationError,
        TimeoutError,
        TopicTerminatedError,
        TransactionConflictError,
        TransactionEndedError,
        TransactionErroredError,
        TransactionStateError,
        TransactionTimedOutError,
    )
    from braid.core.checkpoint import Checkpoint
    from braid.core.message_id import MessageId

# The public names load on first use (PEP 562): ``import braid.<sub>`` (the CLI, the broker, a
# Spark planning process) does not pay for the whole client it does not use.
_EXPORTS = {
    "AlreadyClosedError": "braid.client.errors",
    "AsyncCheckpointConsumer": "braid.client",
    "AsyncClient": "braid.client",
    "AsyncProducer": "braid.client",
    "AsyncQueueConsumer": "braid.client",
    "AsyncSegmentReader": "braid.client",
    "AsyncStreamConsumer": "braid.client",
    "AsyncTransaction": "braid.client",
    "AuthenticationBasic": "braid.client.auth",
    "AuthenticationError": "braid.client.errors",
    "AuthenticationTLS": "braid.client.auth",
    "AuthenticationToken": "braid.client.auth",
    "AuthorizationError": "braid.client.errors",
    "BraidError": "braid.client.errors",
    "BrokerError": "braid.client.errors",
    "Checkpoint": "braid.core.checkpoint",
    "CheckpointConsumer": "braid.client",
    "Client": "braid.client",
    "ConnectError": "braid.client.errors",
    "ConsumerBusyError": "braid.client.errors",
    "CryptoError": "braid.client.errors",
    "DeadLetterPolicy": "braid.client",
    "FeatureNotSupportedError": "braid.client.errors",
    "IllegalStateError": "braid.client.errors",
    "IncompatibleSchemaError": "braid.client.errors",
    "InvalidConfigurationError": "braid.client.errors",
    "InvalidServiceURLError": "braid.client.errors",
    "InvalidTopicNameError": "braid.client.errors",
    "MemoryBufferFullError": "braid.client.errors",
    "Message": "braid.client",
    "MessageColumns": "braid.client",
    "MessageId": "braid.core.message_id",
    "MessageTooLargeError": "braid.client.errors",
    "NotAllowedError": "braid.client.errors",
    "NotConnectedError": "braid.client.errors",
    "NotFoundError": "braid.client.errors",
    "Producer": "braid.client",
    "ProducerBlockedQuotaExceededError": "braid.client.errors",
    "ProducerBlockedQuotaExceededException": "braid.client.errors",
    "ProducerBusyError": "braid.client.errors",
    "ProducerFencedError": "braid.client.errors",
    "ProducerQueueFullError": "braid.client.errors",
    "QueueConsumer": "braid.client",
    "Schema": "braid.client",
    "SchemaSerializationError": "braid.client.errors",
    "SegmentReader": "braid.client",
    "StreamConsumer": "braid.client",
    "TimeoutError": "braid.client.errors",
    "TopicTerminatedError": "braid.client.errors",
    "Transaction": "braid.client",
    "TransactionConflictError": "braid.client.errors",
    "TransactionEndedError": "braid.client.errors",
    "TransactionErroredError": "braid.client.errors",
    "TransactionState": "braid.client",
    "TransactionStateError": "braid.client.errors",
    "TransactionTimedOutError": "braid.client.errors",
}


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module), name)
    elif _importlib_util.find_spec(f"braid.{name}") is not None:
        value = _importlib.import_module(f"braid.{name}")  # a subpackage, as before
    else:
        raise AttributeError(f"module 'braid' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "AlreadyClosedError",
    "AsyncCheckpointConsumer",
    "AsyncClient",
    "AsyncProducer",
    "AsyncQueueConsumer",
    "AsyncSegmentReader",
    "AsyncStreamConsumer",
    "AsyncTransaction",
    "AuthenticationBasic",
    "AuthenticationError",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AuthorizationError",
    "BraidError",
    "BrokerError",
    "Checkpoint",
    "CheckpointConsumer",
    "Client",
    "ConnectError",
    "ConsumerBusyError",
    "CryptoError",
    "DeadLetterPolicy",
    "FeatureNotSupportedError",
    "IllegalStateError",
    "IncompatibleSchemaError",
    "InvalidConfigurationError",
    "InvalidServiceURLError",
    "InvalidTopicNameError",
    "MemoryBufferFullError",
    "Message",
    "MessageColumns",
    "MessageId",
    "MessageTooLargeError",
    "NotAllowedError",
    "NotConnectedError",
    "NotFoundError",
    "Producer",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusyError",
    "ProducerFencedError",
    "ProducerQueueFullError",
    "QueueConsumer",
    "Schema",
    "SchemaSerializationError",
    "SegmentReader",
    "StreamConsumer",
    "TimeoutError",
    "TopicTerminatedError",
    "Transaction",
    "TransactionConflictError",
    "TransactionEndedError",
    "TransactionErroredError",
    "TransactionState",
    "TransactionStateError",
    "TransactionTimedOutError",
    "__version__",
]
