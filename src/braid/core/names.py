"""Topic and namespace names: ``topic://``, ``segment://``, ``persistent://`` and ``tenant/ns``.

* ``topic://tenant/ns/name`` names a scalable topic (the segment DAG).
* ``segment://tenant/ns/name/<descriptor>`` names one managed segment of it, with the descriptor
  ``%04x-%04x-%d`` = hash start, hash end, segment id (``docs/protocol.md#segment-topic-names``).
* ``persistent://tenant/ns/name`` is a classic Pulsar topic; ``non-persistent://tenant/ns/name``
  a classic one without storage (messages reach only the consumers connected when they arrive).
* ``tenant/ns`` names a namespace (:class:`NamespaceName`), the home of topics and policies.

Allowed characters and lengths (our decision, close to Pulsar's ``NamedEntity`` rule), one rule
for every entry point (REST paths, LOOKUP, PRODUCER, SUBSCRIBE, the scalable-topic commands):

* tenant and namespace: 1 to :data:`MAX_TENANT_LENGTH` / :data:`MAX_NAMESPACE_LENGTH` (64) of
  ASCII letters, digits and ``_ - = : .`` (Pulsar's ``[-=:.\\w]`` with ``\\w`` in Java's ASCII
  sense), and neither ``.`` nor ``..`` (:data:`NAMESPACE_PART_PATTERN`);
* local name: 1 to :data:`MAX_LOCAL_NAME_LENGTH` (256) characters, none of them ``/``,
  whitespace, or a control, format, surrogate or unassigned code point, and neither ``.`` nor
  ``..``. A ``/`` would make the name ambiguous with a segment descriptor or with Pulsar's old
  four-part (cluster) names, which Braid does not accept.

The lengths are chosen so that every valid name fits where it is stored: the longest managed-ledger
name a topic can need - a segment of a scalable topic with the largest id,
``tenant/ns/segment/<local>/ffff-ffff-<id>`` - stays within the managed ledger's 512 characters,
so a namespace that can be created can hold any topic a client can name in it.

Segment descriptors are canonical: lowercase four-digit hex bounds and a decimal id without leading
zeros, so one segment has exactly one name.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from braid.core.errors import InvalidInputError
from braid.core.ranges import HashRange, InvalidHashRange

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
# Segment ids are Java longs upstream; keep them within a signed 64-bit value for interop.
MAX_SEGMENT_ID = 2**63 - 1

#: Longest tenant and namespace names, and longest local topic name (characters).
MAX_TENANT_LENGTH = 64
MAX_NAMESPACE_LENGTH = 64
MAX_LOCAL_NAME_LENGTH = 256
#: The characters of a tenant or namespace name, as a regular expression (the REST API states it
#: in its OpenAPI schema); ``.`` and ``..`` alone are refused besides.
NAMESPACE_PART_PATTERN = r"^[A-Za-z0-9_=:.\-]+$"
#: What a local topic name may not contain, as a pattern for schemas (a ``/`` or whitespace); the
#: full rule (no control, format, surrogate or unassigned code point) is :class:`TopicName`'s.
LOCAL_NAME_PATTERN = r"^[^/\s]+$"

_NAMESPACE_PART = re.compile(r"[A-Za-z0-9_=:.\-]+")
# Unicode categories a local name may not contain: spaces and separators (Zs, Zl, Zp, which with
# Cc cover every character str.isspace() accepts), controls, format characters, surrogates and
# unassigned code points. Private use (Co) is allowed.
_FORBIDDEN_IN_LOCAL_NAMES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Cn"})
_DESCRIPTOR = re.compile(r"([0-9a-f]{4})-([0-9a-f]{4})-(0|[1-9][0-9]*)")


class InvalidTopicName(InvalidInputError):
    """A topic or namespace name (or one of its parts: tenant, namespace, local name, segment
    descriptor) is malformed; the message says which part and why."""


class TopicDomain(StrEnum):
    """The scheme of a topic name."""

    TOPIC = "topic"
    SEGMENT = "segment"
    PERSISTENT = "persistent"
    #: Pulsar's storage-less topics: messages go from producers to connected consumers only.
    NON_PERSISTENT = "non-persistent"


def _check_namespace_part(kind: str, value: object, max_length: int) -> str:
    if not isinstance(value, str):
        raise InvalidTopicName(f"{kind} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidTopicName(f"{kind} is empty")
    if len(value) > max_length:
        raise InvalidTopicName(
            f"{kind} {_shortened(value)} is too long: {len(value)} characters, at most {max_length}"
        )
    if not _NAMESPACE_PART.fullmatch(value):
        bad = next(ch for ch in value if not _NAMESPACE_PART.fullmatch(ch))
        raise InvalidTopicName(
            f"{kind} {value!r} contains {bad!r}; allowed are ASCII letters, digits and _ - = : ."
        )
    if value in (".", ".."):
        raise InvalidTopicName(f"{kind} must not be {value!r}")
    return value


def check_tenant(tenant: object) -> str:
    """``tenant`` if it is a valid tenant name (the rule in this module's docstring).

    Raises:
        InvalidTopicName: not a string, empty, longer than :data:`MAX_TENANT_LENGTH`,
            ``.``/``..``, or a character outside ASCII letters, digits and ``_ - = : .``.
    """
    return _check_namespace_part("tenant", tenant, MAX_TENANT_LENGTH)


def check_namespace(namespace: object) -> str:
    """``namespace`` if it is a valid namespace name (the local part of ``tenant/namespace``).

    Raises:
        InvalidTopicName: as :func:`check_tenant`, for the namespace part.
    """
    return _check_namespace_part("namespace", namespace, MAX_NAMESPACE_LENGTH)


def check_local_name(value: object) -> str:
    """``value`` if it is a valid local topic name (the part after ``tenant/namespace/``).

    Raises:
        InvalidTopicName: not a string, empty, longer than :data:`MAX_LOCAL_NAME_LENGTH`,
            ``.``/``..``, or containing ``/``, whitespace or a control, format, surrogate or
            unassigned code point.
    """
    if not isinstance(value, str):
        raise InvalidTopicName(f"local name must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidTopicName("local name is empty")
    if len(value) > MAX_LOCAL_NAME_LENGTH:
        raise InvalidTopicName(
            f"local name {_shortened(value)} is too long: {len(value)} characters, "
            f"at most {MAX_LOCAL_NAME_LENGTH}"
        )
    if value in (".", ".."):
        raise InvalidTopicName(f"local name must not be {value!r}")
    for ch in value:
        if ch == "/":
            raise InvalidTopicName(f"local name {value!r} must not contain '/'")
        if unicodedata.category(ch) in _FORBIDDEN_IN_LOCAL_NAMES:
            raise InvalidTopicName(
                f"local name {value!r} contains the character U+{ord(ch):04X} "
                f"(whitespace or control characters are not allowed)"
            )
    return value


def _shortened(value: str) -> str:
    """``repr`` of a name, cut in the middle when long (errors must not echo 10,000 characters)."""
    return repr(value) if len(value) <= 80 else f"{value[:40]!r}...{value[-20:]!r}"


def format_descriptor(hash_range: HashRange, segment_id: int) -> str:
    """The segment descriptor ``%04x-%04x-%d``, e.g. ``0000-7fff-1``."""
    _check_segment_id(segment_id)
    return f"{hash_range.start:04x}-{hash_range.end:04x}-{segment_id}"


def _check_segment_id(segment_id: object) -> int:
    if isinstance(segment_id, bool) or not isinstance(segment_id, int):
        raise InvalidTopicName(f"segment id must be an integer, got {segment_id!r}")
    if not 0 <= segment_id <= MAX_SEGMENT_ID:
        raise InvalidTopicName(f"segment id {segment_id} is outside 0..{MAX_SEGMENT_ID}")
    return segment_id


def parse_descriptor(text: str) -> tuple[HashRange, int]:
    """Parse a segment descriptor ``ssss-eeee-id`` into its hash range and segment id.

    Raises:
        InvalidTopicName: not in the canonical form, or the range is invalid (end below start).
    """
    if not isinstance(text, str):
        raise InvalidTopicName(f"a segment descriptor must be a string, got {text!r}")
    match = _DESCRIPTOR.fullmatch(text)
    if match is None:
        raise InvalidTopicName(
            f"invalid segment descriptor {text!r}: expected '<start>-<end>-<id>' with four "
            "lowercase hex digits per bound and a decimal id without leading zeros, "
            "e.g. '0000-7fff-1'"
        )
    try:
        hash_range = HashRange(int(match.group(1), 16), int(match.group(2), 16))
    except InvalidHashRange as exc:
        raise InvalidTopicName(f"invalid segment descriptor {text!r}: {exc}") from exc
    return hash_range, _check_segment_id(int(match.group(3)))


@dataclass(frozen=True, slots=True)
class NamespaceName:
    """A validated namespace name; ``str()`` gives ``tenant/namespace``.

    Raises:
        InvalidTopicName: the tenant or namespace part is invalid (:func:`check_tenant`,
            :func:`check_namespace`).
    """

    tenant: str
    namespace: str

    def __post_init__(self) -> None:
        check_tenant(self.tenant)
        check_namespace(self.namespace)

    @classmethod
    def parse(cls, text: str) -> NamespaceName:
        """Parse ``"tenant/namespace"``.

        Raises:
            InvalidTopicName: not exactly two ``/``-separated parts, or a bad part.
        """
        if not isinstance(text, str):
            raise InvalidTopicName(f"a namespace name must be a string, got {type(text).__name__}")
        tenant, separator, namespace = text.partition("/")
        if not separator or "/" in namespace:
            raise InvalidTopicName(f"invalid namespace {text!r}: expected tenant/namespace")
        try:
            return cls(tenant, namespace)
        except InvalidTopicName as exc:
            raise InvalidTopicName(f"invalid namespace {text!r}: {exc}") from exc

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True, slots=True)
class TopicName:
    """A validated topic name; ``str()`` gives the full ``domain://tenant/ns/local`` form.

    For the ``segment`` domain the local name is ``<parent-local-name>/<descriptor>`` (the only
    place a ``/`` may appear); :meth:`as_segment` gives the structured :class:`SegmentTopicName`.
    """

    domain: TopicDomain
    tenant: str
    namespace: str
    local_name: str

    def __post_init__(self) -> None:
        if not isinstance(self.domain, TopicDomain):
            raise InvalidTopicName(f"domain must be a TopicDomain, got {self.domain!r}")
        check_tenant(self.tenant)
        check_namespace(self.namespace)
        if self.domain is TopicDomain.SEGMENT:
            if not isinstance(self.local_name, str) or self.local_name.count("/") != 1:
                raise InvalidTopicName(
                    f"segment local name {self.local_name!r} must be '<name>/<descriptor>'"
                )
            parent_local, descriptor = self.local_name.split("/")
            check_local_name(parent_local)
            parse_descriptor(descriptor)
        else:
            check_local_name(self.local_name)

    @classmethod
    def parse(cls, text: str, default_domain: TopicDomain = TopicDomain.PERSISTENT) -> TopicName:
        """Parse a full name, or a short form in ``default_domain``.

        Short forms: ``name`` means ``<default_domain>://public/default/name`` and
        ``tenant/ns/name`` means ``<default_domain>://tenant/ns/name`` (as Pulsar does).
        The names parsed last are remembered (a name is immutable and its parse a pure
        function of the text): a broker parses the same few names on every request.

        Raises:
            InvalidTopicName: unknown domain, wrong number of parts, or a bad part.
        """
        if not isinstance(text, str):
            raise InvalidTopicName(f"a topic name must be a string, got {type(text).__name__}")
        if cls is TopicName and isinstance(default_domain, TopicDomain):
            return _parse_remembered(text, default_domain)
        return cls._parse(text, default_domain)

    @classmethod
    def _parse(cls, text: str, default_domain: TopicDomain) -> TopicName:
        if "://" in text:
            scheme, _, rest = text.partition("://")
            try:
                domain = TopicDomain(scheme)
            except ValueError:
                raise InvalidTopicName(
                    f"invalid topic name {_shortened(text)}: unknown domain {scheme!r} "
                    "(expected topic, segment, persistent or non-persistent)"
                ) from None
        else:
            if default_domain is TopicDomain.SEGMENT:
                raise InvalidTopicName(
                    f"invalid topic name {_shortened(text)}: segment names have no short form"
                )
            domain, rest = default_domain, text
            parts = rest.split("/")
            if len(parts) == 1:
                rest = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{text}"
            elif len(parts) != 3:
                raise InvalidTopicName(
                    f"invalid topic name {_shortened(text)}: "
                    "a short name is 'name' or 'tenant/ns/name'"
                )
        parts = rest.split("/")
        expected = 4 if domain is TopicDomain.SEGMENT else 3
        if len(parts) != expected:
            shape = "tenant/ns/name/descriptor" if expected == 4 else "tenant/ns/name"
            hint = ""
            if domain is not TopicDomain.SEGMENT and len(parts) > 3:
                hint = (
                    " (the local name must not contain '/'; "
                    "four-part cluster names are unsupported)"
                )
            raise InvalidTopicName(
                f"invalid topic name {_shortened(text)}: expected {domain}://{shape}, "
                f"found {len(parts)} '/'-separated parts{hint}"
            )
        try:
            local = parts[2] if expected == 3 else f"{parts[2]}/{parts[3]}"
            return cls(domain, parts[0], parts[1], local)
        except InvalidTopicName as exc:
            raise InvalidTopicName(f"invalid topic name {_shortened(text)}: {exc}") from exc

    @property
    def namespace_name(self) -> str:
        """``tenant/namespace``."""
        return f"{self.tenant}/{self.namespace}"

    def with_domain(self, domain: TopicDomain) -> TopicName:
        """The same tenant/namespace/local name in another (non-segment) domain."""
        if domain is TopicDomain.SEGMENT or self.domain is TopicDomain.SEGMENT:
            raise InvalidTopicName(f"cannot change {self} to or from the segment domain")
        return TopicName(domain, self.tenant, self.namespace, self.local_name)

    def as_segment(self) -> SegmentTopicName:
        """The structured form of a ``segment://`` name.

        Raises:
            InvalidTopicName: this is not a segment name.
        """
        if self.domain is not TopicDomain.SEGMENT:
            raise InvalidTopicName(f"{self} is not a segment:// name")
        return SegmentTopicName.parse(str(self))

    def __str__(self) -> str:
        return f"{self.domain.value}://{self.tenant}/{self.namespace}/{self.local_name}"


@functools.lru_cache(maxsize=8192)
def _parse_remembered(text: str, default_domain: TopicDomain) -> TopicName:
    return TopicName._parse(text, default_domain)


@dataclass(frozen=True, slots=True)
class SegmentTopicName:
    """The ``segment://`` name of one segment of a scalable topic.

    ``str()`` gives ``segment://tenant/ns/name/ssss-eeee-id``.

    Raises:
        InvalidTopicName: the parent is not a ``topic://`` name or the segment id is invalid.
    """

    parent: TopicName
    hash_range: HashRange
    segment_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.parent, TopicName):
            raise InvalidTopicName(f"segment parent must be a TopicName, got {self.parent!r}")
        if self.parent.domain is not TopicDomain.TOPIC:
            raise InvalidTopicName(
                f"the parent of a segment must be a topic:// name, got {self.parent}"
            )
        if not isinstance(self.hash_range, HashRange):
            raise InvalidTopicName(f"segment hash range must be a HashRange: {self.hash_range!r}")
        _check_segment_id(self.segment_id)

    @classmethod
    def of(cls, parent: TopicName, hash_range: HashRange, segment_id: int) -> SegmentTopicName:
        """The name of segment ``segment_id`` covering ``hash_range`` of ``parent``."""
        return cls(parent, hash_range, segment_id)

    @classmethod
    def parse(cls, text: str) -> SegmentTopicName:
        """Parse ``segment://tenant/ns/name/descriptor``.

        Raises:
            InvalidTopicName: not a ``segment://`` name or a malformed part.
        """
        if isinstance(text, str) and not text.startswith(f"{TopicDomain.SEGMENT.value}://"):
            raise InvalidTopicName(
                f"invalid segment name {text!r}: expected segment://tenant/ns/name/descriptor"
            )
        name = TopicName.parse(text)
        parent_local, descriptor = name.local_name.split("/")
        hash_range, segment_id = parse_descriptor(descriptor)
        parent = TopicName(TopicDomain.TOPIC, name.tenant, name.namespace, parent_local)
        return cls(parent, hash_range, segment_id)

    @property
    def descriptor(self) -> str:
        """``%04x-%04x-%d`` of hash start, hash end and segment id."""
        return format_descriptor(self.hash_range, self.segment_id)

    @property
    def topic_name(self) -> TopicName:
        """This name as a generic :class:`TopicName` in the segment domain."""
        return TopicName(
            TopicDomain.SEGMENT,
            self.parent.tenant,
            self.parent.namespace,
            f"{self.parent.local_name}/{self.descriptor}",
        )

    def __str__(self) -> str:
        return (
            f"{TopicDomain.SEGMENT.value}://{self.parent.tenant}/{self.parent.namespace}/"
            f"{self.parent.local_name}/{self.descriptor}"
        )


__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_TENANT",
    "LOCAL_NAME_PATTERN",
    "MAX_LOCAL_NAME_LENGTH",
    "MAX_NAMESPACE_LENGTH",
    "MAX_SEGMENT_ID",
    "MAX_TENANT_LENGTH",
    "NAMESPACE_PART_PATTERN",
    "InvalidTopicName",
    "NamespaceName",
    "SegmentTopicName",
    "TopicDomain",
    "TopicName",
    "check_local_name",
    "check_namespace",
    "check_tenant",
    "format_descriptor",
    "parse_descriptor",
]
