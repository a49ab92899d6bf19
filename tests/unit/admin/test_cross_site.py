"""The admin API's cross-site rules as a pure function: which state-changing requests a web page
could send (a simple POST, a foreign Origin, a rebound Host) are refused, and what the broker's
own callers send still passes."""

from __future__ import annotations

import pytest

from braid.admin.cross_site import CrossSitePolicy
from braid.broker.config import BrokerConfig

POLICY = CrossSitePolicy.for_broker(
    BrokerConfig(advertised_address="broker-1.internal"), host_name="node-7"
)
JSON = {"content-type": "application/json"}


def test_the_findings_text_plain_post_from_evil_example_is_refused() -> None:
    headers = {
        "host": "evil.example",
        "origin": "http://evil.example",
        "content-type": "text/plain",
    }
    refused = POLICY.refusal("POST", headers)
    assert refused is not None and refused[0] == 403
    assert "webServiceAllowedHosts" in refused[1]


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "localhost:8080",
        "[::1]:8080",
        "broker-1.internal:8080",
        "node-7",
        "LOCALHOST",
    ],
)
def test_the_brokers_own_names_pass_with_json(host: str) -> None:
    assert POLICY.refusal("POST", {"host": host, **JSON}) is None
    assert POLICY.refusal("DELETE", {"host": host}) is None


def test_a_same_host_page_of_another_site_is_refused_by_its_origin() -> None:
    headers = {"host": "127.0.0.1:8080", "origin": "http://evil.example", **JSON}
    assert POLICY.refusal("PUT", headers) == (
        403,
        "cross-site request refused: Origin 'http://evil.example' is not one of this broker's "
        "names (webServiceAllowedHosts lists more)",
    )
    assert POLICY.refusal("POST", {**headers, "origin": "null"}) is not None
    assert POLICY.refusal("POST", {**headers, "origin": "http://127.0.0.1:8080"}) is None


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_a_post_a_page_could_send_without_a_preflight_is_415(content_type: str | None) -> None:
    headers = {"host": "127.0.0.1:8080"}
    if content_type is not None:
        headers["content-type"] = content_type
    refused = POLICY.refusal("POST", headers)
    assert refused is not None and refused[0] == 415 and "application/json" in refused[1]
    # An Authorization header cannot be sent cross-site without a preflight either.
    assert POLICY.refusal("POST", {**headers, "authorization": "Bearer x"}) is None


def test_json_variants_pass_and_reads_are_never_checked() -> None:
    host = {"host": "127.0.0.1"}
    assert (
        POLICY.refusal("POST", {**host, "content-type": "application/json; charset=utf-8"}) is None
    )
    assert POLICY.refusal("POST", {**host, "content-type": "application/merge-patch+json"}) is None
    assert POLICY.refusal("GET", {"host": "evil.example", "origin": "http://evil.example"}) is None


def test_the_allow_list_adds_names_and_a_star_allows_any_host() -> None:
    listed = CrossSitePolicy.for_broker(
        BrokerConfig(web_service_allowed_hosts=("admin.example.com",)), host_name="n"
    )
    assert listed.refusal("POST", {"host": "admin.example.com", **JSON}) is None
    assert listed.refusal("POST", {"host": "evil.example", **JSON}) is not None
    anything = CrossSitePolicy.for_broker(BrokerConfig(web_service_allowed_hosts=("*",)))
    assert anything.refusal("POST", {"host": "evil.example", **JSON}) is None
    # The content type rule stays even then.
    assert (
        anything.refusal("POST", {"host": "evil.example", "content-type": "text/plain"}) is not None
    )


def test_a_wildcard_bind_address_is_not_a_name() -> None:
    policy = CrossSitePolicy.for_broker(BrokerConfig(bind_address="0.0.0.0"), host_name="n")
    assert policy.refusal("POST", {"host": "0.0.0.0:8080", **JSON}) is not None
