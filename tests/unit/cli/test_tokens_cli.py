"""``braid tokens``: the keys and tokens it makes are accepted by the broker's provider."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from braid.cli.main import main
from braid.security.api import Credentials
from braid.security.tokens import TokenAuthenticationProvider, TokenSettings


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["tokens", *argv])
    captured = capsys.readouterr()
    return code, captured.out.strip(), captured.err.strip()


def test_secret_key_and_token_are_accepted_by_the_broker_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "secret.key"
    assert _run(capsys, "create-secret-key", "--output", str(key))[0] == 0
    assert len(key.read_bytes()) == 32
    code, token, _ = _run(
        capsys, "create", "--subject", "app", "--secret-key", f"file://{key}", "-e", "1h"
    )
    assert code == 0
    provider = TokenAuthenticationProvider(TokenSettings(secret_key=f"file://{key}"))
    identity = provider.authenticate(Credentials(token.encode()), time.time())
    assert identity.role == "app"
    assert identity.expires_at is not None and identity.expires_at - time.time() > 3500
    code, claims, _ = _run(capsys, "show", "-i", token)
    assert json.loads(claims)["sub"] == "app"
    assert _run(capsys, "validate", "-i", token, "-sk", f"file://{key}")[1] == "app"


def test_key_pair_tokens_validate_with_the_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    code, _, _ = _run(
        capsys,
        "create-key-pair",
        "-a",
        "ES256",
        "--output-private-key",
        str(private),
        "--output-public-key",
        str(public),
    )
    assert code == 0
    code, token, _ = _run(capsys, "create", "-s", "ops", "--private-key", f"file://{private}")
    assert code == 0
    assert _run(capsys, "validate", "-i", token, "-pk", str(public), "-a", "ES256")[1] == "ops"


def test_base64_secret_key_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "create-secret-key", "--base64")
    assert code == 0 and len(base64.b64decode(out)) == 32


@pytest.mark.parametrize(
    "argv",
    [
        ("create", "-s", "x"),  # no key
        ("create", "-s", "x", "-sk", "file:///no/such/key"),
        ("create", "-s", "x", "-sk", "c2VjcmV0", "-e", "soon"),
        ("validate", "-i", "not-a-jwt", "-sk", "c2VjcmV0"),
        ("show", "-i", "not-a-jwt"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 1 and err.startswith("braid tokens ") and "\n" not in err
