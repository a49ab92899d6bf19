"""Authorization as Pulsar's ``PulsarAuthorizationProvider`` decides it: the pure rules.

What a role may do follows from three things only, all read by the caller and passed in:

* ``superUserRoles`` (broker configuration): a super user may do everything;
* the tenant's ``adminRoles`` (``TenantInfo``): a tenant admin administers the tenant's
  namespaces and topics, and may produce and consume on them;
* the namespace's ``auth_policies`` (:class:`AuthPolicies`, stored in the namespace ``Policies``
  JSON under Pulsar's key and shape): ``namespace_auth`` grants actions to roles on every topic
  of the namespace, ``destination_auth`` on one topic (a partition inherits its partitioned
  topic's grants, a segment its scalable topic's), and ``subscription_auth_roles`` limits who may
  consume from a named subscription.

With ``authorizationAllowWildcardsMatching=true`` a granted role ``app-*`` matches every role
that starts with ``app-``, and ``*-reader`` every role that ends with ``-reader``.

Invariants: a check never depends on whether the topic exists (only on names and policies), so a
refusal tells nothing about the broker's data; a missing role (authentication off) is allowed
nothing; the models are immutable and validated, and serialise to exactly Pulsar's JSON.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from braid.core.errors import AuthorizationError, InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partitioned_topic_of

#: The one provider Braid implements (Pulsar's default ``authorizationProvider``).
PROVIDER_CLASS = "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"

#: The key of the permissions in a namespace's ``Policies`` JSON.
POLICIES_KEY = "auth_policies"


class AuthAction(enum.StrEnum):
    """Pulsar's ``AuthAction``: what a grant allows."""

    PRODUCE = "produce"
    CONSUME = "consume"
    FUNCTIONS = "functions"
    SOURCES = "sources"
    SINKS = "sinks"
    PACKAGES = "packages"


class TopicOperation(enum.StrEnum):
    """What a request does to a topic (the subset of Pulsar's ``TopicOperation`` checked)."""

    LOOKUP = "lookup"  # LOOKUP, PARTITIONED_METADATA, schema reads, DAG watch, stats
    PRODUCE = "produce"  # PRODUCER, GET_OR_CREATE_SCHEMA
    CONSUME = "consume"  # SUBSCRIBE, scalable consumer registration, subscription admin
    ADMIN = "admin"  # create, delete, terminate, compact, policies, permissions


class InvalidAuthPolicies(InvalidInputError):
    """An ``auth_policies`` document, an action or a role that is not valid."""


class InvalidAuthorizationSettings(InvalidInputError):
    """``authorizationProvider`` names a provider Braid does not have."""


class AuthorizationDenied(AuthorizationError):
    """The role may not do this (the message is what the peer sees: it names only what the
    peer asked for)."""


def parse_actions(values: Iterable[object]) -> frozenset[AuthAction]:
    """Pulsar's action names (``produce``, ``consume``, ...) as a set.

    Raises:
        InvalidAuthPolicies: a value is not an action name.
    """
    actions: set[AuthAction] = set()
    for value in values:
        try:
            actions.add(AuthAction(str(value).strip().lower()))
        except ValueError:
            known = ", ".join(a.value for a in AuthAction)
            raise InvalidAuthPolicies(f"unknown action {value!r} (known: {known})") from None
    return frozenset(actions)


def check_role(role: object) -> str:
    """A role name to grant to: a non-empty string without control characters."""
    if not isinstance(role, str) or not role.strip():
        raise InvalidAuthPolicies(f"a role must be a non-empty string, got {role!r}")
    if any(ord(c) < 32 for c in role) or len(role) > 1024:
        raise InvalidAuthPolicies("a role may not contain control characters or exceed 1024")
    return role


def _frozen_grants(doc: object, what: str) -> Mapping[str, frozenset[AuthAction]]:
    if doc is None:
        return MappingProxyType({})
    if not isinstance(doc, dict):
        raise InvalidAuthPolicies(f"{what} must be an object of role -> actions, got {doc!r}")
    grants: dict[str, frozenset[AuthAction]] = {}
    for role, actions in doc.items():
        if not isinstance(actions, list):
            raise InvalidAuthPolicies(f"{what}[{role!r}] must be a list of actions")
        grants[check_role(role)] = parse_actions(actions)
    return MappingProxyType(grants)


def _grants_json(grants: Mapping[str, frozenset[AuthAction]]) -> dict[str, list[str]]:
    return {role: sorted(a.value for a in actions) for role, actions in sorted(grants.items())}


def _empty_grants() -> Mapping[str, frozenset[AuthAction]]:
    return MappingProxyType({})


def _empty_topics() -> Mapping[str, Mapping[str, frozenset[AuthAction]]]:
    return MappingProxyType({})


def _empty_subscriptions() -> Mapping[str, frozenset[str]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class AuthPolicies:
    """Pulsar's ``AuthPolicies`` of one namespace.

    Attributes:
        namespace_auth: role -> actions on every topic of the namespace.
        destination_auth: full topic name -> role -> actions on that topic.
        subscription_auth_roles: subscription name -> the only roles that may consume from it.
    """

    namespace_auth: Mapping[str, frozenset[AuthAction]] = field(default_factory=_empty_grants)
    destination_auth: Mapping[str, Mapping[str, frozenset[AuthAction]]] = field(
        default_factory=_empty_topics
    )
    subscription_auth_roles: Mapping[str, frozenset[str]] = field(
        default_factory=_empty_subscriptions
    )

    @classmethod
    def from_json(cls, doc: object) -> AuthPolicies:
        """Parse Pulsar's JSON (``None`` = no grants).

        Raises:
            InvalidAuthPolicies: a wrong shape, an unknown action or an empty role.
        """
        if doc is None:
            return cls()
        if not isinstance(doc, dict):
            raise InvalidAuthPolicies(f"auth_policies must be an object, got {doc!r}")
        topics = doc.get("destination_auth")
        topics = {} if topics is None else topics
        if not isinstance(topics, dict):
            raise InvalidAuthPolicies("auth_policies.destination_auth must be an object")
        subscriptions = doc.get("subscription_auth_roles")
        subscriptions = {} if subscriptions is None else subscriptions
        if not isinstance(subscriptions, dict) or not all(
            isinstance(roles, list) for roles in subscriptions.values()
        ):
            raise InvalidAuthPolicies(
                "auth_policies.subscription_auth_roles must map subscriptions to role lists"
            )
        return cls(
            _frozen_grants(doc.get("namespace_auth"), "auth_policies.namespace_auth"),
            MappingProxyType(
                {
                    str(topic): _frozen_grants(grants, f"auth_policies.destination_auth[{topic}]")
                    for topic, grants in topics.items()
                }
            ),
            MappingProxyType(
                {
                    str(sub): frozenset(check_role(r) for r in roles)
                    for sub, roles in subscriptions.items()
                }
            ),
        )

    def to_json(self) -> dict[str, Any]:
        """Pulsar's JSON shape (all three keys, actions sorted)."""
        return {
            "namespace_auth": _grants_json(self.namespace_auth),
            "destination_auth": {
                topic: _grants_json(grants)
                for topic, grants in sorted(self.destination_auth.items())
            },
            "subscription_auth_roles": {
                sub: sorted(roles) for sub, roles in sorted(self.subscription_auth_roles.items())
            },
        }

    def grant_namespace(self, role: str, actions: frozenset[AuthAction]) -> AuthPolicies:
        """These policies with ``role`` granted exactly ``actions`` on the namespace."""
        grants = dict(self.namespace_auth)
        grants[check_role(role)] = actions
        return AuthPolicies(
            MappingProxyType(grants), self.destination_auth, self.subscription_auth_roles
        )

    def revoke_namespace(self, role: str) -> AuthPolicies:
        """These policies without ``role``'s namespace grant."""
        grants = {r: a for r, a in self.namespace_auth.items() if r != role}
        return AuthPolicies(
            MappingProxyType(grants), self.destination_auth, self.subscription_auth_roles
        )

    def grant_topic(self, topic: str, role: str, actions: frozenset[AuthAction]) -> AuthPolicies:
        """These policies with ``role`` granted exactly ``actions`` on ``topic``."""
        topics = dict(self.destination_auth)
        grants = dict(topics.get(topic, {}))
        grants[check_role(role)] = actions
        topics[topic] = MappingProxyType(grants)
        return AuthPolicies(
            self.namespace_auth, MappingProxyType(topics), self.subscription_auth_roles
        )

    def revoke_topic(self, topic: str, role: str) -> AuthPolicies:
        """These policies without ``role``'s grant on ``topic`` (a topic left with no grants is
        dropped)."""
        topics = dict(self.destination_auth)
        grants = {r: a for r, a in topics.get(topic, {}).items() if r != role}
        if grants:
            topics[topic] = MappingProxyType(grants)
        else:
            topics.pop(topic, None)
        return AuthPolicies(
            self.namespace_auth, MappingProxyType(topics), self.subscription_auth_roles
        )

    def topic_permissions(self, topic: str) -> dict[str, list[str]]:
        """What ``GET .../{topic}/permissions`` answers: the namespace's grants with the topic's
        own added (Pulsar's ``getPermissionsOnTopic``)."""
        merged: dict[str, set[AuthAction]] = {r: set(a) for r, a in self.namespace_auth.items()}
        for role, actions in self.destination_auth.get(topic, {}).items():
            merged.setdefault(role, set()).update(actions)
        return _grants_json({r: frozenset(a) for r, a in merged.items()})


@dataclass(frozen=True)
class AuthorizationSettings:
    """Pulsar's authorization keys.

    Attributes:
        enabled: ``authorizationEnabled``.
        super_user_roles: ``superUserRoles``.
        provider: ``authorizationProvider`` (only Pulsar's default is served).
        allow_wildcards: ``authorizationAllowWildcardsMatching``.
    """

    enabled: bool = False
    super_user_roles: frozenset[str] = frozenset()
    provider: str = PROVIDER_CLASS
    allow_wildcards: bool = False

    def __post_init__(self) -> None:
        if self.provider != PROVIDER_CLASS:
            raise InvalidAuthorizationSettings(
                f"authorizationProvider: unknown provider {self.provider!r} "
                f"(known: {PROVIDER_CLASS})"
            )


def _wildcard_match(granted: str, role: str) -> bool:
    if len(granted) > 1 and granted.endswith("*") and role.startswith(granted[:-1]):
        return True
    return len(granted) > 1 and granted.startswith("*") and role.endswith(granted[1:])


def grant_names(topic: TopicName) -> tuple[str, ...]:
    """The ``destination_auth`` keys whose grants apply to ``topic``: its own name, its
    partitioned topic's (for ``-partition-N``) and its scalable topic's (for a segment)."""
    names = [str(topic)]
    if topic.domain is TopicDomain.SEGMENT:
        names.append(str(topic.as_segment().parent))
    else:
        base = partitioned_topic_of(topic.local_name)
        if base != topic.local_name:
            names.append(str(TopicName(topic.domain, topic.tenant, topic.namespace, base)))
    return tuple(names)


class AuthorizationPolicy:
    """The decisions (pure: every input is passed in)."""

    def __init__(self, settings: AuthorizationSettings) -> None:
        self.settings = settings

    def is_super_user(self, role: str | None) -> bool:
        return role is not None and role in self.settings.super_user_roles

    def is_tenant_admin(self, role: str | None, admin_roles: Iterable[str]) -> bool:
        """A super user, or one of the tenant's ``adminRoles``."""
        return self.is_super_user(role) or (role is not None and role in set(admin_roles))

    def _granted(
        self, role: str, action: AuthAction, grants: Mapping[str, frozenset[AuthAction]]
    ) -> bool:
        if action in grants.get(role, frozenset()):
            return True
        if self.settings.allow_wildcards:
            return any(
                action in actions and _wildcard_match(granted, role)
                for granted, actions in grants.items()
            )
        return False

    def has_action(
        self, role: str | None, action: AuthAction, topic: TopicName, auth: AuthPolicies
    ) -> bool:
        """Whether the namespace's or the topic's grants give ``role`` ``action``."""
        if role is None:
            return False
        if self._granted(role, action, auth.namespace_auth):
            return True
        return any(
            self._granted(role, action, auth.destination_auth.get(name, {}))
            for name in grant_names(topic)
        )

    def allows_topic(
        self,
        role: str | None,
        operation: TopicOperation,
        topic: TopicName,
        admin_roles: Iterable[str],
        auth: AuthPolicies,
        subscription: str | None = None,
    ) -> bool:
        """Pulsar's ``allowTopicOperation``: tenant admins may do everything on their topics;
        others need the grant the operation needs (lookup: produce or consume)."""
        if self.is_tenant_admin(role, admin_roles):
            return True
        if role is None or operation is TopicOperation.ADMIN:
            return False
        if operation is TopicOperation.PRODUCE:
            return self.has_action(role, AuthAction.PRODUCE, topic, auth)
        if operation is TopicOperation.LOOKUP:
            return self.has_action(role, AuthAction.PRODUCE, topic, auth) or self.has_action(
                role, AuthAction.CONSUME, topic, auth
            )
        if subscription is not None:
            allowed = auth.subscription_auth_roles.get(subscription)
            if allowed and role not in allowed:
                return False
        return self.has_action(role, AuthAction.CONSUME, topic, auth)

    def allows_namespace_topics(
        self, role: str | None, admin_roles: Iterable[str], auth: AuthPolicies
    ) -> bool:
        """Listing or watching a namespace's topics (Pulsar's ``GET_TOPICS``): tenant admins and
        roles that may consume in the namespace."""
        if self.is_tenant_admin(role, admin_roles):
            return True
        return role is not None and self._granted(role, AuthAction.CONSUME, auth.namespace_auth)


__all__ = [
    "POLICIES_KEY",
    "PROVIDER_CLASS",
    "AuthAction",
    "AuthPolicies",
    "AuthorizationDenied",
    "AuthorizationPolicy",
    "AuthorizationSettings",
    "InvalidAuthPolicies",
    "InvalidAuthorizationSettings",
    "TopicOperation",
    "check_role",
    "grant_names",
    "parse_actions",
]
