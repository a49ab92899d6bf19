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

from braid.client import (
    AsyncCheckpointConsumer,
    AsyncClient,
    AsyncProducer,
    AsyncQueueConsumer,
    AsyncSegmentReader,
    AsyncStreamConsumer,
    CheckpointConsumer,
    Client,
    Message,
    MessageColumns,
    Producer,
    QueueConsumer,
    Schema,
    SegmentReader,
    StreamConsumer,
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
    ProducerBusyError,
    ProducerFencedError,
    ProducerQueueFullError,
    SchemaSerializationError,
    TimeoutError,
    TopicTerminatedError,
    TransactionConflictError,
)
from braid.core.checkpoint import Checkpoint
from braid.core.message_id import MessageId

__version__ = "0.1.0"

__all__ = [
    "AlreadyClosedError",
    "AsyncCheckpointConsumer",
    "AsyncClient",
    "AsyncProducer",
    "AsyncQueueConsumer",
    "AsyncSegmentReader",
    "AsyncStreamConsumer",
    "AuthenticationError",
    "AuthorizationError",
    "BraidError",
    "BrokerError",
    "Checkpoint",
    "CheckpointConsumer",
    "Client",
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
    "Message",
    "MessageColumns",
    "MessageId",
    "MessageTooLargeError",
    "NotAllowedError",
    "NotConnectedError",
    "NotFoundError",
    "Producer",
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
    "TransactionConflictError",
    "__version__",
]
