"""Namespace bundles: the unit of topic ownership among brokers (Pulsar's ``NamespaceBundle``).

A namespace's topics are split into *bundles* by the hash of their full name: the 32-bit hash
range ``[0x00000000, 0xffffffff]`` is cut at the namespace's *boundaries*, and a topic belongs to
the bundle whose range holds ``crc32(str(topic))`` (Pulsar hashes with Guava's ``crc32``, the
standard CRC-32 that :func:`zlib.crc32` computes, of ``TopicName.toString()``). Each range is
half-open ``[lower, upper)`` except the last, which includes ``0xffffffff``. A bundle is named
by its range, ``0x40000000_0x80000000``, as in Pulsar's ``/namespace/{tenant}/{ns}/{range}``
ownership nodes and its admin API.

The boundaries come from the namespace policies' ``bundles`` (``{"boundaries": [...],
"numBundles": n}``, Pulsar's ``BundlesData``, written by ``initialize-cluster-metadata``); a
namespace without them is cut into ``defaultNumberOfNamespaceBundles`` equal ranges, computed as
Pulsar's ``getBundles(n)`` does (``2^32 // n`` steps, the last boundary ``0xffffffff``). Every
broker of a cluster must use the same default for such namespaces; namespaces created by
``initialize-cluster-metadata`` carry theirs.

Immutable values; no I/O.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from braid.core.errors import InvalidInputError
from braid.core.names import TopicName

#: The highest topic-name hash (inclusive upper bound of the last bundle).
FULL_UPPER_BOUND = 0xFFFFFFFF
#: The first and last boundary of every namespace (Pulsar's ``FIRST_BOUNDARY``/``LAST_BOUNDARY``).
FIRST_BOUNDARY = "0x00000000"
LAST_BOUNDARY = "0xffffffff"


class InvalidBundles(InvalidInputError):
    """Bundle boundaries that do not cut the full hash range into ordered ranges."""


def topic_hash(topic: TopicName | str) -> int:
    """The 32-bit hash that places a topic in a bundle (Pulsar's ``getLongHashCode``)."""
    return zlib.crc32(str(topic).encode("utf-8"))


def boundaries_for(num_bundles: int) -> tuple[int, ...]:
    """The boundaries of ``num_bundles`` equal bundles (Pulsar's ``getBundles(numBundles)``)."""
    if num_bundles <= 0 or num_bundles > 1 << 32:
        raise InvalidBundles(f"the number of bundles must be in 1..2^32, got {num_bundles}")
    step = (1 << 32) // num_bundles
    return (*(i * step for i in range(num_bundles)), FULL_UPPER_BOUND)


def _format(value: int) -> str:
    return f"0x{value:08x}"


@dataclass(frozen=True, order=True)
class NamespaceBundle:
    """One hash range of one namespace: ``[lower, upper)``, or ``[lower, upper]`` when
    ``upper`` is :data:`FULL_UPPER_BOUND`."""

    namespace: str
    lower: int
    upper: int

    @property
    def range_name(self) -> str:
        """``0x00000000_0x40000000``: the bundle's name in paths and the admin API."""
        return f"{_format(self.lower)}_{_format(self.upper)}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.range_name}"

    def includes(self, hash_value: int) -> bool:
        if self.upper == FULL_UPPER_BOUND:
            return self.lower <= hash_value <= self.upper
        return self.lower <= hash_value < self.upper

    @classmethod
    def parse(cls, namespace: str, range_name: str) -> NamespaceBundle:
        """The bundle ``namespace/0xLOWER_0xUPPER``; raises :class:`InvalidBundles`."""
        lower, sep, upper = range_name.partition("_")
        try:
            low, high = int(lower, 16), int(upper, 16)
        except ValueError:
            raise InvalidBundles(f"invalid bundle range {range_name!r}") from None
        if not sep or not 0 <= low < high <= FULL_UPPER_BOUND:
            raise InvalidBundles(f"invalid bundle range {range_name!r}")
        return cls(namespace, low, high)


@dataclass(frozen=True)
class NamespaceBundles:
    """The bundles of one namespace, in hash order."""

    namespace: str
    boundaries: tuple[int, ...]

    def __post_init__(self) -> None:
        b = self.boundaries
        if len(b) < 2 or b[0] != 0 or b[-1] != FULL_UPPER_BOUND:
            raise InvalidBundles(
                f"bundle boundaries of {self.namespace} must run from {FIRST_BOUNDARY} to "
                f"{LAST_BOUNDARY}, got {[_format(x) for x in b]}"
            )
        if any(x >= y for x, y in itertools.pairwise(b)):
            raise InvalidBundles(f"bundle boundaries of {self.namespace} must increase")

    @classmethod
    def of(cls, namespace: str, num_bundles: int) -> NamespaceBundles:
        return cls(namespace, boundaries_for(num_bundles))

    @classmethod
    def from_policies(
        cls, namespace: str, policies: Mapping[str, Any], default_num_bundles: int
    ) -> NamespaceBundles:
        """The bundles stored in the namespace's policies (``bundles.boundaries``), else
        ``default_num_bundles`` equal ones."""
        data = policies.get("bundles")
        raw = data.get("boundaries") if isinstance(data, Mapping) else None
        if not raw:
            return cls.of(namespace, default_num_bundles)
        try:
            if not isinstance(raw, list):
                raise TypeError(raw)
            return cls(namespace, tuple(int(str(x), 16) for x in raw))
        except (ValueError, TypeError):
            raise InvalidBundles(f"unreadable bundle boundaries of {namespace}: {raw!r}") from None

    @property
    def bundles(self) -> tuple[NamespaceBundle, ...]:
        b = self.boundaries
        return tuple(NamespaceBundle(self.namespace, lo, hi) for lo, hi in itertools.pairwise(b))

    def find(self, topic: TopicName) -> NamespaceBundle:
        """The bundle that holds ``topic``."""
        value = topic_hash(topic)
        for bundle in self.bundles:
            if bundle.includes(value):
                return bundle
        raise AssertionError(f"hash {value:#x} outside the full range")  # boundaries are checked

    def bundle(self, range_name: str) -> NamespaceBundle:
        """The bundle named ``0xLO_0xHI``; :class:`InvalidBundles` when the namespace has none
        with exactly that range (for example, it was split meanwhile)."""
        wanted = NamespaceBundle.parse(self.namespace, range_name)
        if wanted not in self.bundles:
            raise InvalidBundles(
                f"namespace {self.namespace} has no bundle {range_name} (its bundles: "
                f"{', '.join(b.range_name for b in self.bundles)})"
            )
        return wanted

    def split(self, bundle: NamespaceBundle, at: int | None = None) -> NamespaceBundles:
        """These bundles with ``bundle`` cut in two at ``at`` (default: the middle of its
        range, Pulsar's ``range_equally_divide``).

        Raises:
            InvalidBundles: ``bundle`` is not one of these, or cannot be cut there.
        """
        if bundle not in self.bundles:
            raise InvalidBundles(f"namespace {self.namespace} has no bundle {bundle.range_name}")
        point = bundle.lower + (bundle.upper - bundle.lower) // 2 if at is None else at
        if not bundle.lower < point < bundle.upper:
            raise InvalidBundles(
                f"bundle {bundle.range_name} cannot be split at {point:#x}: the point must lie "
                "strictly inside its range"
            )
        return NamespaceBundles(self.namespace, tuple(sorted((*self.boundaries, point))))

    def to_json(self) -> dict[str, Any]:
        """Pulsar's ``BundlesData``."""
        return {
            "boundaries": [_format(x) for x in self.boundaries],
            "numBundles": len(self.boundaries) - 1,
        }


def bundles_data(num_bundles: int) -> dict[str, Any]:
    """The ``bundles`` policy of a namespace cut into ``num_bundles`` equal bundles."""
    return NamespaceBundles.of("-", num_bundles).to_json()


__all__ = [
    "FIRST_BOUNDARY",
    "FULL_UPPER_BOUND",
    "LAST_BOUNDARY",
    "InvalidBundles",
    "NamespaceBundle",
    "NamespaceBundles",
    "boundaries_for",
    "bundles_data",
    "topic_hash",
]
