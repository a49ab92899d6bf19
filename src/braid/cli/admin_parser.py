"""The ``braid admin`` parser's building blocks: one way to add a group, a command, a name argument
and the argument types every group shares.

:class:`Builder` adds a command group and :func:`command` one command of it, each with the common
``--url``/``--output`` options (accepted before or after the command), help and examples;
:func:`topic_arg` and :func:`namespace_arg` add the positional names; :func:`policy_args` one flag
per PIP-483 knob. The types (:func:`positive`, :func:`on_off`, :func:`parse_time`, ...) turn bad
input into argparse's usage error (exit 2). Nothing here imports httpx, so ``braid --help`` stays
fast.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import time
from typing import Any

from braid.cli import admin_commands as cmd

DEFAULT_URL = "http://127.0.0.1:8080"


URL_ENV = "BRAID_ADMIN_URL"
#: A token for every request when no --token/--auth-plugin is given.
TOKEN_ENV = "BRAID_ADMIN_TOKEN"


RAW = argparse.RawDescriptionHelpFormatter


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--url",
        "--admin-url",
        dest="url",
        default=default,
        help=f"admin API base URL (default ${URL_ENV}, else {DEFAULT_URL})",
    )
    security = parser.add_argument_group("TLS and authentication (docs/security.md)")
    security.add_argument(
        "--token",
        default=default,
        help=f"a JWT sent as 'Authorization: Bearer' (default ${TOKEN_ENV})",
    )
    security.add_argument(
        "--auth-plugin",
        default=default,
        help="pulsar-admin's plugin class: ...auth.AuthenticationToken, ...AuthenticationBasic, "
        "...AuthenticationTls",
    )
    security.add_argument(
        "--auth-params",
        default=default,
        help="its parameters: token:<jwt> or file:///path; "
        '{"userId":"u","password":"p"}; tlsCertFile:/c.pem,tlsKeyFile:/k.pem',
    )
    security.add_argument(
        "--tls-trust-cert-path",
        default=default,
        help="CA certificates (PEM) an https:// broker must chain to (default: the system's)",
    )
    security.add_argument(
        "--tls-allow-insecure",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="accept any broker certificate (tests and labs only)",
    )
    security.add_argument(
        "--tls-no-hostname-verification",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="do not check that the certificate names the host",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table" if top else argparse.SUPPRESS,
        help="table (default) or json",
    )


class Builder:
    """Adds groups and commands with the common options, help and examples."""

    def __init__(self, admin: argparse.ArgumentParser) -> None:
        self.groups = admin.add_subparsers(dest="admin_group", metavar="GROUP")

    def group(
        self, name: str, help_text: str, description: str, examples: str
    ) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        parser = self.groups.add_parser(
            name,
            help=help_text,
            description=description,
            epilog="examples:\n" + examples,
            formatter_class=RAW,
        )
        add_common(parser)
        parser.set_defaults(group_parser=parser)
        return parser.add_subparsers(dest="admin_command", metavar="COMMAND")


def command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: cmd.Handler,
    help_text: str,
    *,
    description: str | None = None,
    examples: str = "",
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name,
        help=help_text,
        description=description or help_text[:1].upper() + help_text[1:] + ".",
        epilog=("examples:\n" + examples) if examples else None,
        formatter_class=RAW,
    )
    add_common(parser)
    parser.set_defaults(handler=handler)
    return parser


def topic_arg(parser: argparse.ArgumentParser, what: str = "scalable topic") -> None:
    parser.add_argument(
        "topic",
        metavar="TOPIC",
        help=f"the {what}: full name, tenant/namespace/name, or name (= public/default/name)",
    )


def namespace_arg(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    if optional:
        parser.add_argument(
            "namespace",
            metavar="NAMESPACE",
            nargs="?",
            default="public/default",
            help="tenant/namespace (default public/default)",
        )
    else:
        parser.add_argument("namespace", metavar="NAMESPACE", help="tenant/namespace")


def segment_id(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a segment id is a decimal integer, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a segment id is >= 0, got {value}")
    return value


def hash_value(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a hash is an integer, decimal or 0x-hex (0x9c40), got {text!r}"
        ) from None
    if not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"a hash is in 0..0xffff, got {text}")
    return value


def positive(text: str) -> int:
    """A decimal integer >= 1."""
    return _integer_at_least(text, 1)


def non_negative(text: str) -> int:
    """A decimal integer >= 0."""
    return _integer_at_least(text, 0)


def _integer_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
    return value


def on_off(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("on", "true", "yes", "enable", "enabled", "1"):
        return True
    if lowered in ("off", "false", "no", "disable", "disabled", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a property is KEY=VALUE, got {text!r}")
    return key, value


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def duration_ms(text: str) -> int:
    """A duration as milliseconds: ``250ms``, ``1s``, ``10m``, ``5h``, ``3d``, ``1w``; a bare
    number is seconds (pulsar-admin's ``RelativeTimeUtil``)."""
    text = text.strip()
    if text.isdigit():
        return int(text) * 1000
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration (1s, 10m, 5h, 3d), got {text!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_time(text: str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds: ``1735689600000`` (epoch ms), ``10m`` / ``2h`` /
    ``1d`` (that long ago; units ms s m h d w), or ISO-8601 ``2025-01-01T12:00:00Z`` (without
    a zone: local time).

    Raises:
        argparse.ArgumentTypeError: none of these.
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if match is not None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0, now - int(match.group(1)) * _UNIT_MS[match.group(2)])
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected epoch milliseconds, a duration ago (10m, 2h, 1d) or an ISO-8601 time "
            f"(2025-01-01T12:00:00Z), got {text!r}"
        ) from None
    return max(0, int(stamp.timestamp() * 1000))


_KIND_METAVAR = {
    "bool": "on|off",
    "int": "N",
    "duration": "DURATION",
    "rate": "PER_SECOND",
    "bytes": "BYTES",
    "fraction": "FRACTION",
}


_KIND_HELP = {
    "duration": " (30s, 5m, 250ms; a bare number is seconds)",
    "bytes": " per second (50MB, 64MiB or bytes)",
    "fraction": " (25%% or 0.25)",
    "rate": " per second",
}


def policy_args(parser: argparse.ArgumentParser) -> None:
    """One flag per PIP-483 knob (from the policy's knob table), plus --json."""
    from braid.core.autoscale_policy import KNOBS

    group = parser.add_argument_group("policy settings (each optional)")
    for knob in KNOBS:
        name = knob.json_key.removesuffix("Ms")
        flag = "--" + "".join("-" + c.lower() if c.isupper() else c for c in name)
        group.add_argument(
            flag,
            dest=f"knob_{knob.field}",
            metavar=_KIND_METAVAR[knob.kind],
            default=None,
            help=f"{knob.conf_key} for this level{_KIND_HELP.get(knob.kind, '')}",
        )
    group.add_argument(
        "--json",
        dest="policy_json",
        metavar="DOC",
        default=None,
        help="the override as JSON (camelCase keys, durations in ms); flags win over it",
    )


__all__ = [
    "DEFAULT_URL",
    "RAW",
    "URL_ENV",
    "Builder",
    "add_common",
    "command",
    "hash_value",
    "key_value",
    "namespace_arg",
    "non_negative",
    "on_off",
    "parse_time",
    "policy_args",
    "positive",
    "segment_id",
    "topic_arg",
]
