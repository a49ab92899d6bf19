"""Transactions with token authentication and authorization on: a transaction belongs to the role
that began it - another role may not add to it or end it (``AuthorizationError``), a super user
may (Pulsar's ownership check); END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION, which coordinators
send to the brokers of the topics, only a super user may send (ADR 0070)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security import tokens
from tests.support.broker_stack import BackgroundBroker
from tests.support.txn_wire import TxnWire, error_name

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

SECRET = b"transactions-auth-test-secret-0123456789"
TOPIC = "persistent://public/default/txn-owned"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    broker = BackgroundBroker(
        tmp_path_factory.mktemp("braid-txn-auth"),
        authentication_enabled=True,
        authentication_providers=(tokens.CLASS_NAME,),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        authorization_enabled=True,
        super_user_roles=("root",),
        transaction_coordinator_enabled=True,
    ).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_another_role_may_not_end_a_transaction_but_a_super_user_may(
    secured: BackgroundBroker,
) -> None:
    url = urlparse(secured.service_url)

    async def as_role(role: str) -> TxnWire:
        token = tokens.create_token(role, secret_key=SECRET)
        return await TxnWire.open(url.hostname or "127.0.0.1", url.port or 6650, token=token)

    async def scenario() -> None:
        alice, mallory, root = (
            await as_role("alice"),
            await as_role("mallory"),
            await as_role("root"),
        )
        try:
            txn = await alice.new_txn()
            added = await mallory.add_partition(txn, TOPIC)
            assert error_name(added.addPartitionToTxnResponse) == "AuthorizationError", added
            ended = await mallory.end(txn, pb.TxnAction.COMMIT)
            assert error_name(ended) == "AuthorizationError", ended
            assert error_name(await alice.end(txn, pb.TxnAction.COMMIT)) is None
            other = await alice.new_txn()
            assert error_name(await root.end(other, pb.TxnAction.ABORT)) is None
        finally:
            for wire in (alice, mallory, root):
                await wire.close()

    asyncio.run(scenario())


def test_only_a_super_user_may_end_a_transaction_on_a_topic(secured: BackgroundBroker) -> None:
    url = urlparse(secured.service_url)

    async def send(role: str, cmd: pb.BaseCommand) -> pb.BaseCommand:
        token = tokens.create_token(role, secret_key=SECRET)
        wire = await TxnWire.open(url.hostname or "127.0.0.1", url.port or 6650, token=token)
        try:
            return await wire.request(cmd, 77)
        finally:
            await wire.close()

    on_partition = commands.wrap(
        pb.CommandEndTxnOnPartition(
            request_id=77, txnid_most_bits=0, txnid_least_bits=99, topic=TOPIC, txn_action=1
        )
    )
    on_subscription = commands.wrap(
        pb.CommandEndTxnOnSubscription(
            request_id=77,
            txnid_most_bits=0,
            txnid_least_bits=99,
            subscription=pb.Subscription(topic=TOPIC, subscription="s"),
            txn_action=1,
        )
    )

    async def scenario() -> None:
        for cmd in (on_partition, on_subscription):
            refused = await send("mallory", cmd)
            assert error_name(commands.inner(refused)) == "AuthorizationError", refused
            served = await send("root", cmd)
            assert error_name(commands.inner(served)) != "AuthorizationError", served

    asyncio.run(scenario())
