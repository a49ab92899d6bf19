"""The broker's choice of provider for CONNECTs and HTTP requests, anonymous roles, and the
client-side credentials read from ``pulsar-admin`` plugin names."""

from __future__ import annotations

import base64

import pytest

from braid.security import basic, tls_auth, tokens
from braid.security.api import AuthenticationFailed, Credentials
from braid.security.authentication import (
    AuthenticationService,
    AuthenticationSettings,
    InvalidAuthenticationSettings,
)
from braid.security.credentials import InvalidCredentials, from_plugin

SECRET = b"k" * 32
NOW = 1_800_000_000.0


def _service(tmp_path, anonymous: str = "") -> AuthenticationService:  # type: ignore[no-untyped-def]
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text("alice:abgOeLfPimXQo\n")  # crypt(3) of "test"
    return AuthenticationService(
        AuthenticationSettings(
            enabled=True,
            providers=(tokens.CLASS_NAME, basic.CLASS_NAME, tls_auth.CLASS_NAME),
            anonymous_role=anonymous,
            token=tokens.TokenSettings(
                secret_key="data:;base64," + base64.b64encode(SECRET).decode()
            ),
            basic_conf=str(htpasswd),
        )
    )


def test_disabled_authentication_lets_everyone_in_without_a_role() -> None:
    service = AuthenticationService(AuthenticationSettings())
    assert service.authenticate("token", Credentials(b"junk"), NOW) is None
    assert service.authenticate_http("Bearer junk", None, NOW) is None


def test_connect_methods_pick_their_provider(tmp_path) -> None:  # type: ignore[no-untyped-def]
    service = _service(tmp_path)
    token = tokens.create_token("app", secret_key=SECRET)
    assert service.authenticate("token", Credentials(token.encode()), NOW).role == "app"  # type: ignore[union-attr]
    assert service.authenticate("basic", Credentials(b"alice:test"), NOW).role == "alice"  # type: ignore[union-attr]
    assert service.authenticate("tls", Credentials(peer_common_name="cn-1"), NOW).role == "cn-1"  # type: ignore[union-attr]
    for method, data in (("none", b""), ("kerberos", b"x"), ("tls", b"")):
        with pytest.raises(AuthenticationFailed):
            service.authenticate(method, Credentials(data), NOW)


def test_anonymous_role_covers_clients_without_a_served_method(tmp_path) -> None:  # type: ignore[no-untyped-def]
    service = _service(tmp_path, anonymous="guest")
    assert service.authenticate("none", Credentials(), NOW).role == "guest"  # type: ignore[union-attr]
    assert service.authenticate_http(None, None, NOW).role == "guest"  # type: ignore[union-attr]
    # Wrong credentials of a served method are still refused, not downgraded to anonymous.
    with pytest.raises(AuthenticationFailed):
        service.authenticate("basic", Credentials(b"alice:wrong"), NOW)


def test_http_headers_pick_their_provider(tmp_path) -> None:  # type: ignore[no-untyped-def]
    service = _service(tmp_path)
    token = tokens.create_token("app", secret_key=SECRET)
    basic_header = "Basic " + base64.b64encode(b"alice:test").decode()
    assert service.authenticate_http(f"Bearer {token}", None, NOW).role == "app"  # type: ignore[union-attr]
    assert service.authenticate_http(f"bearer  {token} ", None, NOW).role == "app"  # type: ignore[union-attr]
    assert service.authenticate_http(basic_header, None, NOW).role == "alice"  # type: ignore[union-attr]
    assert service.authenticate_http(None, "cn-2", NOW).role == "cn-2"  # type: ignore[union-attr]
    for header in ("Basic ###", "Digest x", "Bearer", "Bearer " + "a" * 30_000, "", None):
        with pytest.raises(AuthenticationFailed):
            service.authenticate_http(header, None, NOW)


def test_unknown_provider_class_names_stop_start_up() -> None:
    with pytest.raises(InvalidAuthenticationSettings, match="AuthenticationProviderKerberos"):
        AuthenticationService(
            AuthenticationSettings(
                enabled=True,
                providers=(
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderKerberos",
                ),
            )
        )
    with pytest.raises(InvalidAuthenticationSettings, match="needs authenticationProviders"):
        AuthenticationService(AuthenticationSettings(enabled=True))
    with pytest.raises(InvalidAuthenticationSettings, match="tokenSecretKey"):
        AuthenticationService(AuthenticationSettings(enabled=True, providers=(tokens.CLASS_NAME,)))


def test_pulsar_admin_plugins_and_params_become_credentials(tmp_path) -> None:  # type: ignore[no-untyped-def]
    token_file = tmp_path / "t.jwt"
    token_file.write_text("abc.def.ghi\n")
    plugin = "org.apache.pulsar.client.impl.auth."
    by_file = from_plugin(plugin + "AuthenticationToken", f"file://{token_file}")
    assert by_file.http_authorization() == "Bearer abc.def.ghi"
    assert from_plugin(plugin + "AuthenticationToken", "token:xyz").auth_data() == b"xyz"
    assert from_plugin("token", '{"token": "j"}').http_authorization() == "Bearer j"
    user = from_plugin(plugin + "AuthenticationBasic", '{"userId": "u", "password": "p:w"}')
    assert user.auth_data() == b"u:p:w"
    assert user.http_authorization() == "Basic " + base64.b64encode(b"u:p:w").decode()
    tls = from_plugin(plugin + "AuthenticationTls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem")
    assert (str(tls.cert_file), str(tls.key_file), tls.http_authorization()) == (
        "/c.pem",
        "/k.pem",
        None,
    )
    for name, params in (
        ("org.example.Auth", ""),
        ("basic", "{not json"),
        ("basic", '{"userId": "u"}'),
        ("tls", "tlsCertFile:/c.pem"),
        ("token", ""),
    ):
        with pytest.raises(InvalidCredentials):
            from_plugin(name, params)
    with pytest.raises(InvalidCredentials):
        from_plugin("token", f"file://{tmp_path / 'missing'}").current_token()
