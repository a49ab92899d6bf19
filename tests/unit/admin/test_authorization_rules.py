"""The admin API's authorization table (``braid.admin.authorization.required_access``): every
path maps to what Pulsar requires for it, and a path the table does not know needs a super
user."""

from __future__ import annotations

import pytest

from braid.admin.authorization import Need, required_access
from braid.security.authorization import TopicOperation

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("method", "path", "need"),
    [
        ("GET", "/openapi.json", Need.ANY),
        ("GET", "/admin/v2/clusters", Need.ANY),
        ("PUT", "/admin/v2/clusters/standalone", Need.SUPER_USER),
        ("GET", "/admin/v2/clusters/standalone", Need.SUPER_USER),
        ("GET", "/admin/v2/tenants", Need.SUPER_USER),
        ("PUT", "/admin/v2/tenants/acme", Need.SUPER_USER),
        ("GET", "/admin/v2/tenants/acme", Need.TENANT_ADMIN),
        ("PUT", "/admin/v2/namespaces/acme/orders", Need.TENANT_ADMIN),
        ("POST", "/admin/v2/namespaces/acme/orders/permissions/app", Need.TENANT_ADMIN),
        ("GET", "/admin/v2/namespaces/acme/orders/topics", Need.NAMESPACE_TOPICS),
        ("GET", "/admin/v2/persistent/acme/orders", Need.NAMESPACE_TOPICS),
        ("GET", "/admin/v2/persistent/acme/orders/partitioned", Need.NAMESPACE_TOPICS),
        ("GET", "/admin/v2/scalable/acme/orders", Need.NAMESPACE_TOPICS),
        ("GET", "/admin/v2/brokers/health", Need.SUPER_USER),
        ("GET", "/admin/v2/bookies/all", Need.SUPER_USER),
        ("POST", "/admin/v2/bookie-clusters/internal/promote-cursor", Need.SUPER_USER),
        ("PUT", "/admin/v2/segments/acme/orders/s/0000-ffff-1", Need.SUPER_USER),
        ("GET", "/console", Need.SUPER_USER),
        ("GET", "/admin/v2/something-new/x", Need.SUPER_USER),
    ],
)
def test_each_path_needs_what_pulsar_requires(method: str, path: str, need: Need) -> None:
    assert required_access(method, path).need is need


@pytest.mark.parametrize(
    ("method", "path", "operation", "subscription"),
    [
        ("GET", "/lookup/v2/topic/persistent/acme/orders/t", TopicOperation.LOOKUP, None),
        ("GET", "/admin/v2/persistent/acme/orders/t/partitions", TopicOperation.LOOKUP, None),
        ("PUT", "/admin/v2/persistent/acme/orders/t/partitions", TopicOperation.ADMIN, None),
        ("GET", "/admin/v2/persistent/acme/orders/t/stats", TopicOperation.LOOKUP, None),
        ("PUT", "/admin/v2/persistent/acme/orders/t", TopicOperation.ADMIN, None),
        ("DELETE", "/admin/v2/persistent/acme/orders/t", TopicOperation.ADMIN, None),
        ("POST", "/admin/v2/persistent/acme/orders/t/terminate", TopicOperation.ADMIN, None),
        ("GET", "/admin/v2/persistent/acme/orders/t/permissions", TopicOperation.ADMIN, None),
        ("GET", "/admin/v2/schemas/acme/orders/t/schema", TopicOperation.LOOKUP, None),
        ("POST", "/admin/v2/schemas/acme/orders/t/schema", TopicOperation.ADMIN, None),
        ("GET", "/admin/v2/scalable/acme/orders/t", TopicOperation.LOOKUP, None),
        ("POST", "/admin/v2/scalable/acme/orders/t/split/3", TopicOperation.ADMIN, None),
        (
            "PUT",
            "/admin/v2/scalable/acme/orders/t/subscriptions/billing",
            TopicOperation.CONSUME,
            "billing",
        ),
    ],
)
def test_topic_paths_name_their_topic_operation_and_subscription(
    method: str, path: str, operation: TopicOperation, subscription: str | None
) -> None:
    access = required_access(method, path)
    assert access.need is Need.TOPIC
    assert access.operation is operation
    assert access.subscription == subscription
    assert access.topic is not None and access.topic.local_name == "t"


def test_a_scalable_path_names_the_topic_domain() -> None:
    access = required_access("GET", "/admin/v2/scalable/acme/orders/t")
    assert str(access.topic) == "topic://acme/orders/t"
