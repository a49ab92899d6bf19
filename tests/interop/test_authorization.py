"""Authorization with the official ``pulsar-client`` and the admin REST API, as Pulsar does it.

One broker per module with token authentication and ``authorizationEnabled=true``
(``superUserRoles=root``): a tenant ``acme`` administered by ``acme-admin`` with namespace
``acme/orders``. Grants made through the admin API (Pulsar's paths and JSON) must open exactly
what they name - produce, consume, one topic, one subscription - and every refusal must reach the
official client as ``AuthorizationError`` and REST callers as 403, the same whether the topic or
namespace exists or not. A tenant that does not exist is ``TopicNotFound`` / 404, as Pulsar
answers it (the official client's own tests expect it).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import httpx
import pulsar
import pytest

from braid.security import tokens
from tests.support.admin_server import serve_admin
from tests.support.broker_stack import BackgroundBroker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

SECRET = b"authorization-test-secret-0123456789"


def _token(role: str) -> str:
    return tokens.create_token(role, secret_key=SECRET)


class Cluster:
    def __init__(self, broker: BackgroundBroker, admin_url: str) -> None:
        self.broker = broker
        self.admin_url = admin_url

    def http(self, role: str | None) -> httpx.Client:
        headers = {"Content-Type": "application/json"}
        if role is not None:
            headers["Authorization"] = f"Bearer {_token(role)}"
        return httpx.Client(base_url=self.admin_url, headers=headers, timeout=10)

    def client(self, role: str, *, http_lookup: bool = False) -> pulsar.Client:
        logger = logging.getLogger("pulsar-authorization-test")
        logger.setLevel(logging.CRITICAL)
        url = self.admin_url if http_lookup else self.broker.service_url
        return pulsar.Client(
            url,
            authentication=pulsar.AuthenticationToken(_token(role)),
            operation_timeout_seconds=5,
            logger=logger,
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    broker = BackgroundBroker(
        tmp_path_factory.mktemp("braid-authz"),
        authentication_enabled=True,
        authentication_providers=(tokens.CLASS_NAME,),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        authorization_enabled=True,
        super_user_roles=("root",),
    ).start()
    try:
        with serve_admin(broker) as admin_url:
            setup = Cluster(broker, admin_url)
            with setup.http("root") as root:
                put = root.put("/admin/v2/tenants/acme", json={"adminRoles": ["acme-admin"]})
                assert put.status_code == 204, put.text
            with setup.http("acme-admin") as admin:
                assert admin.put("/admin/v2/namespaces/acme/orders").status_code == 204
            yield setup
    finally:
        broker.stop()


def _round_trip(client: pulsar.Client, topic: str, subscription: str = "sub") -> None:
    consumer = client.subscribe(topic, subscription)
    producer = client.create_producer(topic)
    producer.send(b"allowed")
    assert consumer.receive(timeout_millis=5000).data() == b"allowed"


def test_super_user_and_tenant_admin_may_produce_and_consume(cluster: Cluster) -> None:
    for role in ("root", "acme-admin"):
        client = cluster.client(role)
        try:
            _round_trip(client, f"persistent://acme/orders/admins-{role}")
        finally:
            client.close()


def test_a_role_without_a_grant_gets_authorization_error_for_producer_and_consumer(
    cluster: Cluster,
) -> None:
    client = cluster.client("nobody")
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://acme/orders/closed")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe("persistent://acme/orders/closed", "sub")
    finally:
        client.close()


def test_namespace_grants_open_exactly_their_actions_and_revoke_closes_them(
    cluster: Cluster,
) -> None:
    topic = "persistent://acme/orders/granted"
    with cluster.http("acme-admin") as admin:
        grant = admin.post("/admin/v2/namespaces/acme/orders/permissions/writer", json=["produce"])
        assert grant.status_code == 204, grant.text
        listed = admin.get("/admin/v2/namespaces/acme/orders/permissions").json()
        assert listed == {"writer": ["produce"]}
    writer = cluster.client("writer")
    try:
        writer.create_producer(topic).send(b"by the writer")
        with pytest.raises(pulsar.AuthorizationError):
            writer.subscribe(topic, "sub")
    finally:
        writer.close()
    with cluster.http("acme-admin") as admin:
        assert (
            admin.delete("/admin/v2/namespaces/acme/orders/permissions/writer").status_code == 204
        )
        assert admin.get("/admin/v2/namespaces/acme/orders/permissions").json() == {}
    again = cluster.client("writer")
    try:
        with pytest.raises(pulsar.AuthorizationError):
            again.create_producer(topic)
    finally:
        again.close()


def test_a_topic_grant_opens_that_topic_only(cluster: Cluster) -> None:
    with cluster.http("acme-admin") as admin:
        url = "/admin/v2/persistent/acme/orders/audited/permissions/auditor"
        assert admin.post(url, json=["produce", "consume"]).status_code == 204
        shown = admin.get("/admin/v2/persistent/acme/orders/audited/permissions").json()
        assert shown == {"auditor": ["consume", "produce"]}
        # A grant the topic does not have (it may come from the namespace) cannot be revoked there.
        missing = admin.delete("/admin/v2/persistent/acme/orders/other/permissions/auditor")
        assert missing.status_code == 412
    auditor = cluster.client("auditor")
    try:
        _round_trip(auditor, "persistent://acme/orders/audited")
        with pytest.raises(pulsar.AuthorizationError):
            auditor.create_producer("persistent://acme/orders/other")
    finally:
        auditor.close()


def test_a_subscription_role_list_keeps_other_consumers_out(cluster: Cluster) -> None:
    topic = "persistent://acme/orders/billing"
    with cluster.http("acme-admin") as admin:
        base = "/admin/v2/namespaces/acme/orders/permissions"
        for role in ("billing-app", "intruder"):
            assert admin.post(f"{base}/{role}", json=["consume"]).status_code == 204
        limited = admin.post(f"{base}/subscription/invoices", json=["billing-app"])
        assert limited.status_code == 204, limited.text
    allowed = cluster.client("billing-app")
    intruder = cluster.client("intruder")
    try:
        allowed.subscribe(topic, "invoices")
        intruder.subscribe(topic, "its-own")
        with pytest.raises(pulsar.AuthorizationError):
            intruder.subscribe(topic, "invoices")
    finally:
        allowed.close()
        intruder.close()


def test_http_lookup_is_authorized_like_the_binary_one(cluster: Cluster) -> None:
    with cluster.http("acme-admin") as admin:
        url = "/admin/v2/namespaces/acme/orders/permissions/http-app"
        assert admin.post(url, json=["produce", "consume"]).status_code == 204
    client = cluster.client("http-app", http_lookup=True)
    try:
        _round_trip(client, "persistent://acme/orders/over-http")
    finally:
        client.close()
    with cluster.http("stranger") as stranger:
        lookup = stranger.get("/lookup/v2/topic/persistent/acme/orders/over-http")
        assert lookup.status_code == 403


@pytest.mark.parametrize(
    "template",
    ["/lookup/v2/topic/persistent/{}", "/admin/v2/persistent/{}/stats"],
    ids=["http-lookup", "stats"],
)
def test_refusals_do_not_tell_whether_a_topic_exists(cluster: Cluster, template: str) -> None:
    root = cluster.client("root")
    try:
        root.create_producer("persistent://acme/orders/exists").close()
    finally:
        root.close()
    names = ["acme/orders/exists", "acme/orders/never-made", "acme/no-ns/t"]
    answers = []
    with cluster.http("stranger") as stranger:
        for name in names:
            answer = stranger.get(template.format(name))
            assert answer.status_code == 403
            answers.append(answer.json()["reason"].replace(name, "NAME"))
        # A tenant that does not exist: Pulsar's 404, before any grant is looked at.
        missing = stranger.get(template.format("no-tenant/ns/t"))
        assert missing.status_code == 404
        assert missing.json()["reason"] == "Tenant does not exist"
    assert len(set(answers)) == 1, answers
    client = cluster.client("stranger")
    try:
        for name in names:
            with pytest.raises(pulsar.AuthorizationError):
                client.create_producer(f"persistent://{name}")
        with pytest.raises(pulsar.TopicNotFound):
            client.create_producer("persistent://no-tenant/ns/t")
    finally:
        client.close()


def test_admin_endpoints_need_tenant_admin_or_super_user(cluster: Cluster) -> None:
    with cluster.http("acme-admin") as admin:
        assert admin.get("/admin/v2/namespaces/acme").status_code == 200
        assert admin.get("/admin/v2/tenants").status_code == 403
        assert admin.put("/admin/v2/tenants/other", json={}).status_code == 403
        assert admin.get("/admin/v2/brokers/health").status_code == 403
        refused = admin.put("/admin/v2/clusters/standalone", json={})
        assert refused.status_code == 403
        assert refused.json()["reason"] == "This operation requires super-user access"
    with cluster.http("stranger") as stranger:
        assert stranger.get("/admin/v2/namespaces/acme").status_code == 403
        assert stranger.put("/admin/v2/namespaces/acme/mine").status_code == 403
        grant = stranger.post("/admin/v2/namespaces/acme/orders/permissions/me", json=["produce"])
        assert grant.status_code == 403
        assert stranger.get("/admin/v2/clusters").status_code == 200
    with cluster.http(None) as anonymous:
        assert anonymous.get("/admin/v2/namespaces/acme").status_code == 401
    with cluster.http("root") as root:
        assert root.get("/admin/v2/tenants").status_code == 200
        assert root.get("/admin/v2/brokers/health").status_code == 200


def test_auth_policies_in_a_namespace_body_are_pulsars_shape(cluster: Cluster) -> None:
    body = {
        "auth_policies": {"namespace_auth": {"ci-app": ["produce", "consume"]}},
        "replication_clusters": ["standalone"],
    }
    with cluster.http("acme-admin") as admin:
        assert admin.put("/admin/v2/namespaces/acme/ci", json=body).status_code == 204
        bad = {"auth_policies": {"namespace_auth": {"ci-app": ["write"]}}}
        assert admin.put("/admin/v2/namespaces/acme/bad", json=bad).status_code == 400
    client = cluster.client("ci-app")
    try:
        _round_trip(client, "persistent://acme/ci/from-body")
    finally:
        client.close()


def test_braid_admin_grants_revokes_and_shows_permissions_as_pulsar_admin_does(
    cluster: Cluster,
) -> None:
    import io
    import json

    from braid.cli.admin import run_admin
    from braid.cli.main import build_parser

    def admin(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        common = ["admin", "--url", cluster.admin_url, "--token", _token("acme-admin")]
        code = run_admin(build_parser().parse_args([*common, *args]), out)
        return code, out.getvalue()

    topic = "persistent://acme/orders/cli"
    ns_grant = ("namespaces", "grant-permission", "acme/orders", "--role", "cli-ns")
    assert admin(*ns_grant, "--actions", "consume")[0] == 0
    assert (
        admin(*("topics", "grant-permission", topic, "--role", "cli-t"), "--actions", "produce")[0]
        == 0
    )
    code, out = admin("-o", "json", "namespaces", "permissions", "acme/orders")
    assert code == 0 and json.loads(out)["cli-ns"] == ["consume"]
    code, out = admin("-o", "json", "topics", "permissions", topic)
    assert code == 0 and json.loads(out)["cli-t"] == ["produce"]
    producer = cluster.client("cli-t")
    try:
        producer.create_producer(topic).send(b"granted by the CLI")
    finally:
        producer.close()
    assert admin("topics", "revoke-permission", topic, "--role", "cli-t")[0] == 0
    assert admin("namespaces", "revoke-permission", "acme/orders", "--role", "cli-ns")[0] == 0
    code, out = admin("-o", "json", "topics", "permissions", topic)
    assert "cli-t" not in json.loads(out) and "cli-ns" not in json.loads(out)
    with pytest.raises(SystemExit):  # not an action: the parser refuses it, as usage errors
        admin(*ns_grant, "--actions", "write")
