"""``AdminClient`` against a real ``braid standalone`` process: every method, and every failure
arriving as the right :mod:`braid.core.errors` category with the server's reason."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from braid.admin import AdminClient as LazyAdminClient
from braid.admin.client import (
    AdminAlreadyExistsError,
    AdminClient,
    AdminError,
    AdminIllegalStateError,
    AdminInvalidInputError,
    AdminNotFoundError,
    AdminUnavailableError,
)
from braid.admin.client_errors import error_from_response
from braid.core.errors import (
    AlreadyExistsError,
    ConflictError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    TopicTerminatedError,
)
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import MAX_LOCAL_NAME_LENGTH
from tests.support.standalone import free_port


def _layout(doc: dict[str, object]) -> SegmentLayout:
    """The answer must be a valid ScalableTopicMetadata (tiling, references, epochs)."""
    return layout_from_metadata(doc)


def _active_ranges(layout: SegmentLayout) -> dict[int, tuple[int, int]]:
    return {s.segment_id: (s.hash_range.start, s.hash_range.end) for s in layout.active_segments}


def test_the_package_exports_the_client_lazily() -> None:
    assert LazyAdminClient is AdminClient


def test_health_and_clusters(admin_client: AdminClient) -> None:
    assert admin_client.health() == {"status": "ok"}
    assert admin_client.broker_health() == "ok"
    assert admin_client.clusters() == ["standalone"]


# --- tenants and namespaces -------------------------------------------------------------------


def test_tenant_lifecycle(admin_client: AdminClient) -> None:
    tenants = admin_client.tenants
    tenants.create("acme", admin_roles=["ops"])
    assert "acme" in tenants.list()
    assert tenants.get("acme") == {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    tenants.update("acme", admin_roles=["dev"], allowed_clusters=["standalone"])
    assert tenants.get("acme") == {"adminRoles": ["dev"], "allowedClusters": ["standalone"]}
    with pytest.raises(AdminAlreadyExistsError, match="already exists") as exists:
        tenants.create("acme")
    assert isinstance(exists.value, AlreadyExistsError)
    assert exists.value.status == 409
    tenants.delete("acme")
    with pytest.raises(NotFoundError, match="acme") as missing:
        tenants.get("acme")
    assert missing.value.status == 404
    assert "(HTTP 404)" in str(missing.value)


def test_tenant_errors(admin_client: AdminClient) -> None:
    with pytest.raises(InvalidInputError, match="bad name") as invalid:
        admin_client.tenants.create("bad name")
    assert invalid.value.status == 412  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="clusters do not exist"):
        admin_client.tenants.create("t-unknown-cluster", allowed_clusters=["mars"])
    admin_client.tenants.create("busy")
    admin_client.namespaces.create("busy/ns")
    with pytest.raises(IllegalStateError, match="still has namespaces") as in_use:
        admin_client.tenants.delete("busy")
    assert not in_use.value.retriable
    with pytest.raises(InvalidInputError, match="tenant name"):
        admin_client.tenants.get("a/b")  # refused before any request


def test_namespace_lifecycle_and_deduplication(admin_client: AdminClient) -> None:
    namespaces = admin_client.namespaces
    admin_client.tenants.create("shop")
    namespaces.create("shop/orders", {"deduplicationEnabled": True})
    namespaces.create("shop/logs")
    assert namespaces.list("shop") == ["shop/logs", "shop/orders"]
    assert namespaces.get("shop/orders")["deduplicationEnabled"] is True
    assert namespaces.get_deduplication("shop/logs") is None
    namespaces.set_deduplication("shop/logs", True)
    assert namespaces.get_deduplication("shop/logs") is True
    namespaces.set_deduplication("shop/logs", False)
    assert namespaces.get_deduplication("shop/logs") is False
    namespaces.remove_deduplication("shop/logs")
    assert namespaces.get_deduplication("shop/logs") is None
    namespaces.delete("shop/logs")
    assert namespaces.list("shop") == ["shop/orders"]
    with pytest.raises(AdminNotFoundError, match="shop/logs"):
        namespaces.get("shop/logs")
    with pytest.raises(AdminNotFoundError, match="ghost"):
        namespaces.create("ghost/ns")
    with pytest.raises(AdminAlreadyExistsError):
        namespaces.create("shop/orders")
    with pytest.raises(AdminInvalidInputError, match="retention_policies"):
        namespaces.create("shop/bad", {"retention_policies": 5})
    with pytest.raises(InvalidInputError, match="tenant/namespace"):
        namespaces.get("no-slash")


# --- persistent topics ------------------------------------------------------------------------


def test_persistent_topic_lifecycle(admin_client: AdminClient) -> None:
    topics = admin_client.topics
    topics.create("persistent://public/default/events")
    topics.create("public/default/audit")  # short forms mean persistent://
    listed = topics.list("public/default")
    assert {"persistent://public/default/events", "persistent://public/default/audit"} <= set(
        listed
    )
    stats = topics.stats("events")
    assert stats["msgInCounter"] == 0 and stats["terminated"] is False
    last = topics.terminate("events")
    assert set(last) >= {"ledgerId", "entryId"}
    assert topics.stats("events")["terminated"] is True
    topics.delete("events")
    topics.delete("audit")
    assert "persistent://public/default/events" not in topics.list("public/default")
    with pytest.raises(AdminNotFoundError):
        topics.stats("events")
    topics.create("dup")
    with pytest.raises(AlreadyExistsError):
        topics.create("dup")
    with pytest.raises(InvalidInputError, match="persistent"):
        topics.create("topic://public/default/not-persistent")


# --- scalable topics --------------------------------------------------------------------------


def test_create_get_list_and_delete(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("topic://public/default/orders", segments=4, properties={"team": "pay"})
    assert "topic://public/default/orders" in scalable.list("public/default")
    layout = _layout(scalable.get("orders"))
    assert layout.epoch == 0
    assert len(layout.active_segments) == 4
    assert dict(layout.properties) == {"team": "pay"}
    scalable.create("public/default/single")  # one segment by default
    assert len(_layout(scalable.get("single")).active_segments) == 1
    with pytest.raises(AdminAlreadyExistsError, match="already exists"):
        scalable.create("orders")
    scalable.delete("single")
    scalable.delete("orders", force=True)
    assert "topic://public/default/orders" not in scalable.list("public/default")
    with pytest.raises(AdminNotFoundError, match="does not exist"):
        scalable.get("orders")
    with pytest.raises(AdminNotFoundError):
        scalable.delete("orders")


def test_create_errors(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    with pytest.raises(AdminNotFoundError, match="namespace public/nowhere"):
        scalable.create("topic://public/nowhere/t")
    with pytest.raises(AdminNotFoundError, match="public/nowhere"):
        scalable.list("public/nowhere")
    with pytest.raises(InvalidInputError, match="segments"):
        scalable.create("t-zero", segments=0)
    with pytest.raises(InvalidInputError, match="topic://"):
        scalable.create("persistent://public/default/wrong-domain")
    with pytest.raises(InvalidInputError):
        scalable.get("topic://public/default/has space")


def test_a_name_too_long_for_future_segments_is_refused_whole(admin_client: AdminClient) -> None:
    # The naming rule caps a local name at 256 characters, so that the longest ledger name any
    # segment can ever need (public/default/segment/<name>/ffff-ffff-<2^63-1>) fits in 512: a
    # later split can never record itself and then fail to create its children.
    scalable = admin_client.scalable_topics
    longest = "n" * MAX_LOCAL_NAME_LENGTH
    scalable.create(longest)
    layout = _layout(scalable.split(longest, 0))
    assert len(layout.active_segments) == 2
    # The client applies the same rule before sending (the server's 412 for it is pinned in
    # test_names_api.py).
    with pytest.raises(InvalidInputError, match=r"is too long: 257 characters, at most 256"):
        scalable.create("n" * (MAX_LOCAL_NAME_LENGTH + 1))
    assert f"topic://public/default/{'n' * 257}" not in scalable.list("public/default")


def test_split_at_the_midpoint_creates_two_children_and_bumps_the_epoch(
    admin_client: AdminClient,
) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("split-mid", segments=2)
    before = _layout(scalable.get("split-mid"))
    layout = _layout(scalable.split("split-mid", 1))
    assert layout.epoch == before.epoch + 1
    parent = layout.segment(1)
    assert not parent.is_active
    assert sorted(parent.child_ids) == [2, 3]
    assert _active_ranges(layout) == {0: (0, 0x7FFF), 2: (0x8000, 0xBFFF), 3: (0xC000, 0xFFFF)}
    assert _layout(scalable.get("split-mid")).epoch == layout.epoch


def test_split_at_an_explicit_hash(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("split-at", segments=2)
    layout = _layout(scalable.split("split-at", 1, split_hash=0x9C40))
    assert _active_ranges(layout)[2] == (0x8000, 0x9C3F)
    assert _active_ranges(layout)[3] == (0x9C40, 0xFFFF)


def test_split_errors(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("split-bad", segments=2)
    scalable.split("split-bad", 1)
    with pytest.raises(AdminIllegalStateError, match="sealed") as sealed:
        scalable.split("split-bad", 1)
    assert isinstance(sealed.value, IllegalStateError) and not sealed.value.retriable
    with pytest.raises(AdminNotFoundError, match="segment 99"):
        scalable.split("split-bad", 99)
    with pytest.raises(InvalidInputError, match="split hash"):  # 400: the request is wrong
        scalable.split("split-bad", 0, split_hash=0x9000)  # outside segment 0's range
    with pytest.raises(InvalidInputError, match="splitHash"):
        scalable.split("split-bad", 0, split_hash=0x10000)  # refused by the REST layer
    with pytest.raises(AdminNotFoundError):
        scalable.split("no-such-topic", 0)
    with pytest.raises(InvalidInputError, match="segment id"):
        scalable.split("split-bad", -1)


def test_merge_two_and_three_segments(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("merging", segments=5)
    initial = _layout(scalable.get("merging"))
    two = _layout(scalable.merge("merging", [0, 1]))
    assert two.epoch == 1
    assert _active_ranges(two)[5] == (0, initial.segment(1).hash_range.end)
    assert sorted(two.segment(5).parent_ids) == [0, 1]
    three = _layout(scalable.merge("merging", [4, 2, 3]))  # any order, hash-adjacent
    assert three.epoch == 2
    child = three.segment(6)
    assert sorted(child.parent_ids) == [2, 3, 4]
    assert (child.hash_range.start, child.hash_range.end) == (
        two.segment(2).hash_range.start,
        0xFFFF,
    )
    assert sorted(_active_ranges(three)) == [5, 6]
    assert all(not three.segment(i).is_active for i in range(5))


def test_merge_errors(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("merge-bad", segments=3)
    with pytest.raises(AdminIllegalStateError, match="not adjacent"):
        scalable.merge("merge-bad", [0, 2])
    with pytest.raises(IllegalStateError, match="twice"):
        scalable.merge("merge-bad", [0, 0, 1])
    with pytest.raises(AdminNotFoundError, match="segment 7"):
        scalable.merge("merge-bad", [0, 7])
    with pytest.raises(InvalidInputError, match="two or more"):
        scalable.merge("merge-bad", [0])
    scalable.merge("merge-bad", [0, 1])
    with pytest.raises(AdminIllegalStateError, match="sealed"):
        scalable.merge("merge-bad", [1, 2])


def test_subscriptions_and_seek(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("subs", segments=2)
    scalable.create_subscription("subs", "billing", initial_position="earliest")
    scalable.create_subscription("subs", "audit", subscription_type="queue")
    scalable.create_subscription("subs", "ckpt", subscription_type="CHECKPOINT")
    stats = scalable.stats("subs")
    assert {name: sub["type"] for name, sub in stats["subscriptions"].items()} == {
        "billing": "STREAM",
        "audit": "QUEUE",
        "ckpt": "CHECKPOINT",
    }
    for segment in stats["segments"].values():
        assert set(segment["topicStats"]["subscriptions"]) == {"billing", "audit", "ckpt"}
    # A split carries every subscription to the children.
    layout = _layout(scalable.split("subs", 0))
    children = layout.segment(0).child_ids
    stats = scalable.stats("subs")
    for child in children:
        subscriptions = stats["segments"][str(child)]["topicStats"]["subscriptions"]
        assert set(subscriptions) == {"billing", "audit", "ckpt"}
    scalable.seek("subs", "billing", int(time.time() * 1000) - 60_000)
    with pytest.raises(InvalidInputError, match="STREAM subscription"):
        scalable.create_subscription("subs", "billing", subscription_type="QUEUE")
    scalable.delete_subscription("subs", "audit")
    stats = scalable.stats("subs")
    assert set(stats["subscriptions"]) == {"billing", "ckpt"}
    assert all("audit" not in s["topicStats"]["subscriptions"] for s in stats["segments"].values())
    with pytest.raises(InvalidInputError, match="subscription type"):
        scalable.create_subscription("subs", "x", subscription_type="FANOUT")
    with pytest.raises(InvalidInputError, match="timestamp"):
        scalable.seek("subs", "billing", -5)
    with pytest.raises(AdminNotFoundError):
        scalable.create_subscription("no-such-topic", "billing")


def test_stats_describe_the_dag_and_the_controller(admin_client: AdminClient) -> None:
    scalable = admin_client.scalable_topics
    scalable.create("described", segments=2)
    scalable.split("described", 0)
    stats = scalable.stats("described")
    assert stats["topic"] == "topic://public/default/described"
    assert stats["epoch"] == 1
    assert (stats["totalSegments"], stats["activeSegments"], stats["sealedSegments"]) == (4, 3, 1)
    assert stats["segments"]["0"]["state"] == "SEALED"
    assert sorted(stats["segments"]["0"]["childIds"]) == [2, 3]
    assert stats["segments"]["0"]["topicStats"]["terminated"] is True
    assert stats["controller"]["isLeader"] is True
    assert stats["controller"]["leaderBrokerUrl"].startswith("pulsar://127.0.0.1:")


# --- failures without an answer, and the error mapping -----------------------------------------


def test_no_broker_at_the_url_is_unavailable_and_retriable() -> None:
    with (
        AdminClient(f"http://127.0.0.1:{free_port()}", timeout=5.0) as client,
        pytest.raises(AdminUnavailableError, match="no broker answers") as refused,
    ):
        client.tenants.list()
    assert isinstance(refused.value, ServiceUnavailableError)
    assert refused.value.retriable
    assert refused.value.status is None


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "ftp://host", "http://", ""])
def test_an_invalid_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidInputError, match="admin URL"):
        AdminClient(url)


def _answer(status: int, body: object) -> httpx.Response:
    request = httpx.Request("POST", "http://broker/admin/v2/x")
    return httpx.Response(status, json=body, request=request)


@pytest.mark.parametrize(
    ("status", "category", "expected"),
    [
        (409, "AlreadyExists", AlreadyExistsError),
        (409, "Conflict", ConflictError),
        (409, "IllegalState", IllegalStateError),
        (409, "TopicTerminated", TopicTerminatedError),
        (409, None, ConflictError),  # a server that does not name the category
        (412, "InvalidInput", InvalidInputError),
        (422, None, InvalidInputError),
        (503, "ServiceUnavailable", ServiceUnavailableError),
        (404, "NotFound", NotFoundError),
    ],
)
def test_statuses_and_categories_map_to_core_errors(
    status: int, category: str | None, expected: type[Exception]
) -> None:
    body = {"reason": "why"} | ({"category": category} if category else {})
    error = error_from_response(_answer(status, body))
    assert isinstance(error, expected) and isinstance(error, AdminError)
    assert (error.reason, error.status) == ("why", status)


def test_a_server_error_keeps_its_reason_and_is_not_mistyped() -> None:
    error = error_from_response(_answer(500, {"reason": "boom", "category": "NotFound"}))
    assert type(error) is AdminError
    assert str(error) == "boom (HTTP 500)"


def test_the_client_and_the_cli_parser_load_without_the_server_stack() -> None:
    """``import braid.admin.client`` and ``from braid.admin import AdminClient`` bring in httpx
    and braid.core only; building the ``braid`` parser (``braid --help``) not even httpx."""
    probe = """
import sys
from braid.admin import AdminClient
import braid.admin.client
server = [m for m in ("fastapi", "uvicorn", "starlette", "braid.broker", "braid.scalable")
          if m in sys.modules]
assert not server, server
for name in list(sys.modules):
    if name == "httpx" or name.startswith(("httpx.", "braid.admin.client")):
        del sys.modules[name]
import braid.cli.main
braid.cli.main.build_parser()
assert "httpx" not in sys.modules and "fastapi" not in sys.modules
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr
