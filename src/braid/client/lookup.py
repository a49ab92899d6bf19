"""Topic lookup over the standard protocol: PARTITIONED_METADATA and LOOKUP (with redirects).

Used for classic ``persistent://`` topics (the synthetic layout's partition count, and the broker
that owns each legacy segment) and for ``segment://`` topics whose layout did not name a broker.
Failures come back as the client's typed errors (``TopicNotFound`` -> ``NotFoundError``, ...).
"""

from __future__ import annotations

from braid.client.errors import BrokerError, ConnectError, error_for_code
from braid.client.pool import ConnectionPool
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

MAX_REDIRECTS = 20


async def lookup_broker(pool: ConnectionPool, topic: str) -> str:
    """The URL of the broker serving ``topic``.

    Raises:
        NotFoundError, AuthorizationError, ...: the broker's refusal, typed.
        ConnectError, NotConnectedError, TimeoutError: transport failures (retriable).
        BrokerError: more than :data:`MAX_REDIRECTS` redirects.
    """
    conn = await pool.service_connection()
    authoritative = False
    for _ in range(MAX_REDIRECTS):
        request_id = conn.new_request_id()
        cmd = commands.lookup(topic, request_id, authoritative=authoritative)
        response = (await conn.request(cmd, request_id)).lookupTopicResponse
        if response.response == pb.CommandLookupTopicResponse.Failed:
            raise error_for_code(response.error, response.message, context=f"lookup of {topic}")
        if response.proxy_through_service_url:
            return conn.address.url
        url = _broker_url(response, pool.settings.uses_tls, topic)
        if response.response == pb.CommandLookupTopicResponse.Connect:
            return url
        conn = await pool.get(url)
        authoritative = response.authoritative
    raise BrokerError(f"lookup of {topic} was redirected more than {MAX_REDIRECTS} times")


def _broker_url(response: pb.CommandLookupTopicResponse, tls: bool, topic: str) -> str:
    """The URL a lookup answer points at: its ``pulsar+ssl://`` one for a TLS client.

    Raises:
        ConnectError: a TLS client got an answer without a TLS URL (the owner has no TLS
            listener): falling back to plain text would silently drop the protection asked for.
    """
    if not tls:
        return response.brokerServiceUrl
    if not response.brokerServiceUrlTls:
        raise ConnectError(f"lookup of {topic}: the owning broker has no TLS (pulsar+ssl) URL")
    return response.brokerServiceUrlTls


async def partition_count(pool: ConnectionPool, topic: str) -> int:
    """How many partitions ``topic`` has (0 = not partitioned).

    Raises:
        NotFoundError, AuthorizationError, ...: the broker's refusal, typed.
        ConnectError, NotConnectedError, TimeoutError: transport failures (retriable).
    """
    conn = await pool.service_connection()
    request_id = conn.new_request_id()
    cmd = commands.partitioned_metadata(topic, request_id)
    response = (await conn.request(cmd, request_id)).partitionMetadataResponse
    if response.response == pb.CommandPartitionedTopicMetadataResponse.Failed:
        raise error_for_code(response.error, response.message, context=f"metadata of {topic}")
    return int(response.partitions)


__all__ = ["MAX_REDIRECTS", "lookup_broker", "partition_count"]
