"""``braid standalone --bookies N`` with TLS to its bookies (``bookkeeperTLSClientAuthentication``,
ADR 0066): the in-process bookies serve TLS with the broker's certificate and require the broker's
client certificate; messages go through them, and a plain bookie client gets no answer from
their ports. Certificates are made at run time by a test CA."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import braid
from braid.cli.standalone import StandaloneServer
from braid.storage.api import BookieUnavailable
from braid.storage.bookie_net_client import NetBookieClient
from braid.storage.bookie_registry import available_path, decode_registration
from tests.support.certificates import TestCertificateAuthority
from tests.support.standalone import standalone_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[StandaloneServer]:
    ca = TestCertificateAuthority(tmp_path / "pki")
    server = ca.issue("localhost", server=True)
    client = ca.issue("broker")
    config = standalone_config(
        tmp_path / "data",
        standalone_bookies=2,
        managed_ledger_default_ensemble_size=2,
        managed_ledger_default_write_quorum=2,
        managed_ledger_default_ack_quorum=2,
        tls_certificate_file_path=server.cert,
        tls_key_file_path=server.key,
        tls_trust_certs_file_path=ca.cert,
        bookkeeper_tls_client_authentication=True,
        bookkeeper_tls_trust_certs_file_path=ca.cert,
        bookkeeper_tls_certificate_file_path=client.cert,
        bookkeeper_tls_key_file_path=client.key,
    )
    broker = StandaloneServer(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


async def test_standalone_bookies_serve_tls_and_the_broker_reaches_them_with_its_certificate(
    standalone: StandaloneServer,
) -> None:
    client = braid.AsyncClient(standalone.service_url, operation_timeout=20)
    try:
        topic = "topic://public/default/bookie-tls"
        consumer = await client.subscribe_stream(topic, "s", initial_position="earliest")
        producer = await client.create_producer(topic)
        for i in range(20):
            await producer.send(f"m{i}".encode(), key=f"k{i % 3}")
        got = []
        while len(got) < 20:
            message = await consumer.receive(timeout=20)
            assert message is not None
            got.append(message.value)
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(20))
    finally:
        await client.close()

    metadata = standalone.metadata
    assert metadata is not None
    parent = available_path("standalone")
    names = await metadata.children(parent)
    assert len(names) == 2
    for name in names:
        got_reg = await metadata.get(f"{parent}/{name}")
        assert got_reg is not None
        registration = decode_registration(got_reg[0])
        plain = NetBookieClient(name, registration.address, read_timeout_s=20)
        try:
            with pytest.raises(BookieUnavailable):
                await plain.read_lac(1)
        finally:
            await plain.close()
