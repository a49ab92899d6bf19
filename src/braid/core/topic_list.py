"""Pulsar's topic-list rules: which topics a regex subscription matches, and the list's hash.

A regex (pattern) subscription names a namespace and a pattern such as
``persistent://public/default/orders-.*``. Pulsar matches the pattern, with its domain scheme
removed (``public/default/orders-.*``), against each topic's name without scheme and without
partition suffix, as a whole-string match (``TopicList.filterTopics``). The topic names returned
keep their partition suffix (the client groups partitions itself).

The *topics hash* lets a client skip an unchanged answer: CRC32C over the sorted names joined by
``,``, printed the way Guava prints the hash (the four bytes little-endian, in hex), so a client
holding a hash from a Pulsar broker compares equal on Braid.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import crc32c

from braid.core.errors import InvalidInputError
from braid.core.partitions import partitioned_topic_of

_SCHEME = "://"


class InvalidTopicsPattern(InvalidInputError):
    """A topics pattern that is not a valid regular expression or names an unknown domain."""


def remove_domain_scheme(pattern: str) -> str:
    """``persistent://t/ns/x.*`` -> ``t/ns/x.*`` (Pulsar's ``removeTopicDomainScheme``).

    Raises:
        InvalidTopicsPattern: a scheme other than ``persistent``/``non-persistent``.
    """
    if _SCHEME not in pattern:
        return pattern
    prefix, _, rest = pattern.partition(_SCHEME)
    for domain in ("non-persistent", "persistent"):
        if prefix == domain:
            return rest
        if prefix.endswith(domain):
            # A regex written as "(persistent|...)://" keeps what precedes the domain word.
            return prefix[: -len(domain)] + rest
    raise InvalidTopicsPattern(f"topics pattern {pattern!r}: unsupported topic domain {prefix!r}")


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, scheme removed. Raises :class:`InvalidTopicsPattern`."""
    try:
        return re.compile(remove_domain_scheme(pattern))
    except re.error as exc:
        raise InvalidTopicsPattern(f"topics pattern {pattern!r} is not a regex: {exc}") from None


def matches(topic: str, pattern: re.Pattern[str]) -> bool:
    """Whether full topic name ``topic`` (maybe a partition's) matches ``pattern``."""
    _, _, rest = topic.partition(_SCHEME)
    base, _, local = rest.rpartition("/")
    name = f"{base}/{partitioned_topic_of(local)}" if base else partitioned_topic_of(local)
    return pattern.fullmatch(name) is not None


def filter_topics(topics: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    """The topics matching ``pattern``, in their order."""
    return [t for t in topics if matches(t, pattern)]


def topics_hash(topics: Iterable[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32C of the sorted names joined by ``,``."""
    data = ",".join(sorted(topics)).encode("utf-8")
    value: int = crc32c.crc32c(data)
    return value.to_bytes(4, "little").hex()


__all__ = [
    "InvalidTopicsPattern",
    "compile_pattern",
    "filter_topics",
    "matches",
    "remove_domain_scheme",
    "topics_hash",
]
