"""htpasswd parsing and password checks, against hashes made by independent tools."""

from __future__ import annotations

import base64
import shutil
import subprocess

import bcrypt
import pytest

from braid.security.api import AuthenticationFailed, Credentials
from braid.security.basic import (
    BasicAuthenticationProvider,
    InvalidHtpasswd,
    parse_htpasswd,
    verify_password,
)


def _openssl_apr1(password: str, salt: str) -> str:
    out = subprocess.run(
        ["openssl", "passwd", "-apr1", "-salt", salt, password],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    return out.stdout.strip()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_apr1_hashes_made_by_openssl_verify() -> None:
    stored = _openssl_apr1("p@ss word", "abcdefgh")
    assert verify_password("p@ss word", stored)
    assert not verify_password("p@ss words", stored)


def test_bcrypt_2y_hashes_as_htpasswd_writes_them_verify() -> None:
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()
    stored = "$2y$" + hashed[4:]
    assert verify_password("secret", stored)
    assert not verify_password("Secret", stored)
    assert not verify_password("s" * 100, stored)


#: glibc's crypt(3) of "test" with salt "ab" (``perl -e 'print crypt("test", "ab")'``).
DES_TEST = "abgOeLfPimXQo"


def test_des_crypt_from_libc_verifies() -> None:
    assert verify_password("test", DES_TEST)
    assert not verify_password("test2", DES_TEST)


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl is not installed")
def test_des_crypt_agrees_with_the_system_crypt() -> None:
    stored = subprocess.run(
        ["perl", "-e", 'print crypt("s3cr3t!", "Zx")'],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    assert verify_password("s3cr3t!", stored)


def test_htpasswd_lines_are_checked() -> None:
    users = parse_htpasswd("# comment\n\nalice:abgOeLfPimXQo\n")
    assert users == {"alice": "abgOeLfPimXQo"}
    for bad in ("nocolon", "bob:", "carol:{SHA}abc=", ":abgOeLfPimXQo"):
        with pytest.raises(InvalidHtpasswd):
            parse_htpasswd(bad)


def test_provider_accepts_the_right_password_and_refuses_the_rest(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "htpasswd"
    path.write_text("alice:abgOeLfPimXQo\n")
    for conf in (str(path), f"file://{path}", base64.b64encode(path.read_bytes()).decode()):
        provider = BasicAuthenticationProvider(conf)
        assert provider.authenticate(Credentials(b"alice:test"), 0).role == "alice"
        assert provider.authenticate(Credentials(b"alice:test"), 0).role == "alice"  # remembered
        for data in (b"alice:wrong", b"mallory:test", b"alice", b"", b"\xff:\xfe", b"x" * 5000):
            with pytest.raises(AuthenticationFailed):
                provider.authenticate(Credentials(data), 0)
    with pytest.raises(InvalidHtpasswd):
        BasicAuthenticationProvider("")
