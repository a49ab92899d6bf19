"""Refusals carry the wire's own ServerError codes: every layer's error maps to one of them."""

from __future__ import annotations

import pytest

from braid.broker import errors
from braid.broker.errors import ServerError, to_server_error
from braid.core.errors import (
    AlreadyClosedError,
    AuthorizationError,
    BraidError,
    FencedError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
    TopicTerminatedError,
)
from braid.protocol.generated import PulsarApi_pb2 as pb


def test_server_error_is_the_schema_enum_with_every_code() -> None:
    # Codes 20, 21, 23 and 24 (transactions) were missing from an earlier hand copy.
    for name in ("TransactionCoordinatorNotFound", "InvalidTxnStatus", "TransactionConflict"):
        assert ServerError.Value(name) == pb.ServerError.Value(name)
    assert sorted(ServerError.values()) == list(range(26))


def test_every_broker_error_names_a_wire_code() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.BrokerError):
            assert cls.code in pb.ServerError.values(), name


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (errors.ProducerBusy("p"), ServerError.ProducerBusy),
        (TopicTerminatedError("t"), ServerError.TopicTerminatedError),
        (FencedError("f"), ServerError.ServiceNotReady),
        (ServiceUnavailableError("s"), ServerError.ServiceNotReady),
        (AlreadyClosedError("c"), ServerError.ServiceNotReady),
        (AuthorizationError("a"), ServerError.AuthorizationError),
        (NotFoundError("n"), ServerError.TopicNotFound),
        (InvalidInputError("i"), ServerError.NotAllowedError),
        (BraidError("b"), ServerError.PersistenceError),
        (OSError("disk"), ServerError.PersistenceError),
    ],
)
def test_lower_layer_errors_map_by_category(exc: BaseException, expected: int) -> None:
    assert to_server_error(exc) == (expected, str(exc))


def test_a_foreign_exception_is_an_unknown_error_naming_its_type() -> None:
    assert to_server_error(KeyError("k")) == (ServerError.UnknownError, "KeyError: 'k'")
