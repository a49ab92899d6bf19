"""One naming rule at every entry point: REST paths (stated in the OpenAPI schema), LOOKUP,
PRODUCER and SUBSCRIBE; and REST 405s name the allowed methods.

Before, a tenant or namespace of 10,000 characters was created (204) although no topic could ever
be created in it (managed-ledger names are capped at 512).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from braid.cli.standalone import StandaloneServer
from braid.core.names import (
    LOCAL_NAME_PATTERN,
    MAX_LOCAL_NAME_LENGTH,
    MAX_NAMESPACE_LENGTH,
    MAX_TENANT_LENGTH,
    NAMESPACE_PART_PATTERN,
)
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient, request

_LIMITS = {"tenant": MAX_TENANT_LENGTH, "namespace": MAX_NAMESPACE_LENGTH}


def _refused_name(response: httpx.Response, *fragments: str) -> None:
    assert response.status_code == 412, response.text
    body = response.json()
    assert body["category"] == "InvalidInput"
    assert body["retriable"] is False
    assert len(body["reason"]) < 300  # never echoes a 10,000-character name
    for fragment in fragments:
        assert fragment in body["reason"], body["reason"]


async def test_over_long_tenants_and_namespaces_are_refused_with_412(
    admin: httpx.AsyncClient,
) -> None:
    _refused_name(await admin.put(f"/admin/v2/tenants/{'t' * 10_000}"), "at most 64")
    _refused_name(await admin.get(f"/admin/v2/tenants/{'t' * 65}"), "is too long: 65 characters")
    _refused_name(
        await admin.put(f"/admin/v2/namespaces/public/{'n' * 10_000}"),
        "namespace",
        "at most 64",
    )
    assert (await admin.get("/admin/v2/tenants")).json() == ["public"]


async def test_the_longest_valid_names_hold_the_longest_valid_topic(
    admin: httpx.AsyncClient,
) -> None:
    tenant, namespace = "t" * MAX_TENANT_LENGTH, "n" * MAX_NAMESPACE_LENGTH
    topic = "x" * MAX_LOCAL_NAME_LENGTH
    assert (await admin.put(f"/admin/v2/tenants/{tenant}")).status_code == 204
    assert (await admin.put(f"/admin/v2/namespaces/{tenant}/{namespace}")).status_code == 204
    created = await admin.put(f"/admin/v2/persistent/{tenant}/{namespace}/{topic}")
    assert created.status_code == 204, created.text
    scalable = await admin.put(f"/admin/v2/scalable/{tenant}/{namespace}/{topic}")
    assert scalable.status_code == 204, scalable.text
    listed = (await admin.get(f"/admin/v2/persistent/{tenant}/{namespace}")).json()
    assert listed == [f"persistent://{tenant}/{namespace}/{topic}"]
    _refused_name(
        await admin.put(f"/admin/v2/persistent/{tenant}/{namespace}/{topic}y"),
        "is too long: 257 characters, at most 256",
    )


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/admin/v2/tenants/bad%20name", "contains ' '"),
        ("/admin/v2/namespaces/public/%2E%2E", "must not be '..'"),
        ("/admin/v2/persistent/public/default/a%09b", "U+0009"),
        ("/admin/v2/persistent/public/default/%2E%2E", "must not be '..'"),
        ("/admin/v2/scalable/public/b%C3%A4d/t", "contains 'ä'"),
    ],
)
async def test_invalid_characters_get_the_rules_own_message(
    admin: httpx.AsyncClient, path: str, fragment: str
) -> None:
    _refused_name(await admin.put(path), fragment)


async def test_openapi_states_the_rule_on_every_name_parameter(admin: httpx.AsyncClient) -> None:
    document = (await admin.get("/openapi.json")).json()
    seen = 0
    for path, operations in document["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                name = parameter["name"]
                if parameter["in"] != "path" or name not in ("tenant", "namespace", "topic"):
                    continue
                seen += 1
                schema = parameter["schema"]
                if name == "topic":
                    assert schema["maxLength"] == MAX_LOCAL_NAME_LENGTH, path
                    assert schema["pattern"] == LOCAL_NAME_PATTERN, path
                else:
                    assert schema["maxLength"] == _LIMITS[name], path
                    assert schema["pattern"] == NAMESPACE_PART_PATTERN, path
    assert seen > 40


async def test_method_not_allowed_names_the_allowed_methods(admin: httpx.AsyncClient) -> None:
    response = await admin.patch("/admin/v2/tenants/public")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {
        "GET",
        "PUT",
        "POST",
        "DELETE",
    }
    assert response.json()["category"] == "InvalidInput"


async def test_the_binary_protocol_applies_the_same_rule(standalone: StandaloneServer) -> None:
    url = urlsplit(standalone.service_url)
    assert url.hostname is not None and url.port is not None
    raw = await RawClient.open(url.hostname, url.port)
    long_topic = f"persistent://public/default/{'x' * (MAX_LOCAL_NAME_LENGTH + 1)}"
    long_tenant = f"persistent://{'t' * (MAX_TENANT_LENGTH + 1)}/default/x"
    try:
        lookup = await request(raw, commands.lookup(long_topic, 1), 1)
        assert lookup.lookupTopicResponse.error == pb.InvalidTopicName
        assert "at most 256" in lookup.lookupTopicResponse.message
        producer = await request(raw, commands.producer(long_tenant, 1, 2), 2)
        assert producer.type == pb.BaseCommand.ERROR
        assert producer.error.error == pb.InvalidTopicName
        assert "at most 64" in producer.error.message
        subscribe = await request(
            raw, commands.subscribe(long_topic, "s", pb.CommandSubscribe.Exclusive, 1, 3), 3
        )
        assert subscribe.type == pb.BaseCommand.ERROR
        assert subscribe.error.error == pb.InvalidTopicName
    finally:
        await raw.close()
