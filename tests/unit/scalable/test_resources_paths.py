"""Metadata paths of scalable topics: PIP-468's layout, names encoded so any name is a path."""

from __future__ import annotations

import pytest

from braid.core.names import TopicName
from braid.metadata.paths import validate_path
from braid.scalable.resources import (
    ScalableTopicResources,
    decode_name,
    encode_name,
)


def test_paths_follow_pip_468() -> None:
    topic = TopicName.parse("topic://acme/orders/payments")
    r = ScalableTopicResources
    assert r.topic_path(topic) == "/topics/acme/orders/payments"
    assert r.controller_path(topic) == "/topics/acme/orders/payments/controller"
    assert r.subscription_path(topic, "s1") == "/topics/acme/orders/payments/subscriptions/s1"
    assert (
        r.consumer_path(topic, "s1", "c1")
        == "/topics/acme/orders/payments/subscriptions/s1/consumers/c1"
    )
    assert r.segment_load_path(topic, 7) == "/topics/acme/orders/payments/segments/7/load"


@pytest.mark.parametrize(
    "name", ["plain", "with space", "a/b", ".", "..", "ünïcödé", "%41", "\ue000private", "x" * 300]
)
def test_any_name_encodes_to_one_valid_path_segment(name: str) -> None:
    segment = encode_name(name)
    assert "/" not in segment
    validate_path("/x/" + segment)
    assert decode_name(segment) == name


def test_topic_of_path_recognises_only_topic_nodes() -> None:
    topic = TopicName.parse("topic://acme/orders/ünï%code")
    path = ScalableTopicResources.topic_path(topic)
    assert ScalableTopicResources.topic_of_path(path) == topic
    assert ScalableTopicResources.topic_of_path(path + "/controller") is None
    assert ScalableTopicResources.topic_of_path("/topics/acme/orders") is None
    assert ScalableTopicResources.topic_of_path("/admin/policies/a/b/c") is None


def test_persistent_names_have_no_scalable_path() -> None:
    with pytest.raises(ValueError, match="not a scalable topic"):
        ScalableTopicResources.topic_path(TopicName.parse("persistent://a/b/c"))
