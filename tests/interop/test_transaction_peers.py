"""The broker's binary-protocol client to other brokers (ADR 0070), against an in-process broker:
a command's refusal comes back typed and retriable, an unreachable peer is a retriable refusal, a
connection is shared by later requests, and a lookup answered *Connect* names the broker."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.broker.errors import ServiceNotReady
from braid.broker.transactions.peers import PeerConnections, PeerRefused, find_owner
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    background = BackgroundBroker(tmp_path).start()  # transactions off
    try:
        yield background
    finally:
        background.stop()


def _end(rid: int) -> pb.BaseCommand:
    return commands.wrap(
        pb.CommandEndTxnOnPartition(
            request_id=rid,
            txnid_most_bits=0,
            txnid_least_bits=1,
            topic="persistent://public/default/t",
            txn_action=pb.TxnAction.COMMIT,
        )
    )


def test_a_peers_refusal_is_typed_and_retriable_and_the_connection_is_shared(
    broker: BackgroundBroker,
) -> None:
    async def main() -> None:
        peers = PeerConnections()
        try:
            for _ in range(2):
                with pytest.raises(PeerRefused, match="NotAllowedError") as refused:
                    await peers.ask(broker.service_url, _end, "ending (0,1)")
                assert isinstance(refused.value, ServiceNotReady)
            assert len(peers._connections) == 1  # one connection for both
            topic = "persistent://public/default/peer-lookup"
            assert await find_owner(peers, broker.service_url, topic, False) == broker.service_url
        finally:
            peers.close()

    asyncio.run(main())


def test_an_unreachable_peer_is_a_retriable_refusal() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        peers = PeerConnections()
        with pytest.raises(PeerRefused, match="cannot reach"):
            await peers.ask(f"pulsar://127.0.0.1:{port}", _end, "ending (0,1)")
        with pytest.raises(PeerRefused, match="not a pulsar://host:port"):
            await peers.ask("http://127.0.0.1:1", _end, "ending (0,1)")

    asyncio.run(main())
