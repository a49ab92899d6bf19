"""Token minting and the token provider: every key form, algorithm family and refusal."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.security import tokens
from braid.security.api import AuthenticationFailed, Credentials
from braid.security.keys import InvalidKey, read_key_bytes
from braid.security.tokens import (
    InvalidTokenSettings,
    TokenAuthenticationProvider,
    TokenSettings,
    create_key_pair,
    create_secret_key,
    create_token,
    parse_expiry,
)

NOW = 1_800_000_000.0
SECRET = create_secret_key()


def _provider(**kwargs: str) -> TokenAuthenticationProvider:
    return TokenAuthenticationProvider(TokenSettings(**kwargs))


def _data_url(data: bytes) -> str:
    return "data:;base64," + base64.b64encode(data).decode()


def test_secret_key_token_gives_its_subject_as_the_role() -> None:
    token = create_token("alice", secret_key=SECRET, expires_at=NOW + 60)
    identity = _provider(secret_key=_data_url(SECRET)).authenticate(
        Credentials(token.encode()), NOW
    )
    assert (identity.role, identity.method, identity.expires_at) == ("alice", "token", NOW + 60)
    assert not identity.expired(NOW + 59) and identity.expired(NOW + 60)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "ES384", "PS256"])
def test_key_pair_tokens_verify_with_the_public_key(tmp_path, algorithm: str) -> None:  # type: ignore[no-untyped-def]
    private, public = create_key_pair(algorithm)
    (tmp_path / "pub.key").write_bytes(public)
    token = create_token("bob", private_key=private, algorithm=algorithm)
    provider = _provider(public_key=f"file://{tmp_path / 'pub.key'}", public_algorithm=algorithm)
    assert provider.authenticate(Credentials(token.encode()), NOW).role == "bob"


def test_pyjwt_tokens_made_elsewhere_are_accepted_as_pulsar_tokens_are() -> None:
    # An independent mint (jjwt-style header without typ) with the same secret.
    token = jwt.encode({"sub": "carol"}, SECRET, algorithm="HS256", headers={"typ": None})
    assert (
        _provider(secret_key=_data_url(SECRET)).authenticate(Credentials(token.encode()), NOW).role
        == "carol"
    )


def test_role_claim_is_configurable() -> None:
    token = jwt.encode({"sub": "x", "role": "ops"}, SECRET, algorithm="HS256")
    provider = _provider(secret_key=_data_url(SECRET), auth_claim="role")
    assert provider.authenticate(Credentials(token.encode()), NOW).role == "ops"


def test_audience_is_checked_when_configured() -> None:
    provider = _provider(secret_key=_data_url(SECRET), audience="braid")
    good = jwt.encode({"sub": "a", "aud": ["x", "braid"]}, SECRET, algorithm="HS256")
    bad = jwt.encode({"sub": "a", "aud": "other"}, SECRET, algorithm="HS256")
    assert provider.authenticate(Credentials(good.encode()), NOW).role == "a"
    with pytest.raises(AuthenticationFailed):
        provider.authenticate(Credentials(bad.encode()), NOW)


def _none_alg_token() -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': 'root'})}."


@pytest.mark.parametrize(
    "token",
    [
        b"",
        b"garbage",
        b"a.b.c",
        b"\xff\xfe.x.y",
        _none_alg_token().encode(),
        create_token("eve", secret_key=b"not the broker's secret at all!!").encode(),
        create_token("eve", secret_key=SECRET, expires_at=NOW - 1).encode(),
        jwt.encode({"role": "no-sub"}, SECRET, algorithm="HS256").encode(),
        jwt.encode({"sub": "a", "exp": "soon"}, SECRET, algorithm="HS256").encode(),
        b"x" * (tokens.MAX_TOKEN_BYTES + 1),
    ],
    ids=[
        "empty",
        "garbage",
        "dots",
        "binary",
        "alg-none",
        "wrong-secret",
        "expired",
        "no-sub",
        "bad-exp",
        "oversize",
    ],
)
def test_bad_tokens_are_refused(token: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        _provider(secret_key=_data_url(SECRET)).authenticate(Credentials(token), NOW)


def test_a_public_key_cannot_be_used_as_an_hmac_secret() -> None:
    # The classic forgery: sign HS256 with the (public) key bytes the broker verifies RS256 with.
    _, public = create_key_pair("RS256")
    forged = jwt.encode({"sub": "root"}, SECRET, algorithm="HS256")
    provider = _provider(public_key=_data_url(public))
    with pytest.raises(AuthenticationFailed):
        provider.authenticate(Credentials(forged.encode()), NOW)


def test_provider_settings_are_checked_at_start_up() -> None:
    with pytest.raises(InvalidTokenSettings):
        _provider()
    with pytest.raises(InvalidTokenSettings):
        _provider(secret_key=_data_url(SECRET), public_key=_data_url(SECRET))
    _, ec_public = create_key_pair("ES256")
    with pytest.raises(InvalidTokenSettings, match="tokenPublicAlg"):
        _provider(public_key=_data_url(ec_public), public_algorithm="RS256")
    with pytest.raises(InvalidTokenSettings):
        _provider(secret_key="file:///no/such/key")


def test_key_settings_in_every_form(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    key = b"\x00\x01secret\xff"
    (tmp_path / "k").write_bytes(key)
    encoded = base64.b64encode(key).decode()
    monkeypatch.setenv("BRAID_TEST_KEY", encoded)
    assert read_key_bytes(f"file://{tmp_path / 'k'}") == key
    assert read_key_bytes(f"file:{tmp_path / 'k'}") == key
    assert read_key_bytes(str(tmp_path / "k")) == key
    assert read_key_bytes("data:;base64," + encoded) == key
    assert read_key_bytes("data:application/octet-stream;base64," + encoded) == key
    assert read_key_bytes("data:,plain%20text") == b"plain text"
    assert read_key_bytes("env:BRAID_TEST_KEY") == key
    assert read_key_bytes(encoded) == key
    for bad in ("", "env:BRAID_NOT_SET_ANYWHERE", "data:no-comma", "file:///nope", "%%%"):
        with pytest.raises(InvalidKey):
            read_key_bytes(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("2h", 7200), ("7d", 604800), ("2w", 1209600), ("1y", 31536000)],
)
def test_expiry_times_read_as_pulsar_tokens_reads_them(text: str, seconds: int) -> None:
    assert parse_expiry(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1d", "1x", "soon"])
def test_bad_expiry_times_are_refused(text: str) -> None:
    with pytest.raises(InvalidTokenSettings):
        parse_expiry(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_escape_as_anything_but_authentication_failed(data: bytes) -> None:
    provider = _provider(secret_key=_data_url(SECRET))
    try:
        provider.authenticate(Credentials(data), NOW)
    except AuthenticationFailed:
        pass


def test_a_token_whose_algorithm_wants_a_longer_key_than_the_brokers_is_refused_quietly() -> None:
    import warnings

    secret = b"k" * 32  # enough for HS256, not for HS512
    provider = tokens.TokenAuthenticationProvider(
        tokens.TokenSettings(secret_key="data:;base64," + base64.b64encode(secret).decode())
    )

    def part(value: bytes) -> str:
        return base64.urlsafe_b64encode(value).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS512", "typ": "JWT"}).encode())
    forged = f"{header}.{part(json.dumps({'sub': 'admin'}).encode())}.{part(b'x' * 64)}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no InsecureKeyLengthWarning per request
        with pytest.raises(AuthenticationFailed):
            provider.authenticate(Credentials(forged.encode()), 0.0)
