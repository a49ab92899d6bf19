"""Mapping a managed ledger back to its topic, to find the broker owning its cursors (ADR 0061)."""

from __future__ import annotations

from braid.broker.topic_names import managed_ledger_name
from braid.clusters.cursor_owners import topic_of_managed_ledger
from braid.core.names import TopicName


def test_a_topics_managed_ledger_maps_back_to_the_topic() -> None:
    for name in (
        "persistent://public/default/orders",
        "persistent://t1/ns-a/with.dots_and-dashes",
        "segment://public/default/orders/0000-7fff-3",
    ):
        topic = TopicName.parse(name)
        assert topic_of_managed_ledger(managed_ledger_name(topic)) == topic


def test_a_managed_ledger_that_is_no_topics_maps_to_none() -> None:
    for name in ("system-ledger", "a/b", "a/b/nodomain/x", "public/default/persistent/"):
        assert topic_of_managed_ledger(name) is None
