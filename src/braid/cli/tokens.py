"""``braid tokens``: make keys and JWTs the way ``pulsar tokens`` does (same sub-commands, same
flags), over :mod:`braid.security.tokens`.

* ``create-secret-key [-a HS256] [-o FILE] [-b]``: a random HMAC secret (raw bytes, or base64
  with ``--base64``), written to ``FILE`` or stdout.
* ``create-key-pair [-a RS256] --output-private-key F --output-public-key F``: DER key files.
* ``create -s ROLE [-e 1y] (--secret-key KEY | --private-key KEY) [-a ALG] [-hs k=v ...]``: a
  token on stdout; ``KEY`` is ``file:///path``, ``data:;base64,...``, ``env:NAME``, a path or
  base64, as the broker's ``tokenSecretKey``/``tokenPublicKey``.
* ``show (-i TOKEN | -f FILE)``: the claims (not verified); ``validate`` checks a token against
  a key as the broker would and prints its role.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

from braid.core.errors import InvalidInputError
from braid.security import tokens
from braid.security.api import AuthenticationFailed, Credentials
from braid.security.keys import read_key_bytes


def add_tokens_parser(commands: Any) -> None:
    """Register ``braid tokens`` and its sub-commands on the top-level sub-parsers."""
    parser = commands.add_parser(
        "tokens",
        help="create keys and JWTs for token authentication (as `pulsar tokens`)",
        description="Create secret keys, key pairs and JWTs accepted by a broker with "
        "AuthenticationProviderToken (docs/security.md).",
    )
    sub = parser.add_subparsers(dest="tokens_command", metavar="SUBCOMMAND", required=True)

    secret = sub.add_parser("create-secret-key", help="a random HMAC secret key")
    secret.add_argument(
        "-a", "--signature-algorithm", default="HS256", choices=tokens.HMAC_ALGORITHMS
    )
    secret.add_argument("-o", "--output", type=Path, help="write the key to this file")
    secret.add_argument("-b", "--base64", action="store_true", help="base64-encode the key")

    pair = sub.add_parser("create-key-pair", help="a private/public key pair (DER files)")
    pair.add_argument(
        "-a", "--signature-algorithm", default="RS256", choices=tokens.KEY_PAIR_ALGORITHMS
    )
    pair.add_argument("--output-private-key", type=Path, required=True)
    pair.add_argument("--output-public-key", type=Path, required=True)

    create = sub.add_parser("create", help="a token for a role")
    create.add_argument("-s", "--subject", required=True, help="the role the token grants")
    create.add_argument(
        "-e", "--expiry-time", help="lifetime: 30s, 10m, 2h, 7d, 2w, 1y (none: never)"
    )
    create.add_argument("-sk", "--secret-key", help="HMAC secret: file:///path, data:..., base64")
    create.add_argument("-pk", "--private-key", help="private key: file:///path, data:..., base64")
    create.add_argument("-a", "--signature-algorithm", help="default HS256, or the key's own")
    create.add_argument("-hs", "--headers", nargs="*", default=[], metavar="KEY=VALUE")

    show = sub.add_parser("show", help="print a token's claims (not verified)")
    _add_token_source(show)

    validate = sub.add_parser("validate", help="check a token as the broker would")
    _add_token_source(validate)
    validate.add_argument("-sk", "--secret-key")
    validate.add_argument("-pk", "--public-key")
    validate.add_argument("-a", "--signature-algorithm", default="RS256", help="for --public-key")


def _add_token_source(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-i", "--token", help="the token")
    source.add_argument("-f", "--token-file", type=Path, help="a file holding the token")


def _token_text(args: argparse.Namespace) -> str:
    if args.token is not None:
        return str(args.token).strip()
    return Path(args.token_file).read_text(encoding="ascii").strip()


def _write(data: bytes, output: Path | None) -> None:
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        output.write_bytes(data)


def _create(args: argparse.Namespace) -> None:
    headers = {}
    for item in args.headers:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidInputError(f"header {item!r} is not KEY=VALUE")
        headers[key] = value
    expires_at = None
    if args.expiry_time:
        expires_at = time.time() + tokens.parse_expiry(args.expiry_time)
    token = tokens.create_token(
        args.subject,
        secret_key=read_key_bytes(args.secret_key) if args.secret_key else None,
        private_key=read_key_bytes(args.private_key) if args.private_key else None,
        algorithm=args.signature_algorithm,
        expires_at=expires_at,
        headers=headers or None,
    )
    print(token)


def _validate(args: argparse.Namespace) -> None:
    settings = tokens.TokenSettings(
        secret_key=args.secret_key or "",
        public_key=args.public_key or "",
        public_algorithm=args.signature_algorithm,
    )
    provider = tokens.TokenAuthenticationProvider(settings)
    identity = provider.authenticate(Credentials(_token_text(args).encode()), time.time())
    print(identity.role)


def run_tokens(args: argparse.Namespace) -> int:
    """Run one ``braid tokens`` sub-command; exit code 0, or 1 with a message on stderr."""
    try:
        command = args.tokens_command
        if command == "create-secret-key":
            key = tokens.create_secret_key(args.signature_algorithm)
            _write(base64.b64encode(key) if args.base64 else key, args.output)
        elif command == "create-key-pair":
            private, public = tokens.create_key_pair(args.signature_algorithm)
            args.output_private_key.write_bytes(private)
            args.output_public_key.write_bytes(public)
        elif command == "create":
            _create(args)
        elif command == "show":
            print(json.dumps(tokens.token_claims(_token_text(args)), sort_keys=True))
        elif command == "validate":
            _validate(args)
    except (InvalidInputError, AuthenticationFailed, OSError) as exc:
        print(f"braid tokens {args.tokens_command}: {exc}", file=sys.stderr)
        return 1
    return 0


__all__ = ["add_tokens_parser", "run_tokens"]
