"""Pulsar's authorization rules (``braid.security.authorization``), decided from names and
policies only: super users, tenant admins, namespace and topic grants, partitions and segments
inheriting their parent's grants, subscription role lists and wildcard roles."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.names import TopicName
from braid.security.authorization import (
    AuthAction,
    AuthorizationPolicy,
    AuthorizationSettings,
    AuthPolicies,
    InvalidAuthorizationSettings,
    InvalidAuthPolicies,
    TopicOperation,
    grant_names,
    parse_actions,
)

pytestmark = pytest.mark.timeout(60)

TOPIC = TopicName.parse("persistent://acme/orders/payments")
POLICY = AuthorizationPolicy(AuthorizationSettings(True, frozenset({"root"})))
PRODUCE = frozenset({AuthAction.PRODUCE})
CONSUME = frozenset({AuthAction.CONSUME})


def _auth(doc: object) -> AuthPolicies:
    return AuthPolicies.from_json(doc)


def test_super_users_and_tenant_admins_may_do_everything_on_the_tenants_topics() -> None:
    nothing = AuthPolicies()
    for op in TopicOperation:
        assert POLICY.allows_topic("root", op, TOPIC, (), nothing)
        assert POLICY.allows_topic("acme-admin", op, TOPIC, ("acme-admin",), nothing)
        assert not POLICY.allows_topic("stranger", op, TOPIC, ("acme-admin",), nothing)
        assert not POLICY.allows_topic(None, op, TOPIC, ("acme-admin",), nothing)


def test_a_namespace_grant_allows_exactly_its_actions_and_lookup() -> None:
    auth = _auth({"namespace_auth": {"writer": ["produce"], "reader": ["consume"]}})
    allows = POLICY.allows_topic
    assert allows("writer", TopicOperation.PRODUCE, TOPIC, (), auth)
    assert not allows("writer", TopicOperation.CONSUME, TOPIC, (), auth)
    assert allows("reader", TopicOperation.CONSUME, TOPIC, (), auth, "sub")
    assert not allows("reader", TopicOperation.PRODUCE, TOPIC, (), auth)
    assert allows("writer", TopicOperation.LOOKUP, TOPIC, (), auth)
    assert allows("reader", TopicOperation.LOOKUP, TOPIC, (), auth)
    assert not allows("writer", TopicOperation.ADMIN, TOPIC, (), auth)
    assert not allows("other", TopicOperation.LOOKUP, TOPIC, (), auth)


def test_a_topic_grant_applies_to_its_partitions_but_not_to_other_topics() -> None:
    auth = AuthPolicies().grant_topic(str(TOPIC), "auditor", CONSUME)
    partition = TopicName.parse("persistent://acme/orders/payments-partition-3")
    other = TopicName.parse("persistent://acme/orders/refunds")
    assert POLICY.allows_topic("auditor", TopicOperation.CONSUME, TOPIC, (), auth)
    assert POLICY.allows_topic("auditor", TopicOperation.CONSUME, partition, (), auth)
    assert not POLICY.allows_topic("auditor", TopicOperation.CONSUME, other, (), auth)


def test_a_segment_inherits_its_scalable_topics_grant() -> None:
    auth = AuthPolicies().grant_topic("topic://acme/orders/stream", "app", PRODUCE)
    segment = TopicName.parse("segment://acme/orders/stream/0000-ffff-7")
    assert grant_names(segment)[-1] == "topic://acme/orders/stream"
    assert POLICY.allows_topic("app", TopicOperation.PRODUCE, segment, (), auth)


def test_a_subscription_role_list_keeps_other_consumers_out() -> None:
    auth = _auth(
        {
            "namespace_auth": {"a": ["consume"], "b": ["consume"]},
            "subscription_auth_roles": {"billing": ["a"]},
        }
    )
    assert POLICY.allows_topic("a", TopicOperation.CONSUME, TOPIC, (), auth, "billing")
    assert not POLICY.allows_topic("b", TopicOperation.CONSUME, TOPIC, (), auth, "billing")
    assert POLICY.allows_topic("b", TopicOperation.CONSUME, TOPIC, (), auth, "other")


def test_wildcard_roles_match_only_when_allowed() -> None:
    auth = _auth({"namespace_auth": {"app-*": ["produce"], "*-reader": ["consume"]}})
    wild = AuthorizationPolicy(AuthorizationSettings(True, allow_wildcards=True))
    assert wild.allows_topic("app-7", TopicOperation.PRODUCE, TOPIC, (), auth)
    assert wild.allows_topic("x-reader", TopicOperation.CONSUME, TOPIC, (), auth)
    assert not wild.allows_topic("x-reader", TopicOperation.PRODUCE, TOPIC, (), auth)
    assert not POLICY.allows_topic("app-7", TopicOperation.PRODUCE, TOPIC, (), auth)


def test_listing_a_namespace_needs_a_consume_grant_on_it() -> None:
    auth = _auth({"namespace_auth": {"r": ["consume"], "w": ["produce"]}})
    assert POLICY.allows_namespace_topics("r", (), auth)
    assert not POLICY.allows_namespace_topics("w", (), auth)
    assert POLICY.allows_namespace_topics("adm", ("adm",), auth)


def test_the_ci_setup_document_parses_and_serialises_in_pulsars_shape() -> None:
    doc = {"namespace_auth": {"anonymous": ["produce", "consume"]}}
    auth = _auth(doc)
    assert auth.to_json() == {
        "namespace_auth": {"anonymous": ["consume", "produce"]},
        "destination_auth": {},
        "subscription_auth_roles": {},
    }


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"namespace_auth": {"r": ["read"]}},
        {"namespace_auth": {"": ["produce"]}},
        {"namespace_auth": {"r": "produce"}},
        {"destination_auth": []},
        {"subscription_auth_roles": {"s": "r"}},
    ],
)
def test_malformed_auth_policies_are_refused_with_a_typed_error(doc: object) -> None:
    with pytest.raises(InvalidAuthPolicies):
        _auth(doc)


def test_an_unknown_provider_stops_start_up() -> None:
    with pytest.raises(InvalidAuthorizationSettings, match="MultiRoles"):
        AuthorizationSettings(True, provider="org.example.MultiRolesProvider")


_roles = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12
).filter(str.strip)
_actions = st.frozensets(st.sampled_from(list(AuthAction)))


@given(
    st.dictionaries(_roles, _actions, max_size=4),
    st.dictionaries(
        st.sampled_from(["persistent://t/n/a", "topic://t/n/b"]),
        st.dictionaries(_roles, _actions, min_size=1, max_size=3),
        max_size=2,
    ),
    st.dictionaries(_roles, st.frozensets(_roles, min_size=1, max_size=3), max_size=2),
)
def test_auth_policies_survive_a_json_round_trip(
    namespace: dict[str, frozenset[AuthAction]],
    topics: dict[str, dict[str, frozenset[AuthAction]]],
    subscriptions: dict[str, frozenset[str]],
) -> None:
    auth = AuthPolicies(namespace, topics, subscriptions)
    again = AuthPolicies.from_json(auth.to_json())
    assert again.to_json() == auth.to_json()
    assert dict(again.namespace_auth) == namespace


@given(_roles, _actions, _actions)
def test_grant_then_revoke_leaves_no_trace(
    role: str, first: frozenset[AuthAction], second: frozenset[AuthAction]
) -> None:
    granted = AuthPolicies().grant_namespace(role, first).grant_namespace(role, second)
    assert granted.namespace_auth[role] == second
    assert granted.revoke_namespace(role).to_json() == AuthPolicies().to_json()
    on_topic = AuthPolicies().grant_topic("persistent://t/n/x", role, first)
    assert on_topic.revoke_topic("persistent://t/n/x", role).to_json() == AuthPolicies().to_json()


def test_actions_are_pulsars_names() -> None:
    assert parse_actions(["produce", "CONSUME", " packages "]) == {
        AuthAction.PRODUCE,
        AuthAction.CONSUME,
        AuthAction.PACKAGES,
    }
    with pytest.raises(InvalidAuthPolicies, match="known: produce"):
        parse_actions(["write"])
