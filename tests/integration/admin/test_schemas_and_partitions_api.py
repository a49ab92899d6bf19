"""Admin REST for schemas (``/admin/v2/schemas/...``, the namespace
``schemaCompatibilityStrategy``), partitioned topics (``.../partitions``) and HTTP lookup, with
Pulsar's paths, bodies and statuses."""

from __future__ import annotations

import json

import httpx

from braid.cli.standalone import StandaloneServer

SCHEMAS = "/admin/v2/schemas/public/default"
TOPICS = "/admin/v2/persistent/public/default"
STRATEGY = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"


def _avro(*fields: tuple[object, ...]) -> str:
    """An Avro record ``Order``: fields as ``(name, type)`` or ``(name, type, default)``."""
    return json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": f[0], "type": f[1], **({"default": f[2]} if len(f) > 2 else {})}
                for f in fields
            ],
        }
    )


def _payload(definition: str, schema_type: str = "AVRO") -> dict[str, object]:
    return {"type": schema_type, "schema": definition, "properties": {"team": "shop"}}


async def test_schema_versions_upload_get_and_delete(admin: httpx.AsyncClient) -> None:
    assert (await admin.get(f"{SCHEMAS}/orders/schema")).status_code == 404
    v0 = _avro(("item", "string"))
    posted = await admin.post(f"{SCHEMAS}/orders/schema", json=_payload(v0))
    assert posted.status_code == 200, posted.text
    assert posted.json() == {"version": {"version": 0}}
    # The same definition (whitespace aside) is the same version.
    same = await admin.post(f"{SCHEMAS}/orders/schema", json=_payload(json.dumps(json.loads(v0))))
    assert same.json() == {"version": {"version": 0}}
    v1 = _avro(("item", "string"), ("note", ["null", "string"], None))
    assert (await admin.post(f"{SCHEMAS}/orders/schema", json=_payload(v1))).json() == {
        "version": {"version": 1}
    }

    latest = (await admin.get(f"{SCHEMAS}/orders/schema")).json()
    assert latest["version"] == 1 and latest["type"] == "AVRO"
    assert json.loads(latest["data"]) == json.loads(v1)
    assert latest["properties"] == {"team": "shop"}
    first = (await admin.get(f"{SCHEMAS}/orders/schema/0")).json()
    assert json.loads(first["data"]) == json.loads(v0)
    every = (await admin.get(f"{SCHEMAS}/orders/schemas")).json()["getSchemaResponses"]
    assert [v["version"] for v in every] == [0, 1]
    assert (await admin.get(f"{SCHEMAS}/orders/schema/7")).status_code == 404

    deleted = await admin.delete(f"{SCHEMAS}/orders/schema")
    assert deleted.json() == {"version": 2}
    assert (await admin.get(f"{SCHEMAS}/orders/schema")).status_code == 404
    assert (await admin.get(f"{SCHEMAS}/orders/schemas")).status_code == 404
    assert (await admin.delete(f"{SCHEMAS}/orders/schema")).status_code == 404
    # After a delete the history starts again: no check against the deleted versions.
    other = _avro(("item", "int"))
    assert (await admin.post(f"{SCHEMAS}/orders/schema", json=_payload(other))).json() == {
        "version": {"version": 3}
    }
    assert (
        await admin.delete(f"{SCHEMAS}/orders/schema", params={"force": "true"})
    ).status_code == 200
    assert (await admin.get(f"{SCHEMAS}/orders/schema/0")).status_code == 404


async def test_incompatible_or_invalid_uploads_are_refused(admin: httpx.AsyncClient) -> None:
    await admin.post(f"{SCHEMAS}/pay/schema", json=_payload(_avro(("amount", "int"))))
    refused = await admin.post(f"{SCHEMAS}/pay/schema", json=_payload(_avro(("amount", "string"))))
    assert refused.status_code == 409, refused.text
    assert "Incompatible" in refused.json()["reason"]
    other_type = await admin.post(f"{SCHEMAS}/pay/schema", json=_payload("", "STRING"))
    assert other_type.status_code == 409
    assert "exists schema type AVRO, new schema type STRING" in other_type.json()["reason"]
    broken = await admin.post(f"{SCHEMAS}/bad/schema", json=_payload('{"type": "record"}'))
    assert broken.status_code == 400, broken.text
    unknown = await admin.post(f"{SCHEMAS}/bad/schema", json=_payload("", "NOPE"))
    assert unknown.status_code == 400
    assert (await admin.get("/admin/v2/schemas/public/nope/x/schema")).status_code == 404


async def test_namespace_strategy_decides_what_is_compatible(admin: httpx.AsyncClient) -> None:
    assert (await admin.get(STRATEGY)).json() == "UNDEFINED"
    await admin.post(f"{SCHEMAS}/evts/schema", json=_payload(_avro(("n", "int"))))
    assert (await admin.put(STRATEGY, json="ALWAYS_COMPATIBLE")).status_code == 204
    assert (await admin.get(STRATEGY)).json() == "ALWAYS_COMPATIBLE"
    anything = await admin.post(f"{SCHEMAS}/evts/schema", json=_payload(_avro(("n", "string"))))
    assert anything.json() == {"version": {"version": 1}}
    assert (await admin.put(STRATEGY, json="NONE")).status_code == 204  # the old name
    assert (await admin.get(STRATEGY)).json() == "ALWAYS_COMPATIBLE"
    assert (await admin.put(STRATEGY, json="ALWAYS_INCOMPATIBLE")).status_code == 204
    frozen = await admin.post(
        f"{SCHEMAS}/evts/schema", json=_payload(_avro(("n", "string"), ("x", "int", 0)))
    )
    assert frozen.status_code == 409
    assert (await admin.put(STRATEGY, json="SIDEWAYS")).status_code == 400
    assert (await admin.put(STRATEGY, json="UNDEFINED")).status_code == 204
    assert (await admin.get(STRATEGY)).json() == "UNDEFINED"


async def test_partitioned_topic_lifecycle(admin: httpx.AsyncClient) -> None:
    assert (await admin.get(f"{TOPICS}/plain/partitions")).json() == {"partitions": 0}
    assert (await admin.put(f"{TOPICS}/orders/partitions", json=3)).status_code == 204
    assert (await admin.get(f"{TOPICS}/orders/partitions")).json() == {"partitions": 3}
    assert (await admin.put(f"{TOPICS}/orders/partitions", json=3)).status_code == 409
    assert (await admin.put(f"{TOPICS}/orders", json=3)).status_code == 409  # non-partitioned
    assert (await admin.get(f"{TOPICS}/partitioned")).json() == [
        "persistent://public/default/orders"
    ]
    assert (await admin.get(TOPICS)).json() == [
        f"persistent://public/default/orders-partition-{i}" for i in range(3)
    ]
    assert (await admin.post(f"{TOPICS}/orders/partitions", json=2)).status_code == 400
    assert (await admin.post(f"{TOPICS}/orders/partitions", json=5)).status_code == 204
    assert (await admin.get(f"{TOPICS}/orders/partitions")).json() == {"partitions": 5}
    assert len((await admin.get(TOPICS)).json()) == 5
    for bad in (0, -1, "x", True):
        assert (await admin.put(f"{TOPICS}/bad/partitions", json=bad)).status_code == 400
    assert (await admin.put(f"{TOPICS}/x-partition-1/partitions", json=2)).status_code == 400
    await admin.put(f"{TOPICS}/taken")
    assert (await admin.put(f"{TOPICS}/taken/partitions", json=2)).status_code == 409

    assert (await admin.delete(f"{TOPICS}/orders/partitions")).status_code == 204
    assert (await admin.get(f"{TOPICS}/orders/partitions")).json() == {"partitions": 0}
    assert (await admin.get(TOPICS)).json() == ["persistent://public/default/taken"]
    assert (await admin.delete(f"{TOPICS}/orders/partitions")).status_code == 404


async def test_http_lookup_answers_the_broker_and_the_namespace_topics(
    admin: httpx.AsyncClient, standalone: StandaloneServer
) -> None:
    looked = await admin.get("/lookup/v2/topic/persistent/public/default/orders")
    assert looked.status_code == 200, looked.text
    assert looked.json()["brokerUrl"] == standalone.service_url
    assert looked.json()["brokerUrlTls"] == ""
    assert (await admin.get("/lookup/v2/topic/persistent/public/nope/orders")).status_code == 404
    named = await admin.get(
        "/lookup/v2/topic/persistent/public/default/orders", params={"listenerName": "x"}
    )
    assert named.status_code == 404  # no advertised listener of that name
    await admin.put(f"{TOPICS}/listed")
    topics = await admin.get("/admin/v2/namespaces/public/default/topics", params={"mode": "ALL"})
    assert topics.json() == ["persistent://public/default/listed"]
    missing = await admin.get(
        f"{TOPICS}/ghost/partitions", params={"checkAllowAutoCreation": "true"}
    )
    assert missing.json() == {"partitions": 0}  # auto-creation is on: a plain topic
