"""One connection's authentication state: the CONNECT check and Pulsar's refresh rules."""

from __future__ import annotations

import base64

from braid.broker.connection_auth import ConnectionAuthentication, RefreshAction
from braid.protocol import pb
from braid.protocol.auth import REFRESH_AUTH_DATA, auth_challenge, auth_response
from braid.security import tokens
from braid.security.authentication import AuthenticationService, AuthenticationSettings

SECRET = b"s" * 32
NOW = 1_800_000_000.0


def _auth() -> ConnectionAuthentication:
    service = AuthenticationService(
        AuthenticationSettings(
            enabled=True,
            providers=(tokens.CLASS_NAME,),
            token=tokens.TokenSettings(
                secret_key="data:;base64," + base64.b64encode(SECRET).decode()
            ),
        )
    )
    return ConnectionAuthentication(service, "10.0.0.1:5000", None)


def _connect(token: str) -> pb.CommandConnect:
    return pb.CommandConnect(client_version="c", auth_method_name="token", auth_data=token.encode())


def _response(token: str) -> pb.CommandAuthResponse:
    return auth_response("c", 21, "token", token.encode()).authResponse


def _token(subject: str, expires_at: float | None) -> str:
    return tokens.create_token(subject, secret_key=SECRET, expires_at=expires_at)


def test_a_token_without_expiry_is_never_challenged() -> None:
    auth = _auth()
    assert auth.check_connect(_connect(_token("a", None)), NOW) is None
    assert auth.role == "a" and not auth.refreshes
    assert auth.refresh_check(NOW + 10**9, True) is RefreshAction.NOTHING


def test_an_expired_token_is_challenged_then_refreshed_for_the_same_role() -> None:
    auth = _auth()
    assert auth.check_connect(_connect(_token("a", NOW + 10)), NOW) is None
    assert auth.refreshes
    assert auth.refresh_check(NOW + 5, True) is RefreshAction.NOTHING
    assert auth.refresh_check(NOW + 10, True) is RefreshAction.CHALLENGE
    assert auth.on_auth_response(_response(_token("a", NOW + 100)), NOW + 11) is None
    assert auth.refresh_check(NOW + 20, True) is RefreshAction.NOTHING


def test_an_unanswered_challenge_closes_the_connection_at_the_next_check() -> None:
    auth = _auth()
    auth.check_connect(_connect(_token("a", NOW + 1)), NOW)
    assert auth.refresh_check(NOW + 2, True) is RefreshAction.CHALLENGE
    assert auth.refresh_check(NOW + 3, True) is RefreshAction.CLOSE


def test_a_client_without_refresh_support_is_closed_once_its_token_expires() -> None:
    auth = _auth()
    auth.check_connect(_connect(_token("a", NOW + 1)), NOW)
    assert auth.refresh_check(NOW + 2, False) is RefreshAction.CLOSE


def test_a_refresh_may_not_change_the_role_nor_use_a_bad_token() -> None:
    for fresh in (_token("b", NOW + 100), "garbage", _token("a", NOW)):
        auth = _auth()
        auth.check_connect(_connect(_token("a", NOW + 1)), NOW)
        auth.refresh_check(NOW + 2, True)
        assert auth.on_auth_response(_response(fresh), NOW + 3) is not None


def test_a_refused_connect_reports_its_reason() -> None:
    auth = _auth()
    assert auth.check_connect(_connect("nope"), NOW) is not None
    assert auth.role is None


def test_the_challenge_carries_pulsars_refresh_marker() -> None:
    challenge = auth_challenge("Braid", 21, "token").authChallenge
    assert challenge.challenge.auth_method_name == "token"
    assert challenge.challenge.auth_data == REFRESH_AUTH_DATA == b"PulsarAuthRefresh"
