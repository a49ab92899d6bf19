"""How ``braid admin`` shows answers to a person: aligned tables and the segment DAG as a tree.

Pure formatting: JSON documents from the admin API in, text out (no I/O, no HTTP). Everything is
read defensively (``.get`` with a dash for what is missing), so a broker that reports more or
fewer fields than this version knows still gets a readable answer.

The DAG tree puts root segments first (hash order) and each child indented under its parent; a
merged segment, which has several parents, is listed in full under its first parent and
referenced under the others. Nodes show id, hash range, state, created/sealed epochs, and — for
``stats`` — the segment's message counters and rates when the broker reports them, and the backlog
of each subscription. ``stats`` then shows PIP-483's view: each active segment's latest load
record (rates, age, where a split would cut), the effective auto-scale policy and its overrides,
and the auto-scaler's last decision with its reason.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

DASH = "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, two spaces apart, headers in capitals.

    A row with fewer cells than headers ends in a note that spans the remaining columns (it
    does not widen them).
    """
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        measured = row if len(row) == len(headers) else row[:-1]
        for i, cell in enumerate(measured):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    return "\n".join(lines)


def key_values(pairs: Sequence[tuple[str, object]]) -> str:
    """``key: value`` lines with the values aligned."""
    if not pairs:
        return ""
    width = max(len(k) for k, _ in pairs) + 1
    return "\n".join(f"{(k + ':').ljust(width)} {_scalar(v)}" for k, v in pairs)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


def _scalar(value: object) -> str:
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_scalar(v) for v in value) if value else DASH
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True)
    return str(value)


def when(ms: object) -> str:
    """Milliseconds since the epoch as UTC ISO-8601 (seconds); a dash for none."""
    if isinstance(ms, bool) or not isinstance(ms, int) or ms <= 0:
        return DASH
    stamp = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def size(num_bytes: object) -> str:
    """Bytes in B/KiB/MiB/GiB."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int | float):
        return DASH
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return DASH  # unreachable: the loop returns


def rate(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DASH
    return f"{value:.1f}/s"


def count(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DASH
    return str(value)


# --- the segment DAG ---------------------------------------------------------------------------


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _ids(value: object) -> list[int]:
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _range_text(value: object) -> str:
    """``0000-7fff`` from the metadata's ``{"start", "end"}`` or the stats' string."""
    if isinstance(value, Mapping):
        start, end = value.get("start"), value.get("end")
        if isinstance(start, int) and isinstance(end, int):
            return f"{start:04x}-{end:04x}"
    if isinstance(value, str):
        return value
    return DASH


def _range_start(value: object) -> int:
    text = _range_text(value)
    try:
        return int(text.split("-")[0], 16)
    except ValueError:
        return 0


class _Node:
    def __init__(self, segment_id: int, doc: Mapping[str, Any]) -> None:
        self.id = segment_id
        self.doc = doc
        self.range = _range_text(doc.get("hashRange"))
        self.start = _range_start(doc.get("hashRange"))
        self.parents = _ids(doc.get("parentIds"))
        self.children = _ids(doc.get("childIds"))
        self.active = str(doc.get("state", "")).upper() == "ACTIVE"


def _nodes(segments: object) -> dict[int, _Node]:
    nodes: dict[int, _Node] = {}
    if isinstance(segments, Mapping):
        for key, doc in segments.items():
            if not isinstance(doc, Mapping):
                continue
            try:
                segment_id = _int(doc.get("segmentId"), int(key))
            except ValueError:
                continue
            nodes[segment_id] = _Node(segment_id, doc)
    return nodes


def _tree_order(nodes: Mapping[int, _Node]) -> list[tuple[str, _Node, int | None]]:
    """(prefix, node, shown-under) in display order; ``shown-under`` is set for a merged child
    referenced under a parent other than the one it is listed under."""
    present = set(nodes)

    def primary_parent(node: _Node) -> int | None:
        # A merged segment is listed under its parent first in hash order.
        listed = sorted((nodes[p] for p in node.parents if p in present), key=_key)
        return listed[0].id if listed else None

    roots = sorted((n for n in nodes.values() if primary_parent(n) is None), key=_key)
    out: list[tuple[str, _Node, int | None]] = []
    seen: set[int] = set()

    def visit(node: _Node, prefix: str, branch: str) -> None:
        out.append((prefix + branch, node, None))
        seen.add(node.id)
        children = sorted((nodes[c] for c in node.children if c in present), key=_key)
        child_prefix = prefix + ("│  " if branch == "├─ " else "   " if branch else "")
        for i, child in enumerate(children):
            last = i == len(children) - 1
            twig = "└─ " if last else "├─ "
            under = primary_parent(child)
            if under != node.id or child.id in seen:
                out.append((child_prefix + twig, child, under))
            else:
                visit(child, child_prefix, twig)

    for root in roots:
        visit(root, "", "")
    # A cycle or dangling reference in a hand-edited document must not hide a segment.
    for node in sorted(nodes.values(), key=_key):
        if node.id not in seen and all(node.id != n.id for _, n, _ in out):
            out.append(("? ", node, None))
    return out


def _key(node: _Node) -> tuple[int, int]:
    return (node.start, node.id)


def _subscription_backlogs(stats: Mapping[str, Any] | None) -> str:
    if not stats:
        return DASH
    subscriptions = stats.get("subscriptions")
    if not isinstance(subscriptions, Mapping) or not subscriptions:
        return DASH
    parts = []
    for name, sub in sorted(subscriptions.items()):
        backlog = sub.get("msgBacklog") if isinstance(sub, Mapping) else None
        parts.append(f"{name}={count(backlog)}")
    return " ".join(parts)


def _messages_out(stats: Mapping[str, Any]) -> int | None:
    if isinstance(stats.get("msgOutCounter"), int):
        return int(stats["msgOutCounter"])
    subscriptions = stats.get("subscriptions")
    if not isinstance(subscriptions, Mapping):
        return None
    total, found = 0, False
    for sub in subscriptions.values():
        consumers = sub.get("consumers") if isinstance(sub, Mapping) else None
        for consumer in consumers if isinstance(consumers, list) else ():
            if isinstance(consumer, Mapping) and isinstance(consumer.get("msgOutCounter"), int):
                total += consumer["msgOutCounter"]
                found = True
    return total if found else None


def dag_tree(segments: object, *, with_stats: bool = False) -> str:
    """The segment DAG as an indented table (``segments`` of metadata or of stats)."""
    nodes = _nodes(segments)
    if not nodes:
        return "(no segments)"
    headers = ["segment", "range", "state", "created", "sealed"]
    rows: list[list[str]] = []
    stats_of = {
        n.id: (n.doc.get("topicStats") if isinstance(n.doc.get("topicStats"), Mapping) else None)
        for n in nodes.values()
    }
    has_rates = with_stats and any(
        s is not None and ("msgRateIn" in s or "msgRateOut" in s) for s in stats_of.values()
    )
    if with_stats:
        headers += ["msgs in", "msgs out"]
        if has_rates:
            headers += ["rate in", "rate out"]
        headers += ["storage", "backlog"]
    for prefix, node, shown_under in _tree_order(nodes):
        label = f"{prefix}{node.id}"
        if shown_under is not None:
            rows.append([label, f"(merged; listed under {shown_under})"])
            continue
        row = [
            label,
            node.range,
            str(node.doc.get("state", DASH)),
            str(_int(node.doc.get("createdAtEpoch"))),
            DASH if node.active else str(_int(node.doc.get("sealedAtEpoch"))),
        ]
        if with_stats:
            stats = stats_of[node.id]
            if stats is None:
                row += [DASH, DASH] + ([DASH, DASH] if has_rates else []) + [DASH, DASH]
            else:
                row += [count(stats.get("msgInCounter")), count(_messages_out(stats))]
                if has_rates:
                    row += [rate(stats.get("msgRateIn")), rate(stats.get("msgRateOut"))]
                row += [size(stats.get("storageSize")), _subscription_backlogs(stats)]
        rows.append(row)
    return table(headers, rows)


def layout_summary(doc: Mapping[str, Any], topic: str | None = None) -> str:
    """A one-line header for a ``ScalableTopicMetadata`` or stats document."""
    nodes = _nodes(doc.get("segments"))
    active = sum(1 for n in nodes.values() if n.active)
    name = topic or str(doc.get("topic", ""))
    parts = [
        f"epoch {_int(doc.get('epoch'))}",
        f"{len(nodes)} segment{'s' if len(nodes) != 1 else ''} "
        f"({active} active, {len(nodes) - active} sealed)",
    ]
    properties = doc.get("properties")
    if isinstance(properties, Mapping) and properties:
        parts.append("properties " + ", ".join(f"{k}={v}" for k, v in sorted(properties.items())))
    return f"{name}  " + " · ".join(parts) if name else " · ".join(parts)


def render_layout(doc: Mapping[str, Any], topic: str) -> str:
    """``scalable-topics get``/``split``/``merge``: header line, then the DAG."""
    return f"{layout_summary(doc, topic)}\n\n{dag_tree(doc.get('segments'))}"


def render_stats(doc: Mapping[str, Any]) -> str:
    """``scalable-topics stats``: the DAG with per-segment stats, then subscriptions with their
    consumers and assignments, then the controller, then auto split/merge (load records, policy,
    last decision)."""
    parts = [layout_summary(doc), "", dag_tree(doc.get("segments"), with_stats=True)]
    parts += ["", _render_subscriptions(doc), "", _render_controller(doc.get("controller"))]
    if "autoScale" in doc:
        parts += ["", render_auto_scale(doc)]
    return "\n".join(parts)


def _age(ms: object) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
        return DASH
    seconds = int(ms) // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _hash(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return DASH
    return f"0x{value:04x}"


def _load_rows(segments: object) -> list[list[str]]:
    rows = []
    for node in sorted(_nodes(segments).values(), key=_key):
        load = node.doc.get("load")
        if not node.active:
            continue
        if not isinstance(load, Mapping):
            rows.append([str(node.id), node.range, "no load record yet"])
            continue
        if "error" in load:
            rows.append([str(node.id), node.range, f"unreadable record: {load['error']}"])
            continue
        rows.append(
            [
                str(node.id),
                node.range,
                rate(load.get("msgRateIn")),
                size(load.get("bytesRateIn")) + "/s",
                rate(load.get("msgRateOut")),
                size(load.get("bytesRateOut")) + "/s",
                _age(load.get("ageMs")),
                _hash(load.get("balancedSplitHash")),
            ]
        )
    return rows


def render_auto_scale(doc: Mapping[str, Any]) -> str:
    """PIP-483's part of ``scalable-topics stats``: why the controller did or did not act."""
    section = doc.get("autoScale")
    if not isinstance(section, Mapping):
        return "Auto split/merge: unknown"
    lines = ["Auto split/merge"]
    decision = section.get("lastDecision")
    pairs: list[tuple[str, object]] = [("loop running", section.get("running"))]
    if isinstance(decision, Mapping):
        action = str(decision.get("action", DASH))
        ids = _ids(decision.get("segmentIds"))
        if ids:
            action += " " + ", ".join(map(str, ids))
        if isinstance(decision.get("splitHash"), int):
            action += f" at {_hash(decision['splitHash'])}"
        pairs += [
            ("last decision", f"{action} ({decision.get('reason', DASH)})"),
            ("  why", decision.get("detail")),
            ("  when", f"{when(decision.get('atMs'))} ({decision.get('trigger', DASH)})"),
        ]
    else:
        pairs.append(("last decision", "none yet (decided by the controller leader)"))
    counters = section.get("counters")
    if isinstance(counters, Mapping):
        pairs.append(
            (
                "auto splits / merges",
                f"{count(counters.get('autoSplits'))} / {count(counters.get('autoMerges'))}",
            )
        )
        pairs.append(
            (
                "suppressed",
                f"{count(counters.get('splitSuppressedMaxSegments'))} splits at maxSegments, "
                f"{count(counters.get('mergeSuppressedMaxDepth'))} merges at maxDagDepth",
            )
        )
    lines += ["  " + line for line in key_values(pairs).splitlines()]
    rows = _load_rows(doc.get("segments"))
    if rows:
        lines += [
            "",
            "Load records (60 s rolling rates, written on material change)",
            table(
                [
                    "segment",
                    "range",
                    "msg in",
                    "bytes in",
                    "msg out",
                    "bytes out",
                    "age",
                    "split at",
                ],
                rows,
            ),
        ]
    policy = section.get("effectivePolicy")
    overrides = section.get("overrides")
    lines += ["", "Effective policy (broker.conf <- namespace <- topic)"]
    if isinstance(policy, Mapping):
        lines.append(_policy_text(policy))
    else:
        lines.append(f"  invalid, auto split/merge is off: {section.get('policyError', DASH)}")
    if isinstance(overrides, Mapping):
        for level in ("namespace", "topic"):
            value = overrides.get(level)
            shown = json.dumps(value, sort_keys=True) if value else "none"
            lines.append(f"  {level} override: {shown}")
    return "\n".join(lines)


def _policy_text(policy: Mapping[str, Any]) -> str:
    def pair(split: str, merge: str, unit: str) -> str:
        upper, lower = _number(policy.get(split)), _number(policy.get(merge))
        return f"split > {upper}{unit}, merge < {lower}{unit}"

    pairs: list[tuple[str, object]] = [
        ("enabled", policy.get("enabled")),
        ("segments", f"{policy.get('minSegments', DASH)}..{policy.get('maxSegments', DASH)}"),
        ("max DAG depth", policy.get("maxDagDepth")),
        ("msg rate in", pair("splitMsgRateInThreshold", "mergeMsgRateInThreshold", "/s")),
        ("bytes rate in", pair("splitBytesRateInThreshold", "mergeBytesRateInThreshold", " B/s")),
        ("msg rate out", pair("splitMsgRateOutThreshold", "mergeMsgRateOutThreshold", "/s")),
        (
            "bytes rate out",
            pair("splitBytesRateOutThreshold", "mergeBytesRateOutThreshold", " B/s"),
        ),
        (
            "cooldowns",
            f"split {_ms(policy.get('splitCooldownMs'))}, "
            f"merge {_ms(policy.get('mergeCooldownMs'))}, "
            f"merge window {_ms(policy.get('mergeWindowMs'))}",
        ),
        (
            "intervals",
            f"evaluation {_ms(policy.get('autoScaleIntervalMs'))}, load report "
            f"{_ms(policy.get('loadReportIntervalMs'))} "
            f"(rewrite on > {_number(_percent(policy.get('loadReportRateChangeThreshold')))}%)",
        ),
    ]
    return "\n".join("  " + line for line in key_values(pairs).splitlines())


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DASH
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))


def _percent(value: object) -> object:
    return value * 100 if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ms(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return DASH
    if value % 60_000 == 0 and value:
        return f"{value // 60_000}m"
    if value % 1000 == 0:
        return f"{value // 1000}s"
    return f"{value}ms"


def _render_subscriptions(doc: Mapping[str, Any]) -> str:
    subscriptions = doc.get("subscriptions")
    if not isinstance(subscriptions, Mapping) or not subscriptions:
        return "Subscriptions: none"
    backlog: dict[str, int] = {}
    for node in _nodes(doc.get("segments")).values():
        stats = node.doc.get("topicStats")
        subs = stats.get("subscriptions") if isinstance(stats, Mapping) else None
        for name, sub in subs.items() if isinstance(subs, Mapping) else ():
            if isinstance(sub, Mapping) and isinstance(sub.get("msgBacklog"), int):
                backlog[name] = backlog.get(name, 0) + sub["msgBacklog"]
    rows = []
    consumer_rows = []
    for name, sub in sorted(subscriptions.items()):
        sub = sub if isinstance(sub, Mapping) else {}
        coordinator = sub.get("coordinator") if isinstance(sub.get("coordinator"), Mapping) else {}
        consumers = coordinator.get("consumers") if isinstance(coordinator, Mapping) else None
        consumers = consumers if isinstance(consumers, Mapping) else {}
        registered = [c for c in sub.get("registeredConsumers", []) if isinstance(c, str)]
        drained = _ids(coordinator.get("drainedSegments")) if coordinator else []
        rows.append(
            [
                name,
                str(sub.get("type", DASH)),
                count(backlog.get(name)),
                str(len(set(registered) | set(consumers))),
                ", ".join(map(str, drained)) or DASH,
            ]
        )
        for consumer in sorted(set(registered) | set(consumers)):
            state = consumers.get(consumer)
            if isinstance(state, Mapping):
                connected = "yes" if state.get("connected") else "no"
                if state.get("inGracePeriod"):
                    connected += " (grace)"
                segments = ", ".join(map(str, _ids(state.get("assignedSegments")))) or DASH
            else:
                connected, segments = "?", DASH
            consumer_rows.append([name, consumer, connected, segments])
    text = "Subscriptions\n" + table(
        ["subscription", "type", "backlog", "consumers", "drained segments"], rows
    )
    if consumer_rows:
        text += "\n\nConsumers\n" + table(
            ["subscription", "consumer", "connected", "assigned segments"], consumer_rows
        )
    return text


def _render_controller(controller: object) -> str:
    if not isinstance(controller, Mapping):
        return "Controller: unknown"
    operation = controller.get("operationInFlight")
    pairs: list[tuple[str, object]] = [
        ("leader", controller.get("leaderBrokerUrl") or "none (election in progress)"),
        ("answered by leader", controller.get("isLeader")),
        ("operation in flight", json.dumps(operation) if operation else "none"),
        ("recovery", _render_recovery(controller.get("operationRecovery"))),
        ("last split", when(controller.get("lastSplitAtMs"))),
        ("last merge", when(controller.get("lastMergeAtMs"))),
    ]
    lines = key_values(pairs).splitlines()
    return "Controller\n" + "\n".join("  " + line for line in lines)


def _render_recovery(recovery: object) -> str:
    """What the leader does about a split or merge that failed (ADR 0040)."""
    if not isinstance(recovery, Mapping):
        return "none"
    return (
        f"{recovery.get('action')} of the {recovery.get('operation')} after "
        f"{recovery.get('failedAttempts')} more failed attempt(s), next at "
        f"{when(recovery.get('nextAttemptAtMs'))}; last error: {recovery.get('lastError')}"
    )


# --- persistent topics ---------------------------------------------------------------------------


def render_topic_stats(name: str, stats: Mapping[str, Any]) -> str:
    """``topics stats``: counters, then subscriptions and publishers."""
    pairs: list[tuple[str, object]] = [
        ("topic", name),
        ("messages in", count(stats.get("msgInCounter"))),
        ("bytes in", count(stats.get("bytesInCounter"))),
        ("storage", size(stats.get("storageSize"))),
        ("entries", count(stats.get("numberOfEntries"))),
        ("last confirmed entry", stats.get("lastConfirmedEntry")),
        ("terminated", stats.get("terminated")),
        ("deduplication", stats.get("deduplicationEnabled")),
    ]
    for key in ("msgRateIn", "msgRateOut"):
        if key in stats:
            pairs.append((key, rate(stats.get(key))))
    text = key_values(pairs)
    subscriptions = stats.get("subscriptions")
    if isinstance(subscriptions, Mapping) and subscriptions:
        rows = []
        for sub_name, sub in sorted(subscriptions.items()):
            sub = sub if isinstance(sub, Mapping) else {}
            consumers = sub.get("consumers")
            rows.append(
                [
                    sub_name,
                    str(sub.get("type") or DASH),
                    count(sub.get("msgBacklog")),
                    count(sub.get("unackedMessages")),
                    str(len(consumers) if isinstance(consumers, list) else 0),
                    str(sub.get("markDeletePosition", DASH)),
                ]
            )
        text += "\n\nSubscriptions\n" + table(
            ["subscription", "type", "backlog", "unacked", "consumers", "mark-delete"], rows
        )
    publishers = stats.get("publishers")
    if isinstance(publishers, list) and publishers:
        rows = [
            [
                str(p.get("producerName", DASH)),
                str(p.get("address", DASH)),
                count(p.get("msgInCounter")),
            ]
            for p in publishers
            if isinstance(p, Mapping)
        ]
        text += "\n\nPublishers\n" + table(["producer", "address", "msgs in"], rows)
    return text


__all__ = [
    "dag_tree",
    "key_values",
    "layout_summary",
    "render_layout",
    "render_stats",
    "render_topic_stats",
    "table",
    "to_json",
    "when",
]
