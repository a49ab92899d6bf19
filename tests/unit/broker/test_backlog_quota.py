"""The backlog-quota model (Pulsar's JSON), its resolution order, the backlog estimate and the
eviction target, the namespace policy keys and the CLI's units."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.backlog_quota import (
    BacklogQuota,
    BacklogQuotaDefaults,
    BacklogQuotaType,
    InvalidBacklogQuota,
    RetentionPolicy,
    TopicBacklogQuotaExceeded,
    estimated_backlog_bytes,
    eviction_target,
    quota_exceeded,
    quota_map_from_json,
    resolve,
)
from braid.broker.config import describe, load_config
from braid.broker.errors import ServerError, to_server_error
from braid.broker.resources import InvalidPolicies, NamespacePolicies
from braid.cli.admin_backlog import size_bytes, time_seconds
from braid.ledger.api import LedgerInfo, Position


def _ledger(ledger_id: int, entries: int, size: int) -> LedgerInfo:
    return LedgerInfo(ledger_id, entries, size, 0, "standalone")


def test_a_pulsar_admin_quota_document_parses_including_the_deprecated_limit_key() -> None:
    doc = {"limit": 1024, "limitTime": -1, "policy": "producer_request_hold"}
    quota = BacklogQuota.from_json(doc)
    assert quota == BacklogQuota(1024, -1, RetentionPolicy.PRODUCER_REQUEST_HOLD)
    assert BacklogQuota.from_json(quota.to_json()) == quota
    assert quota.to_json()["limitSize"] == quota.to_json()["limit"] == 1024


@pytest.mark.parametrize(
    "doc",
    [
        {"limitSize": 10, "policy": "drop"},
        {"limitSize": -2, "policy": "producer_exception"},
        {"limitSize": "10M", "policy": "producer_exception"},
        {"limitSize": True, "policy": "producer_exception"},
        [1, 2],
    ],
)
def test_a_bad_quota_document_is_refused_with_a_typed_error(doc: object) -> None:
    with pytest.raises(InvalidBacklogQuota):
        BacklogQuota.from_json(doc)


def test_a_topic_quota_wins_over_the_namespace_which_wins_over_the_broker_default() -> None:
    size = BacklogQuotaType.DESTINATION_STORAGE
    own = quota_map_from_json(
        {"destination_storage": {"limitSize": 1, "policy": "producer_exception"}}
    )
    ns = quota_map_from_json(
        {"destination_storage": {"limitSize": 2, "policy": "producer_exception"}}
    )
    defaults = BacklogQuotaDefaults(limit_bytes=3)
    assert resolve(size, own, ns, defaults) == own[size]
    assert resolve(size, None, ns, defaults) == ns[size]
    assert resolve(size, None, None, defaults) == BacklogQuota(limit_size=3)
    assert resolve(BacklogQuotaType.MESSAGE_AGE, own, ns, defaults) is None  # -1: no default


def test_the_refusal_code_follows_the_policy_as_pulsars_server_cnx_sends_it() -> None:
    hold = quota_exceeded("over", RetentionPolicy.PRODUCER_REQUEST_HOLD)
    exception = quota_exceeded("over", RetentionPolicy.PRODUCER_EXCEPTION)
    assert isinstance(exception, TopicBacklogQuotaExceeded)
    assert to_server_error(hold)[0] == ServerError.ProducerBlockedQuotaExceededError
    assert to_server_error(exception)[0] == ServerError.ProducerBlockedQuotaExceededException


def test_the_backlog_estimate_counts_later_ledgers_whole_and_a_share_of_the_current_one() -> None:
    view = [_ledger(1, 10, 1000), _ledger(2, 4, 400), _ledger(3, 0, 0)]
    assert estimated_backlog_bytes(view, Position(1, -1)) == 1400
    assert estimated_backlog_bytes(view, Position(1, 4)) == 500 + 400  # 5 of 10 entries left
    assert estimated_backlog_bytes(view, Position(1, 9)) == 400
    assert estimated_backlog_bytes(view, Position(2, 3)) == 0


@st.composite
def _views(draw: st.DrawFn) -> tuple[list[LedgerInfo], Position, int]:
    ledgers = []
    for ledger_id in range(1, draw(st.integers(1, 6)) + 1):
        entries = draw(st.integers(0, 50))
        per_entry = draw(st.integers(1, 500))
        ledgers.append(_ledger(ledger_id, entries, entries * per_entry))
    holder = draw(st.sampled_from(ledgers))
    mark = Position(holder.ledger_id, draw(st.integers(-1, max(-1, holder.entries - 1))))
    return ledgers, mark, draw(st.integers(0, 60_000))


@given(_views())
def test_eviction_leaves_at_most_the_limit_and_only_moves_forward(
    case: tuple[list[LedgerInfo], Position, int],
) -> None:
    view, mark, limit = case
    backlog = estimated_backlog_bytes(view, mark)
    target = eviction_target(view, mark, limit)
    if backlog <= limit:
        assert target is None
        return
    assert target is not None and target > mark
    assert estimated_backlog_bytes(view, target) <= limit
    # It drops no more than it must: one entry fewer would leave the backlog over the limit.
    if target.entry_id > 0 and (
        target.ledger_id != mark.ledger_id or target.entry_id > mark.entry_id + 1
    ):
        one_less = Position(target.ledger_id, target.entry_id - 1)
        assert estimated_backlog_bytes(view, one_less) > limit - 2 * max(i.size for i in view)


def test_namespace_policies_keep_pulsars_backlog_quota_map_and_message_ttl() -> None:
    doc = {
        "backlog_quota_map": {
            "message_age": {"limitSize": -1, "limitTime": 60, "policy": "consumer_backlog_eviction"}
        },
        "message_ttl_in_seconds": 300,
        "someFutureKey": 1,
    }
    policies = NamespacePolicies.from_json(doc)
    assert policies.message_ttl_in_seconds == 300
    assert policies.backlog_quota_map is not None
    assert policies.backlog_quota_map[BacklogQuotaType.MESSAGE_AGE].limit_time == 60
    assert NamespacePolicies.from_json(policies.to_json()) == policies
    with pytest.raises(InvalidPolicies):
        NamespacePolicies.from_json({"message_ttl_in_seconds": -1})
    with pytest.raises(InvalidPolicies):
        NamespacePolicies.from_json({"backlog_quota_map": {"bytes": {"policy": "x"}}})


def test_the_broker_keys_parse_and_a_bad_policy_names_its_key() -> None:
    config = load_config(
        None,
        {
            "backlogQuotaDefaultLimitBytes": "1073741824",
            "backlogQuotaDefaultRetentionPolicy": "consumer_backlog_eviction",
            "ttlDurationDefaultInSeconds": "3600",
        },
        {},
    )
    assert config.backlog_quota_defaults() == BacklogQuotaDefaults(
        1073741824, -1, RetentionPolicy.CONSUMER_BACKLOG_EVICTION
    )
    assert describe(config)["backlogQuotaDefaultRetentionPolicy"] == "consumer_backlog_eviction"
    with pytest.raises(Exception, match="backlogQuotaDefaultRetentionPolicy"):
        load_config(None, {"backlogQuotaDefaultRetentionPolicy": "hold"}, {})


@pytest.mark.parametrize(
    ("text", "size", "seconds"),
    [("-1", -1, -1), ("0", 0, 0), ("10", 10, 10), ("10k", 10240, None), ("2M", 2 << 20, 120),
     ("1G", 1 << 30, None), ("2h", None, 7200), ("1d", None, 86400), ("1w", None, 604800)],
)  # fmt: skip
def test_cli_units_are_pulsar_admins(text: str, size: int | None, seconds: int | None) -> None:
    for parse, expected in ((size_bytes, size), (time_seconds, seconds)):
        if expected is None:
            with pytest.raises(argparse.ArgumentTypeError):
                parse(text)
        else:
            assert parse(text) == expected
