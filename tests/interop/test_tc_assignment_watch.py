"""The coordinator-assignment watch at the wire level (ADR 0070): a broker with transactions
advertises ``supports_tc_metadata_discovery`` in CONNECTED and answers CommandWatchTcAssignments
with the whole coordinator map; one without transactions advertises nothing and refuses the watch
with ``NotAllowedError``. A coordinator the watch names accepts TC_CLIENT_CONNECT."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.raw_client import RawClient
from tests.support.raw_client import request as answer_to

pytestmark = pytest.mark.timeout(120)
_T = pb.BaseCommand


@pytest.fixture
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackgroundBroker]:
    background = BackgroundBroker(tmp_path, transaction_coordinator_enabled=request.param).start()
    try:
        yield background
    finally:
        background.stop()


def _watch(broker: BackgroundBroker) -> tuple[pb.FeatureFlags, pb.CommandWatchTcAssignmentsUpdate]:
    url = urlparse(broker.service_url)

    async def main() -> tuple[pb.FeatureFlags, pb.CommandWatchTcAssignmentsUpdate]:
        raw = await RawClient.open(url.hostname or "127.0.0.1", url.port or 6650)
        try:
            assert raw.connected is not None
            await raw.send(commands.wrap(pb.CommandWatchTcAssignments(watch_id=42)))
            update = await raw.next_command(lambda c: c.type == _T.WATCH_TC_ASSIGNMENTS_UPDATE)
            answer = update.watchTcAssignmentsUpdate
            if not answer.HasField("error"):
                tc_id = answer.snapshot.assignments[0].tc_id
                cmd = commands.wrap(pb.CommandTcClientConnectRequest(request_id=1, tc_id=tc_id))
                connected = await answer_to(raw, cmd, 1)
                assert connected.type == _T.TC_CLIENT_CONNECT_RESPONSE, connected
                assert not connected.tcClientConnectResponse.HasField("error"), connected
                await raw.send(commands.wrap(pb.CommandWatchTcAssignmentsClose(watch_id=42)))
            return raw.connected.feature_flags, answer
        finally:
            await raw.close()

    return asyncio.run(main())


@pytest.mark.parametrize("broker", [True], indirect=True)
def test_a_broker_with_transactions_sends_the_whole_coordinator_map(
    broker: BackgroundBroker,
) -> None:
    flags, update = _watch(broker)
    assert flags.supports_tc_metadata_discovery
    assert update.watch_id == 42 and not update.HasField("error")
    assert update.snapshot.parallelism == 1  # a standalone has one coordinator, as Pulsar's
    (assignment,) = update.snapshot.assignments
    assert (assignment.tc_id, assignment.broker_service_url) == (0, broker.service_url)
    assert not assignment.HasField("broker_service_url_tls")  # no TLS listener here


@pytest.mark.parametrize("broker", [False], indirect=True)
def test_a_broker_without_transactions_neither_advertises_nor_serves_the_watch(
    broker: BackgroundBroker,
) -> None:
    flags, update = _watch(broker)
    assert not flags.supports_tc_metadata_discovery
    assert update.watch_id == 42
    assert update.error == pb.ServerError.NotAllowedError
    assert not update.HasField("snapshot")
