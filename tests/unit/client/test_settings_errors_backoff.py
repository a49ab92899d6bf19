"""Service URLs, the one broker-error mapping, the retry split, and backoff with jitter."""

from __future__ import annotations

import random

import pytest

from braid.client.backoff import Backoff
from braid.client.errors import (
    AlreadyClosedError,
    AuthenticationError,
    AuthorizationError,
    BrokerMetadataError,
    ConnectError,
    ConsumerBusyError,
    IncompatibleSchemaError,
    InvalidConfigurationError,
    InvalidServiceURLError,
    InvalidTopicNameError,
    NotConnectedError,
    NotFoundError,
    PersistenceError,
    ProducerBusyError,
    ProducerFencedError,
    ServiceNotReadyError,
    TimeoutError,
    TopicTerminatedError,
    error_for_code,
    is_transient,
)
from braid.client.settings import (
    BrokerAddress,
    ClientSettings,
    parse_broker_url,
    parse_service_url,
)
from braid.core.errors import BraidError
from braid.protocol import pb


def test_service_urls() -> None:
    assert parse_service_url("pulsar://127.0.0.1:6650") == (BrokerAddress("127.0.0.1", 6650),)
    assert parse_service_url("pulsar://a:1,b") == (BrokerAddress("a", 1), BrokerAddress("b", 6650))
    assert parse_service_url("pulsar://[::1]:7000/") == (BrokerAddress("::1", 7000),)
    assert parse_broker_url("pulsar://h:9").url == "pulsar://h:9"
    assert parse_service_url("pulsar+ssl://h") == (BrokerAddress("h", 6651, tls=True),)
    assert parse_broker_url("pulsar+ssl://h:9").url == "pulsar+ssl://h:9"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "localhost:6650",
        "http://h:1",
        "pulsar://",
        "pulsar://h:0",
        "pulsar://h:70000",
        "pulsar://h x",
        42,
    ],
)
def test_bad_service_urls_are_typed_errors(bad: object) -> None:
    with pytest.raises(InvalidServiceURLError):
        parse_service_url(bad)  # type: ignore[arg-type]


def test_settings_are_validated() -> None:
    with pytest.raises(InvalidConfigurationError):
        ClientSettings(parse_service_url("pulsar://h"), operation_timeout=0)
    with pytest.raises(InvalidConfigurationError):
        ClientSettings(parse_service_url("pulsar://h"), backoff_initial=2, backoff_max=1)
    with pytest.raises(InvalidServiceURLError):
        parse_broker_url("pulsar://a:1,b:2")


@pytest.mark.parametrize(
    ("code", "category"),
    [
        (pb.TopicNotFound, NotFoundError),
        (pb.SubscriptionNotFound, NotFoundError),
        (pb.AuthenticationError, AuthenticationError),
        (pb.AuthorizationError, AuthorizationError),
        (pb.ProducerBusy, ProducerBusyError),
        (pb.ProducerFenced, ProducerFencedError),
        (pb.ConsumerBusy, ConsumerBusyError),
        (pb.IncompatibleSchema, IncompatibleSchemaError),
        (pb.TopicTerminatedError, TopicTerminatedError),
        (pb.InvalidTopicName, InvalidTopicNameError),
        (pb.ServiceNotReady, ServiceNotReadyError),
        (pb.TooManyRequests, ServiceNotReadyError),
        (pb.PersistenceError, PersistenceError),
        (pb.MetadataError, BrokerMetadataError),
    ],
)
def test_server_errors_map_to_the_spec_categories(code: int, category: type) -> None:
    error = error_for_code(code, "why", context="persistent://t/n/x")
    assert type(error) is category
    assert "why" in str(error) and "persistent://t/n/x" in str(error)
    assert error.server_error == pb.ServerError.Name(code)  # type: ignore[attr-defined]


def test_every_server_error_code_has_a_typed_category() -> None:
    for value in pb.ServerError.DESCRIPTOR.values:
        assert isinstance(error_for_code(value.number, "m"), BraidError)
    assert isinstance(error_for_code(999, "m"), BraidError)


def test_retry_split_follows_the_error_model() -> None:
    transient = [
        ConnectError("x"),
        NotConnectedError("x"),
        ServiceNotReadyError("x"),
        PersistenceError("x"),
        # A lookup answered by a broker whose metadata session is reconnecting (or too busy):
        # the Java client retries it too; failing the send instead lost a multi-host run.
        error_for_code(pb.MetadataError, "ZooKeeper connection of session 0x1 is down"),
    ]
    surfaced = [
        NotFoundError("x"),
        AuthorizationError("x"),
        ProducerBusyError("x"),
        ConsumerBusyError("x"),
        TimeoutError("x"),
        TopicTerminatedError("x"),
        AlreadyClosedError("x"),
        IncompatibleSchemaError("x"),
    ]
    assert all(is_transient(e) for e in transient)
    assert not any(is_transient(e) for e in surfaced)
    assert all(e.retriable for e in transient)
    assert TimeoutError("x").retriable  # the application may retry; the client does not


def test_backoff_grows_caps_and_resets_with_bounded_jitter() -> None:
    exact = Backoff(0.1, 1.0, jitter=0.0)
    assert [round(exact.next_delay(), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    exact.reset()
    assert exact.next_delay() == 0.1 and exact.attempts == 1
    jittered = Backoff(1.0, 1.0, jitter=0.2, rng=random.Random(7))
    delays = [jittered.next_delay() for _ in range(200)]
    assert all(0.8 <= d <= 1.2 for d in delays) and len(set(delays)) > 100
    # Without a source of its own a backoff draws from one shared generator: a consumer makes
    # two per segment it attaches, and seeding a new one reads the OS entropy source.
    first, second = Backoff(), Backoff()
    assert first.rng is second.rng
    spread = [first.next_delay() for _ in range(50)] + [second.next_delay() for _ in range(50)]
    assert len({round(d, 9) for d in spread}) > 2
    with pytest.raises(ValueError):
        Backoff(0, 1)
