"""Which admin paths are redirected to a topic's owner: the ``/admin/v2`` topic routes, and the
``/admin/v3/transactions`` routes about one topic's buffer or pending acks (not the coordinator
routes, which are about no topic)."""

from __future__ import annotations

from braid.admin.owner_redirect import topic_of_path


def test_v2_topic_routes_name_their_topic_and_partition_metadata_needs_no_owner() -> None:
    assert topic_of_path("/admin/v2/persistent/t/ns/orders/stats") == "persistent://t/ns/orders"
    assert topic_of_path("/admin/v2/persistent/t/ns/orders/partitions") is None


def test_transaction_routes_about_a_topic_name_it_and_coordinator_routes_do_not() -> None:
    base = "/admin/v3/transactions"
    topic = "persistent://t/ns/orders"
    assert topic_of_path(f"{base}/transactionBufferStats/t/ns/orders") == topic
    assert topic_of_path(f"{base}/pendingAckStats/t/ns/orders/billing") == topic
    assert topic_of_path(f"{base}/transactionInBufferStats/t/ns/orders/0/7") == topic
    assert topic_of_path(f"{base}/transactionInPendingAckStats/t/ns/orders/billing/0/7") == topic
    assert topic_of_path(f"{base}/positionStatsInPendingAck/t/ns/orders/billing/3/4") == topic
    assert topic_of_path(f"{base}/coordinatorStats") is None
    assert topic_of_path(f"{base}/transactionMetadata/0/7") is None
    assert topic_of_path(f"{base}/slowTransactions/1000") is None
