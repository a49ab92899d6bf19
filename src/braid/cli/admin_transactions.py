"""``braid admin transactions``: Pulsar's transaction stats (``pulsar-admin transactions``'s
commands and options) over ``/admin/v3/transactions`` - coordinators, one transaction's
metadata, slow transactions, a topic's transaction buffer and a subscription's pending acks. One
call of :attr:`braid.admin.client.AdminClient.transactions` each; ``--output json`` prints
Pulsar's JSON unchanged.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from braid.cli import admin_output as out
from braid.cli.admin_commands import Printer, _persistent_name
from braid.cli.admin_parser import duration_ms, non_negative

if TYPE_CHECKING:
    from braid.admin.client import AdminClient

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
    CommandAdder = Callable[..., argparse.ArgumentParser]
    GroupAdder = Callable[[str, str, str, str], SubParsers]


def _document(p: Printer, document: dict[str, Any]) -> None:
    """A flat document as ``key: value`` lines (JSON with --output json)."""
    if p.json:
        p.data(document)
        return
    p.line(out.key_values(sorted(document.items())))


def _transactions_table(p: Printer, found: dict[str, Any], empty: str) -> None:
    if p.json:
        p.data(found)
        return
    if not found:
        p.line(empty)
        return
    rows = [
        [
            txn,
            meta.get("status"),
            meta.get("openTimestamp"),
            meta.get("timeoutAt"),
            ",".join(meta.get("producedPartitions") or {}) or "-",
            ",".join(
                f"{topic}/{sub}"
                for topic, subs in (meta.get("ackedPartitions") or {}).items()
                for sub in subs
            )
            or "-",
        ]
        for txn, meta in sorted(found.items())
    ]
    p.line(out.table(["txn", "status", "opened", "timeout ms", "produced", "acked"], rows))


def tx_coordinators(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    found = admin.transactions.coordinators()
    if p.json:
        p.data(found)
        return
    rows = [[c["id"], c["brokerServiceUrl"]] for c in found.values()]
    p.line(out.table(["coordinator", "broker"], rows) if rows else "no coordinator served here")


def tx_coordinator_stats(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    stats = admin.transactions.coordinator_stats(args.coordinator_id)
    if p.json or args.coordinator_id is not None:
        _document(p, stats)
        return
    columns = ["state", "leastSigBits", "lowWaterMark", "ongoingTxnSize"]
    rows = [[tc, *(s.get(k) for k in columns)] for tc, s in sorted(stats.items())]
    p.line(out.table(["coordinator", *columns], rows) if rows else "no coordinator served here")


def tx_metadata(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    meta = admin.transactions.transaction_metadata(args.most_sig_bits, args.least_sig_bits)
    _transactions_table(p, {meta["txnId"]: meta}, "")


def tx_slow(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    found = admin.transactions.slow_transactions(args.time, args.coordinator_id)
    _transactions_table(p, found, "no transaction open for that long")


def tx_in_buffer(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _document(
        p,
        admin.transactions.transaction_in_buffer_stats(
            _persistent_name(args.topic), args.most_sig_bits, args.least_sig_bits
        ),
    )


def tx_in_pending_ack(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _document(
        p,
        admin.transactions.transaction_in_pending_ack_stats(
            _persistent_name(args.topic), args.sub_name, args.most_sig_bits, args.least_sig_bits
        ),
    )


def tx_buffer_stats(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    stats = admin.transactions.transaction_buffer_stats(_persistent_name(args.topic))
    if not args.low_water_mark:
        stats.pop("lowWaterMarks", None)
    _document(p, stats)


def tx_pending_ack_stats(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    stats = admin.transactions.pending_ack_stats(_persistent_name(args.topic), args.sub_name)
    if not args.low_water_mark:
        stats.pop("lowWaterMarks", None)
    _document(p, stats)


def tx_position(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    _document(
        p,
        admin.transactions.position_stats_in_pending_ack(
            _persistent_name(args.topic),
            args.sub_name,
            args.ledger_id,
            args.entry_id,
            args.batch_index,
        ),
    )


def _txn_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m", "--most-sig-bits", type=non_negative, required=True, help="the id's first number"
    )
    parser.add_argument(
        "-l", "--least-sig-bits", type=non_negative, required=True, help="the id's second number"
    )


def _topic(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t", "--topic", required=True, help="persistent topic (short names: public/default)"
    )


def _sub(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "--sub-name", required=True, help="the subscription")


def _coordinator(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "-c", "--coordinator-id", type=non_negative, required=required, help="one coordinator"
    )


_GROUP_EXAMPLES = """\
  braid admin transactions coordinator-stats
  braid admin transactions slow-transactions -t 30s
  braid admin transactions transaction-metadata -m 0 -l 12
  braid admin transactions transaction-buffer-stats -t persistent://public/default/orders
  braid admin transactions pending-ack-stats -t orders -s billing
  braid admin -o json transactions transaction-in-buffer-stats -t orders -m 0 -l 12
"""


def add_transactions_group(group: GroupAdder, command: CommandAdder) -> None:
    """Add ``braid admin transactions`` and its commands (pulsar-admin's names and options)."""
    commands = group(
        "transactions",
        "transactions: coordinators, one transaction, slow ones, buffers and pending acks",
        "Pulsar's transaction stats (/admin/v3/transactions), on a broker running with "
        "transactionCoordinatorEnabled=true (else every command fails with HTTP 503). A "
        "transaction id is two numbers, (most,least): -m most -l least. See docs/broker.md "
        "(Transactions) and docs/admin.md.",
        _GROUP_EXAMPLES,
    )
    command(
        commands,
        "list-coordinators",
        tx_coordinators,
        "list the transaction coordinators of the cluster and the broker serving each",
    )
    _coordinator(
        command(
            commands,
            "coordinator-stats",
            tx_coordinator_stats,
            "show coordinator stats: state, sequence, low watermark, open transactions",
            examples="  braid admin transactions coordinator-stats -c 0\n",
        )
    )
    p = command(
        commands,
        "transaction-metadata",
        tx_metadata,
        "show one transaction: status, open time, timeout, partitions and subscriptions",
        examples="  braid admin transactions transaction-metadata -m 0 -l 12\n",
    )
    _txn_args(p)
    p = command(
        commands,
        "slow-transactions",
        tx_slow,
        "list the transactions open for longer than --time",
        examples="  braid admin transactions slow-transactions -t 5m -c 0\n",
    )
    p.add_argument(
        "-t", "--time", type=duration_ms, required=True, help="1s, 10s, 1m, 5h, 3d (bare: s)"
    )
    _coordinator(p)
    p = command(
        commands,
        "transaction-in-buffer-stats",
        tx_in_buffer,
        "show one transaction in a topic's transaction buffer (start position, aborted)",
        examples="  braid admin transactions transaction-in-buffer-stats -t orders -m 0 -l 12\n",
    )
    _txn_args(p)
    _topic(p)
    p = command(
        commands,
        "transaction-in-pending-ack-stats",
        tx_in_pending_ack,
        "show one transaction in a subscription's pending acks (cumulative ack position)",
        examples="  braid admin transactions transaction-in-pending-ack-stats -t orders "
        "-s billing -m 0 -l 12\n",
    )
    _txn_args(p)
    _topic(p)
    _sub(p)
    p = command(
        commands,
        "transaction-buffer-stats",
        tx_buffer_stats,
        "show a topic's transaction buffer: max read position, open transactions, snapshot, "
        "what its last load replayed",
        examples="  braid admin transactions transaction-buffer-stats -t orders\n",
    )
    _topic(p)
    p.add_argument("-l", "--low-water-mark", action="store_true", help="include lowWaterMarks")
    p = command(
        commands,
        "pending-ack-stats",
        tx_pending_ack_stats,
        "show a subscription's pending acks: transactions holding acks, recovery times",
        examples="  braid admin transactions pending-ack-stats -t orders -s billing\n",
    )
    _topic(p)
    _sub(p)
    p.add_argument("-l", "--low-water-mark", action="store_true", help="include lowWaterMarks")
    p = command(
        commands,
        "check-position-in-pending-ack-state",
        tx_position,
        "say whether a message is held by a pending ack (PendingAck), acknowledged "
        "(MarkDelete) or neither (NotInPendingAck)",
        examples="  braid admin transactions check-position-in-pending-ack-state -t orders "
        "-s billing -l 12 -e 3\n",
    )
    _topic(p)
    _sub(p)
    p.add_argument("-l", "--ledger-id", type=non_negative, required=True, help="its ledger")
    p.add_argument("-e", "--entry-id", type=non_negative, required=True, help="its entry")
    p.add_argument("-b", "--batch-index", type=non_negative, help="a message of a batch")


__all__ = ["add_transactions_group"]
