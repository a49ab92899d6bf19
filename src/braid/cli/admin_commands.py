"""What each ``braid admin`` command does: one call (or a few) of
:class:`braid.admin.client.AdminClient`, and the answer printed for a person (a sentence, a table,
the DAG tree of :mod:`braid.cli.admin_output`) or, with ``--output json``, exactly the API's JSON
(nothing for a 204).

Handlers take ``(admin, args, printer)``; :mod:`braid.cli.admin` parses the arguments, builds the
client and maps failures to one line on stderr. Nothing here imports httpx at module level.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from braid.cli import admin_output as out
from braid.core.errors import InvalidInputError

if TYPE_CHECKING:
    from braid.admin.client import AdminClient


class Printer:
    """Where a command writes: tables for people, the API's JSON for scripts."""

    def __init__(self, mode: str, stream: TextIO) -> None:
        self.json = mode == "json"
        self._stream = stream

    def line(self, text: str = "") -> None:
        print(text, file=self._stream)

    def data(self, value: Any) -> None:
        print(out.to_json(value), file=self._stream)

    def names(self, names: Sequence[str], empty: str) -> None:
        if self.json:
            self.data(list(names))
        elif names:
            self.line("\n".join(names))
        else:
            print(empty, file=sys.stderr)

    def done(self, message: str) -> None:
        """A mutation without an answer body: a sentence for people, nothing for scripts."""
        if not self.json:
            self.line(message)


Handler = Callable[["AdminClient", argparse.Namespace, Printer], None]


def _scalable_name(text: str) -> str:
    from braid.core.names import TopicDomain, TopicName

    topic = TopicName.parse(text, default_domain=TopicDomain.TOPIC)
    if topic.domain is not TopicDomain.TOPIC:
        raise InvalidInputError(f"{topic} is not a scalable topic (expected topic://...)")
    return str(topic)


def _persistent_name(text: str) -> str:
    from braid.core.names import TopicDomain, TopicName

    topic = TopicName.parse(text, default_domain=TopicDomain.PERSISTENT)
    if topic.domain is not TopicDomain.PERSISTENT:
        raise InvalidInputError(f"{topic} is not a persistent topic (expected persistent://...)")
    return str(topic)


def health(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    process = admin.health()
    broker = admin.broker_health()
    clusters = admin.clusters()
    if p.json:
        p.data({"health": process, "brokerHealth": broker, "clusters": clusters})
        return
    p.line(
        out.key_values(
            [
                ("url", admin.url),
                ("process", (process or {}).get("status", process)),
                ("metadata store", broker),
                ("clusters", clusters),
            ]
        )
    )


def st_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    p.names(admin.scalable_topics.list(args.namespace), f"no scalable topics in {args.namespace}")


def st_create(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.create(name, args.segments, dict(args.properties) or None)
    if p.json:
        return
    s = "s" if args.segments != 1 else ""
    p.line(f"Created {name} with {args.segments} segment{s}.\n")
    p.line(out.render_layout(admin.scalable_topics.get(name), name))


def st_get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    doc = admin.scalable_topics.get(name)
    p.data(doc) if p.json else p.line(out.render_layout(doc, name))


def st_stats(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    doc = admin.scalable_topics.stats(_scalable_name(args.topic))
    p.data(doc) if p.json else p.line(out.render_stats(doc))


def st_delete(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.delete(name, force=args.force)
    p.done(f"Deleted {name}.")


def st_create_subscription(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.create_subscription(
        name,
        args.subscription,
        subscription_type=args.subscription_type,
        initial_position=args.initial_position,
    )
    p.done(
        f"Created {args.subscription_type} subscription {args.subscription!r} on {name} "
        f"(cursors at {args.initial_position})."
    )


def st_delete_subscription(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.delete_subscription(name, args.subscription)
    p.done(f"Deleted subscription {args.subscription!r} of {name}.")


def st_seek(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.seek(name, args.subscription, args.time)
    p.done(f"Moved subscription {args.subscription!r} of {name} to {out.when(args.time)}.")


def _segment_range(doc: dict[str, Any], segment_id: int) -> str:
    segment = doc.get("segments", {}).get(str(segment_id), {})
    hash_range = segment.get("hashRange", {}) if isinstance(segment, dict) else {}
    try:
        return f"{hash_range['start']:04x}-{hash_range['end']:04x}"
    except (KeyError, TypeError, ValueError):
        return "?"


def st_split(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    doc = admin.scalable_topics.split(name, args.segment, args.split_hash)
    if p.json:
        p.data(doc)
        return
    parent = doc.get("segments", {}).get(str(args.segment), {})
    children = parent.get("childIds", []) if isinstance(parent, dict) else []
    described = " and ".join(f"{c} [{_segment_range(doc, c)}]" for c in children)
    p.line(f"Split segment {args.segment} into {described}; epoch {doc.get('epoch')}.\n")
    p.line(out.render_layout(doc, name))


def st_merge(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    if len(args.segments) < 2:
        raise InvalidInputError("a merge needs two or more segment ids")
    doc = admin.scalable_topics.merge(name, args.segments)
    if p.json:
        p.data(doc)
        return
    parent = doc.get("segments", {}).get(str(args.segments[0]), {})
    children = parent.get("childIds", []) if isinstance(parent, dict) else []
    ids = ", ".join(map(str, args.segments))
    described = ", ".join(f"{c} [{_segment_range(doc, c)}]" for c in children)
    p.line(f"Merged segments {ids} into {described}; epoch {doc.get('epoch')}.\n")
    p.line(out.render_layout(doc, name))


def tenants_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    p.names(admin.tenants.list(), "no tenants")


def tenants_get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    info = admin.tenants.get(args.tenant)
    if p.json:
        p.data(info)
        return
    p.line(
        out.key_values(
            [
                ("tenant", args.tenant),
                ("admin roles", info.get("adminRoles")),
                ("allowed clusters", info.get("allowedClusters")),
            ]
        )
    )


def tenants_create(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.tenants.create(
        args.tenant, admin_roles=args.admin_roles, allowed_clusters=args.allowed_clusters
    )
    p.done(f"Created tenant {args.tenant}.")


def tenants_update(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    current = admin.tenants.get(args.tenant)
    roles = args.admin_roles if args.admin_roles is not None else current.get("adminRoles", [])
    clusters = args.allowed_clusters
    if clusters is None:
        clusters = current.get("allowedClusters", [])
    admin.tenants.update(args.tenant, admin_roles=roles, allowed_clusters=clusters)
    p.done(f"Updated tenant {args.tenant}.")


def tenants_delete(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.tenants.delete(args.tenant)
    p.done(f"Deleted tenant {args.tenant}.")


def ns_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    p.names(admin.namespaces.list(args.tenant), f"no namespaces in tenant {args.tenant}")


def ns_get(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    policies = admin.namespaces.get(args.namespace)
    if p.json:
        p.data(policies)
    elif not policies:
        p.line(f"{args.namespace}: no policies set (the broker defaults apply)")
    else:
        p.line(out.key_values([("namespace", args.namespace), *sorted(policies.items())]))


def ns_create(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    policies: dict[str, Any] | None = None
    if args.policies is not None:
        try:
            policies = json.loads(args.policies)
        except ValueError as exc:
            raise InvalidInputError(f"--policies is not valid JSON: {exc}") from None
        if not isinstance(policies, dict):
            raise InvalidInputError("--policies must be a JSON object")
    if args.deduplication is not None:
        policies = {**(policies or {}), "deduplicationEnabled": args.deduplication}
    admin.namespaces.create(args.namespace, policies)
    p.done(f"Created namespace {args.namespace}.")


def ns_delete(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.delete(args.namespace)
    p.done(f"Deleted namespace {args.namespace}.")


def ns_get_dedup(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    enabled = admin.namespaces.get_deduplication(args.namespace)
    if p.json:
        p.data(enabled)
    elif enabled is None:
        p.line(f"{args.namespace}: deduplication not set (the broker default applies)")
    else:
        p.line(f"{args.namespace}: deduplication {'on' if enabled else 'off'}")


def ns_set_dedup(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.set_deduplication(args.namespace, args.enabled)
    p.done(f"Deduplication {'on' if args.enabled else 'off'} for {args.namespace}.")


def ns_remove_dedup(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.remove_deduplication(args.namespace)
    p.done(f"Removed the deduplication setting of {args.namespace} (the broker default applies).")


def ns_get_persistence(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    policies = admin.namespaces.get_persistence(args.namespace)
    if p.json:
        p.data(policies)
    elif policies is None:
        p.line(
            f"{args.namespace}: persistence not set (managedLedgerDefault* of broker.conf apply)"
        )
    else:
        p.line(
            f"{args.namespace}: ensemble {policies['bookkeeperEnsemble']}, write quorum "
            f"{policies['bookkeeperWriteQuorum']}, ack quorum {policies['bookkeeperAckQuorum']}, "
            f"max mark-delete rate {policies['managedLedgerMaxMarkDeleteRate']}"
        )


def ns_set_persistence(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.set_persistence(
        args.namespace,
        args.bookkeeper_ensemble,
        args.bookkeeper_write_quorum,
        args.bookkeeper_ack_quorum,
        args.ml_mark_delete_max_rate,
    )
    p.done(
        f"Persistence of {args.namespace}: ensemble {args.bookkeeper_ensemble}, write quorum "
        f"{args.bookkeeper_write_quorum}, ack quorum {args.bookkeeper_ack_quorum} (new ledgers)."
    )


def ns_remove_persistence(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.remove_persistence(args.namespace)
    p.done(f"Removed the persistence policies of {args.namespace} (broker defaults apply).")


_BOOL_WORDS = {"on": "true", "off": "false", "yes": "true", "no": "false"}


def _policy_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The override a set-*-auto-scale-policy command asks for: --json, then the flags."""
    from braid.core.autoscale_policy import KNOBS, AutoScalePolicyOverride

    doc: dict[str, Any] = {}
    if args.policy_json is not None:
        try:
            parsed = json.loads(args.policy_json)
        except ValueError as exc:
            raise InvalidInputError(f"--json is not valid JSON: {exc}") from None
        doc.update(AutoScalePolicyOverride.from_json(parsed).to_json())
    texts = {
        knob.field: _BOOL_WORDS.get(text.strip().lower(), text) if knob.kind == "bool" else text
        for knob in KNOBS
        if (text := getattr(args, f"knob_{knob.field}", None)) is not None
    }
    doc.update(AutoScalePolicyOverride.from_text(texts).to_json())
    if not doc:
        raise InvalidInputError(
            "give at least one setting (e.g. --enabled off, --max-segments 16) or --json"
        )
    return doc


def _show_policy(p: Printer, where: str, policy: dict[str, Any] | None, fallback: str) -> None:
    if p.json:
        p.data(policy)
    elif not policy:
        p.line(f"{where}: no auto-scale override ({fallback} applies)")
    else:
        p.line(out.key_values([("override of", where), *sorted(policy.items())]))


def st_set_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    policy = _policy_from_args(args)
    admin.scalable_topics.set_auto_scale_policy(name, policy)
    p.done(f"Auto-scale override of {name} set: {json.dumps(policy, sort_keys=True)}")


def st_get_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    policy = admin.scalable_topics.get_auto_scale_policy(name)
    _show_policy(p, name, policy, "the namespace's override or broker.conf")


def st_remove_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _scalable_name(args.topic)
    admin.scalable_topics.remove_auto_scale_policy(name)
    p.done(f"Removed the auto-scale override of {name}.")


def ns_set_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    policy = _policy_from_args(args)
    admin.namespaces.set_scalable_topic_auto_scale_policy(args.namespace, policy)
    p.done(
        f"Auto-scale override of {args.namespace}'s scalable topics set: "
        f"{json.dumps(policy, sort_keys=True)}"
    )


def ns_get_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    policy = admin.namespaces.get_scalable_topic_auto_scale_policy(args.namespace)
    _show_policy(p, args.namespace, policy, "broker.conf")


def ns_remove_policy(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    admin.namespaces.remove_scalable_topic_auto_scale_policy(args.namespace)
    p.done(f"Removed the auto-scale override of {args.namespace} (broker.conf applies).")


def topics_list(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    p.names(admin.topics.list(args.namespace), f"no persistent topics in {args.namespace}")


def topics_create(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.create(name)
    p.done(f"Created {name}.")


def topics_delete(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    admin.topics.delete(name)
    p.done(f"Deleted {name}.")


def topics_terminate(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    last = admin.topics.terminate(name)
    if p.json:
        p.data(last)
    else:
        where = f"{last.get('ledgerId')}:{last.get('entryId')}" if isinstance(last, dict) else last
        p.line(f"Terminated {name}; last message id {where}.")


def topics_stats(admin: AdminClient, args: argparse.Namespace, p: Printer) -> None:
    name = _persistent_name(args.topic)
    stats = admin.topics.stats(name)
    p.data(stats) if p.json else p.line(out.render_topic_stats(name, stats))


__all__ = [
    "Handler",
    "Printer",
    "health",
    "ns_create",
    "ns_delete",
    "ns_get",
    "ns_get_dedup",
    "ns_list",
    "ns_remove_dedup",
    "ns_set_dedup",
    "st_create",
    "st_create_subscription",
    "st_delete",
    "st_delete_subscription",
    "st_get",
    "st_list",
    "st_merge",
    "st_seek",
    "st_split",
    "st_stats",
    "tenants_create",
    "tenants_delete",
    "tenants_get",
    "tenants_list",
    "tenants_update",
    "topics_create",
    "topics_delete",
    "topics_list",
    "topics_stats",
    "topics_terminate",
]
