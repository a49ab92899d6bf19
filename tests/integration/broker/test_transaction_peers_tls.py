"""A coordinator's connections to other brokers over TLS (``braid.broker.transactions.peers``,
ADR 0070), against a real in-process broker serving ``pulsar+ssl://`` with mutual TLS
(``tlsRequireTrustedClientCertOnConnect=true``) and ``transactionCoordinatorEnabled=true``.

The calling side is configured as a ``braid broker`` with ``brokerClientTlsEnabled=true`` is: its
TLS settings come from :func:`~braid.broker.cluster_tls.peer_tls` and the peer's ``pulsar+ssl://``
URL from the broker registry (``pulsarServiceUrlTls``), both real. Scenarios: END_TXN_ON_PARTITION
sent over TLS commits a transaction's messages on the peer (a consumer then reads them); a peer
registered without a TLS URL is refused, with no plain fallback; a peer whose certificate the
caller's trust file does not cover is refused and the TLS failure logged once however often it is
retried.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import braid
from braid.broker.broker_registry import BrokerRegistry
from braid.broker.cluster_tls import peer_tls
from braid.broker.config import BrokerConfig
from braid.broker.transactions.peers import PeerConnections, PeerRefused
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BrokerStack, open_broker_stack
from tests.support.certificates import TestCertificateAuthority

pytestmark = pytest.mark.timeout(120)


@dataclass
class TlsPeer:
    stack: BrokerStack
    ca: TestCertificateAuthority
    registry: BrokerRegistry
    tmp: Path

    @property
    def plain_url(self) -> str:
        return self.stack.service.service_url

    def caller(self, trust: Path | None = None, *, present_cert: bool = True) -> PeerConnections:
        """The peer connections of a broker with ``brokerClientTlsEnabled=true``, trusting
        ``trust`` (default: the CA that signed the peer), presenting a CA-signed certificate
        (unless not ``present_cert``)."""
        own = self.ca.issue("localhost", server=True)
        client = self.ca.issue("broker-b")
        config = BrokerConfig(
            data_dir=self.tmp / "caller",
            broker_client_tls_enabled=True,
            tls_certificate_file_path=own.cert,
            tls_key_file_path=own.key,
            broker_client_trust_certs_file_path=trust or self.ca.cert,
            broker_client_certificate_file_path=client.cert if present_cert else None,
            broker_client_key_file_path=client.key if present_cert else None,
        )
        return PeerConnections(None, tls=peer_tls(config), tls_url_of=self.registry.service_url_tls)


@pytest.fixture
async def tls_peer(tmp_path: Path) -> AsyncIterator[TlsPeer]:
    ca = TestCertificateAuthority(tmp_path / "pki")
    server = ca.issue("localhost", server=True)
    stack = await open_broker_stack(
        tmp_path / "peer",
        transaction_coordinator_enabled=True,
        broker_service_port_tls=0,
        tls_certificate_file_path=server.cert,
        tls_key_file_path=server.key,
        tls_trust_certs_file_path=ca.cert,
        tls_require_trusted_client_cert_on_connect=True,
    )
    registry = BrokerRegistry(stack.metadata)
    service = stack.service
    await registry.register(service.service_url, None, service.service_url_tls)
    try:
        yield TlsPeer(stack, ca, registry, tmp_path)
    finally:
        await registry.unregister()
        await stack.close()


def end_on_partition(topic: str, txn: tuple[int, int], request_id: int) -> pb.BaseCommand:
    end = pb.CommandEndTxnOnPartition(
        request_id=request_id, topic=topic, txn_action=pb.TxnAction.COMMIT
    )
    end.txnid_most_bits, end.txnid_least_bits = txn
    return commands.wrap(end)


async def test_end_txn_on_partition_reaches_a_tls_peer_over_pulsar_ssl(tls_peer: TlsPeer) -> None:
    topic = "persistent://public/default/peer-tls"
    peers = tls_peer.caller()
    async with braid.AsyncClient(tls_peer.plain_url, operation_timeout=15) as client:
        stream = await client.subscribe_stream(topic, "reader", initial_position="earliest")
        producer = await client.create_producer(topic)
        txn = await client.new_transaction(timeout=60)
        await producer.send(b"over-tls", txn=txn)
        assert await stream.receive_many(1, timeout=0.3) == []  # held by the open transaction
        # The coordinator's step, from "another broker": the peer is named by its plain URL and
        # reached at its registered pulsar+ssl:// one.
        await peers.ask(
            tls_peer.plain_url,
            lambda rid: end_on_partition(topic, txn.txn_id, rid),
            "ending the transaction",
        )
        conn = await peers.get(tls_peer.plain_url)
        assert conn.url == tls_peer.stack.service.service_url_tls
        assert conn.url.startswith("pulsar+ssl://")
        got = await stream.receive_many(1, timeout=15)
        assert [m.value for m in got] == [b"over-tls"]
    peers.close()


async def test_a_peer_without_a_tls_listener_is_refused_with_no_plain_fallback(
    tls_peer: TlsPeer,
) -> None:
    peers = tls_peer.caller()
    unregistered = "pulsar://127.0.0.1:1"  # in no registry entry: no pulsar+ssl:// URL known
    with pytest.raises(PeerRefused, match="no plain fallback"):
        await peers.get(unregistered)
    peers.close()


async def test_a_peer_with_an_untrusted_certificate_is_refused_and_logged_once(
    tls_peer: TlsPeer, caplog: pytest.LogCaptureFixture
) -> None:
    other = TestCertificateAuthority(tls_peer.tmp / "other-pki", name="other-ca")
    peers = tls_peer.caller(trust=other.cert)
    with caplog.at_level(logging.ERROR, logger="braid.broker.cluster_tls"):
        for _ in range(3):
            with pytest.raises(PeerRefused, match="certificate"):
                await peers.get(tls_peer.plain_url)
    failures = [r for r in caplog.records if "TLS to broker" in r.getMessage()]
    assert len(failures) == 1, failures
    peers.close()


async def test_a_caller_without_its_client_certificate_is_refused_by_a_mutual_tls_peer(
    tls_peer: TlsPeer,
) -> None:
    peers = tls_peer.caller(present_cert=False)
    with pytest.raises(PeerRefused):
        await peers.call(
            tls_peer.plain_url, lambda rid: commands.lookup("persistent://public/default/x", rid)
        )
    peers.close()
