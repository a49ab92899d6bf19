"""``/admin/v3/transactions`` and ``braid admin transactions`` against a real ``braid standalone``
with ``transactionCoordinatorEnabled=true``: transactions made over the wire (the Java client's
commands, :mod:`tests.support.txn_wire`) show in the coordinator's stats, a transaction's
metadata, slow transactions, the topic's buffer and the subscription's pending acks with
Pulsar's JSON field names; unknown ids are 404; a broker with transactions off answers 503."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from braid.admin.client import AdminClient
from braid.admin.client_errors import AdminNotFoundError, AdminUnavailableError
from braid.cli.main import main
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.standalone import StandaloneProcess
from tests.support.txn_wire import Txn, TxnWire, error_name

pytestmark = pytest.mark.timeout(120)
TOPIC = "persistent://public/default/txn-admin"


@pytest.fixture(scope="module")
def txn_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    root = tmp_path_factory.mktemp("txn-standalone")
    env = {**os.environ, "BRAID_transactionCoordinatorEnabled": "true"}
    process = StandaloneProcess.start_on_free_ports(
        root / "data", log_path=root / "standalone.log", env=env
    )
    try:
        yield process
    finally:
        process.stop()


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> str:
    code = main(["admin", "--url", url, *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


async def _open_transactions(
    process: StandaloneProcess,
) -> tuple[TxnWire, Txn, Txn, pb.MessageIdData, pb.MessageIdData]:
    """A producing transaction (two messages) and an acknowledging one (one pending ack), left
    open; the wire stays connected (its caller closes it)."""
    wire = await TxnWire.open(process.host, process.port)
    await wire.connect_coordinator()
    await wire.create_producer(TOPIC, 1, "admin-producer")
    for seq in range(2):
        assert (await wire.send(1, "admin-producer", seq, f"plain-{seq}".encode(), None)).type == (
            pb.BaseCommand.SEND_RECEIPT
        )
    producing, acking = await wire.new_txn(), await wire.new_txn()
    assert error_name(await wire.add_partition(producing, TOPIC)) is None
    receipt = await wire.send(1, "admin-producer", 2, b"in-txn", producing)
    assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
    await wire.send(1, "admin-producer", 3, b"in-txn-2", producing)
    assert error_name(await wire.add_subscription(acking, TOPIC, "billing")) is None
    await wire.subscribe(TOPIC, "billing", 7)
    first, second = await wire.next_message(), await wire.next_message()
    acked = first.command.message.message_id
    assert error_name(await wire.ack(7, acked, acking)) is None
    return (
        wire,
        producing,
        acking,
        receipt.send_receipt.message_id,
        second.command.message.message_id,
    )


async def test_coordinator_transaction_buffer_and_pending_ack_stats_over_rest_and_cli(
    capsys: pytest.CaptureFixture[str], txn_standalone: StandaloneProcess
) -> None:
    # The admin calls block this loop; the broker is another process, so nothing waits on it.
    url = txn_standalone.web_url
    wire, producing, acking, first_in_txn, unacked = await _open_transactions(txn_standalone)
    try:
        with AdminClient(url) as admin:
            tx = admin.transactions
            assert tx.coordinators() == {
                "0": {"id": 0, "brokerServiceUrl": txn_standalone.service_url}
            }
            stats = tx.coordinator_stats()
            assert set(stats) == {"0"}
            assert stats["0"]["state"] == "Ready" and stats["0"]["ongoingTxnSize"] == 2
            assert stats["0"]["lowWaterMark"] == producing.least - 1
            assert stats["0"]["recoverEndTime"] >= stats["0"]["recoverStartTime"] > 0
            assert tx.coordinator_stats(0) == stats["0"]

            meta = tx.transaction_metadata(producing.most, producing.least)
            start = f"{first_in_txn.ledgerId}:{first_in_txn.entryId}"
            assert meta["txnId"] == f"({producing.most},{producing.least})"
            assert meta["status"] == "OPEN" and meta["timeoutAt"] == 60_000
            assert meta["producedPartitions"] == {TOPIC: {"startPosition": start, "aborted": False}}
            assert meta["ackedPartitions"] == {}
            acked_meta = tx.transaction_metadata(acking.most, acking.least)
            assert acked_meta["ackedPartitions"] == {
                TOPIC: {"billing": {"cumulativeAckPosition": None}}
            }
            assert set(tx.slow_transactions(0)) == {str(meta["txnId"]), acked_meta["txnId"]}
            assert tx.slow_transactions(3_600_000, coordinator_id=0) == {}

            in_buffer = tx.transaction_in_buffer_stats(TOPIC, producing.most, producing.least)
            assert in_buffer == {"startPosition": start, "aborted": False}
            buffer = tx.transaction_buffer_stats(TOPIC)
            assert buffer["ongoingTxnSize"] == 1 and buffer["state"] == "Ready"
            assert (
                buffer["maxReadPosition"] == f"{first_in_txn.ledgerId}:{first_in_txn.entryId - 1}"
            )
            assert buffer["lowWaterMarks"] is None
            pending = tx.pending_ack_stats(TOPIC, "billing")
            assert pending["ongoingTxnSize"] == 1 and pending["state"] == "Ready"
            assert tx.transaction_in_pending_ack_stats(
                TOPIC, "billing", acking.most, acking.least
            ) == {"cumulativeAckPosition": None}

            def position_state(message_id: pb.MessageIdData) -> str:
                state: str = tx.position_stats_in_pending_ack(
                    TOPIC, "billing", message_id.ledgerId, message_id.entryId
                )["state"]
                return state

            acked_id = first_in_txn.ledgerId, first_in_txn.entryId - 2  # plain-0
            assert tx.position_stats_in_pending_ack(TOPIC, "billing", *acked_id) == {
                "state": "PendingAck"
            }
            assert position_state(unacked) == "NotInPendingAck"

            table = run(
                capsys,
                url,
                "transactions",
                "transaction-metadata",
                "-m",
                "0",
                "-l",
                str(producing.least),
            )
            assert meta["txnId"] in table and "OPEN" in table and TOPIC in table
            as_json = run(capsys, url, "-o", "json", "transactions", "coordinator-stats", "-c", "0")
            assert json.loads(as_json)["ongoingTxnSize"] == 2
            out = run(capsys, url, "transactions", "transaction-buffer-stats", "-t", "txn-admin")
            assert "ongoingTxnSize:" in out and "lowWaterMarks" not in out
            slow = run(capsys, url, "transactions", "slow-transactions", "-t", "1h")
            assert "no transaction open for that long" in slow
            out = run(
                capsys, url, "transactions", "check-position-in-pending-ack-state",
                "-t", TOPIC, "-s", "billing", "-l", str(acked_id[0]), "-e", str(acked_id[1]),
            )  # fmt: skip
            assert "PendingAck" in out

            for txn in (producing, acking):
                assert error_name(await wire.end(txn, pb.TxnAction.COMMIT)) is None
            assert tx.coordinator_stats(0)["ongoingTxnSize"] == 0
            assert tx.transaction_buffer_stats(TOPIC)["ongoingTxnSize"] == 0
            assert tx.position_stats_in_pending_ack(TOPIC, "billing", *acked_id) == {
                "state": "MarkDelete"
            }
            with pytest.raises(AdminNotFoundError, match="not found"):
                tx.transaction_metadata(producing.most, producing.least)
            with pytest.raises(AdminNotFoundError):
                tx.coordinator_stats(5)
            with pytest.raises(AdminNotFoundError, match="subscription"):
                tx.pending_ack_stats(TOPIC, "nobody")
    finally:
        await wire.close()


def test_a_broker_without_transactions_answers_503_and_the_cli_says_why(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    with (
        AdminClient(url) as admin,
        pytest.raises(AdminUnavailableError, match="transactionCoordinatorEnabled"),
    ):
        admin.transactions.coordinator_stats()
    assert main(["admin", "--url", url, "transactions", "coordinator-stats"]) == 1
    assert "transactionCoordinatorEnabled=true" in capsys.readouterr().err
