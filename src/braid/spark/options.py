"""The data source's options: parsed and validated once, failing fast with the option's name.

Spark hands a data source a case-insensitive map of strings. :func:`source_options` and
:func:`sink_options` turn it into frozen values, refusing unknown options, malformed values and
options that make no sense together (``endingPosition`` on a stream, ``maxRecordsPerTrigger`` on
a batch read, a checkpoint for several topics) with :class:`BraidSparkOptionError`, whose message
names the option. Pure: no I/O.

Source options (``spark.read`` / ``spark.readStream``): ``service.url`` (required),
``admin.url`` (default ``http://<service host>:8080``), ``topic`` (required; a comma list),
``startingPosition`` (``earliest`` | ``latest`` | epoch milliseconds | a serialized
``braid.Checkpoint`` in base64 or hex | an offset JSON document; default ``latest`` for a
stream, ``earliest`` for a batch), ``endingPosition`` (batch only: ``latest`` | checkpoint |
offset JSON), ``maxRecordsPerTrigger`` (stream only), ``failOnDataLoss`` (default ``true``),
``receiverQueueSize`` (messages a range reader keeps in flight; default
:data:`DEFAULT_RECEIVER_QUEUE_SIZE`), ``receiverQueueBytes`` (and at most about this many bytes;
default :data:`DEFAULT_RECEIVER_QUEUE_BYTES`).

Sink options (``df.write`` / ``df.writeStream``): ``service.url``, ``admin.url``, ``topic`` (one),
``producerName`` (the stable base of the sink's producer names), ``exactlyOnce`` (default
``true``: requires broker deduplication).
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.spark.offsets import InvalidOffset, SourceOffset

if TYPE_CHECKING:
    from braid.core.checkpoint import Checkpoint

#: Keys Spark itself may add to a data source's options; accepted and ignored.
SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname"})
DEFAULT_ADMIN_PORT = 8080
_SOURCE_KEYS = frozenset(
    {
        "service.url",
        "admin.url",
        "topic",
        "startingposition",
        "endingposition",
        "maxrecordspertrigger",
        "failondataloss",
        "receiverqueuesize",
        "receiverqueuebytes",
    }
)
_SINK_KEYS = frozenset({"service.url", "admin.url", "topic", "producername", "exactlyonce"})
_SPELLING = {
    k.lower(): k
    for k in (
        "service.url",
        "admin.url",
        "topic",
        "startingPosition",
        "endingPosition",
        "maxRecordsPerTrigger",
        "failOnDataLoss",
        "receiverQueueSize",
        "receiverQueueBytes",
        "producerName",
        "exactlyOnce",
    )
}


#: Messages a range reader keeps in flight: about fifty entries of 1000-message batches, so the
#: broker's next entries are on their way while the executor decodes, in few, large dispatch
#: rounds (2000 left the read waiting on the broker: -30 % in bench/spark_bench.py; see
#: docs/benchmarks.md "Spark" for 10,000 against 50,000). Memory is bounded by
#: :data:`DEFAULT_RECEIVER_QUEUE_BYTES`, not by this, once messages are over ~320 bytes.
DEFAULT_RECEIVER_QUEUE_SIZE = 50_000
_MAX_RECEIVER_QUEUE_SIZE = 1_000_000
#: Bytes a range reader keeps in flight at most, about (entries as stored, counted as they
#: arrive: :mod:`braid.client.receive_window`): 16 MiB per reading task whatever the message size.
DEFAULT_RECEIVER_QUEUE_BYTES = 16 * 1024 * 1024
_MAX_RECEIVER_QUEUE_BYTES = 2**31


class BraidSparkOptionError(InvalidInputError):
    """An option of the ``braid`` data source is missing, unknown, malformed or conflicting."""


class StartKind(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    CHECKPOINT = "checkpoint"
    OFFSET = "offset"


@dataclass(frozen=True, slots=True)
class Position:
    """A ``startingPosition`` / ``endingPosition`` value.

    Exactly one of ``timestamp_ms`` (TIMESTAMP), ``checkpoint_bytes`` (CHECKPOINT) or ``offset``
    (OFFSET) is set for those kinds. The checkpoint is kept as its bytes: options travel to the
    executors pickled, and plain bytes pickle the same everywhere.
    """

    kind: StartKind
    timestamp_ms: int | None = None
    checkpoint_bytes: bytes | None = None
    offset: SourceOffset | None = None

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The ``braid.Checkpoint`` of a CHECKPOINT position."""
        if self.checkpoint_bytes is None:
            return None
        from braid.core.checkpoint import Checkpoint  # only this kind needs it (ADR 0072)

        return Checkpoint.from_bytes(self.checkpoint_bytes)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Validated options of a read."""

    service_url: str
    admin_url: str
    topics: tuple[str, ...]
    starting: Position
    ending: Position | None
    max_records_per_trigger: int | None
    fail_on_data_loss: bool
    receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE_SIZE
    receiver_queue_bytes: int = DEFAULT_RECEIVER_QUEUE_BYTES

    @property
    def min_publish_time_ms(self) -> int | None:
        """Rows published before this are skipped (a timestamp ``startingPosition``)."""
        return self.starting.timestamp_ms if self.starting.kind is StartKind.TIMESTAMP else None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Validated options of a write."""

    service_url: str
    admin_url: str
    topic: str
    producer_name: str | None
    exactly_once: bool


def _fail(key: str, message: str) -> BraidSparkOptionError:
    return BraidSparkOptionError(f"option {_SPELLING.get(key, key)!r}: {message}")


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(value, str):
            raise _fail(key, f"must be a string, got {value!r}")
        out[key.lower()] = value
    return out


def _check_known(options: Mapping[str, str], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(k for k in options if k.lower() not in allowed and k.lower() not in SPARK_KEYS)
    if unknown:
        known = ", ".join(sorted(_SPELLING[k] for k in allowed))
        raise BraidSparkOptionError(
            f"unknown option {unknown[0]!r} for a Braid {what} (known options: {known})"
        )


def _required(options: Mapping[str, str], key: str) -> str:
    value = options.get(key, "").strip()
    if not value:
        raise _fail(key, "is required")
    return value


def _service_url(options: Mapping[str, str]) -> str:
    url = _required(options, "service.url")
    parts = urlsplit(url)
    if parts.scheme not in ("pulsar", "pulsar+ssl") or not parts.hostname:
        raise _fail("service.url", f"must look like pulsar://host:6650, got {url!r}")
    return url


def _admin_url(options: Mapping[str, str], service_url: str) -> str:
    url = options.get("admin.url", "").strip()
    if not url:
        host = urlsplit(service_url).hostname
        return f"http://{host}:{DEFAULT_ADMIN_PORT}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail("admin.url", f"must look like http://host:8080, got {url!r}")
    return url.rstrip("/")


def _topic(key: str, text: str) -> str:
    try:
        name = TopicName.parse(text.strip())
    except InvalidInputError as exc:
        raise _fail(key, str(exc)) from exc
    if name.domain is TopicDomain.SEGMENT:
        raise _fail(key, f"{text!r} names a segment; segments are internal, use the topic:// name")
    return str(name)


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise _fail(key, f"must be true or false, got {value!r}")
    return lowered == "true"


def _checkpoint(key: str, text: str) -> Checkpoint:
    # Imported here: the planning process of a query that does not start from a checkpoint
    # does without (ADR 0072).
    from braid.core.checkpoint import Checkpoint
    from braid.core.varint import CorruptEncoding

    raw: bytes | None = None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        raise _fail(
            key,
            f"{text!r} is not earliest, latest, a timestamp in milliseconds, an offset JSON "
            "document or a serialized braid.Checkpoint (hex or base64)",
        )
    try:
        return Checkpoint.from_bytes(raw)
    except CorruptEncoding as exc:
        raise _fail(key, f"not a valid serialized braid.Checkpoint: {exc}") from exc


def _position(key: str, text: str, topics: tuple[str, ...]) -> Position:
    value = text.strip()
    lowered = value.lower()
    if lowered == "earliest":
        return Position(StartKind.EARLIEST)
    if lowered == "latest":
        return Position(StartKind.LATEST)
    if value.isdigit() and not value.startswith("0"):  # a hex checkpoint starts with "01"
        return Position(StartKind.TIMESTAMP, timestamp_ms=int(value))
    if value.startswith("{"):
        try:
            offset = SourceOffset.loads(value)
        except InvalidOffset as exc:
            raise _fail(key, str(exc)) from exc
        extra = sorted(set(offset.topics) - set(topics))
        if extra:
            raise _fail(key, f"names topic {extra[0]!r}, which is not in option 'topic'")
        return Position(StartKind.OFFSET, offset=offset)
    checkpoint = _checkpoint(key, value)
    if len(topics) != 1:
        raise _fail(key, "a braid.Checkpoint is the position of one topic; 'topic' lists several")
    if checkpoint.is_earliest:
        return Position(StartKind.EARLIEST)
    if checkpoint.is_latest:
        return Position(StartKind.LATEST)
    return Position(StartKind.CHECKPOINT, checkpoint_bytes=checkpoint.to_bytes())


def source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the options of ``spark.read`` (``streaming=False``) or ``spark.readStream``
    (``True``); ``None`` checks what holds for both (at ``load()``, before Spark says which).

    Raises:
        BraidSparkOptionError: naming the first bad option.
    """
    _check_known(options, _SOURCE_KEYS, "source")
    opts = _lower(options)
    service_url = _service_url(opts)
    admin_url = _admin_url(opts, service_url)
    names = [t for t in _required(opts, "topic").split(",") if t.strip()]
    topics = tuple(_topic("topic", t) for t in names)
    if not topics:
        raise _fail("topic", "is required")
    if len(set(topics)) != len(topics):
        raise _fail("topic", "lists a topic twice")
    default_start = "latest" if streaming else "earliest"
    starting = _position("startingposition", opts.get("startingposition", default_start), topics)
    ending: Position | None = None
    if "endingposition" in opts:
        if streaming is True:
            raise _fail("endingposition", "applies to batch reads (spark.read) only")
        ending = _position("endingposition", opts["endingposition"], topics)
        if ending.kind in (StartKind.EARLIEST, StartKind.TIMESTAMP):
            raise _fail(
                "endingposition", "must be latest, a braid.Checkpoint or an offset document"
            )
    max_records: int | None = None
    if "maxrecordspertrigger" in opts:
        if streaming is False:
            raise _fail("maxrecordspertrigger", "applies to streaming reads only")
        text = opts["maxrecordspertrigger"].strip()
        if not text.isdigit() or int(text) <= 0:
            raise _fail("maxrecordspertrigger", f"must be a positive integer, got {text!r}")
        max_records = int(text)
    queue_size = _bounded(
        opts, "receiverqueuesize", DEFAULT_RECEIVER_QUEUE_SIZE, _MAX_RECEIVER_QUEUE_SIZE
    )
    queue_bytes = _bounded(
        opts, "receiverqueuebytes", DEFAULT_RECEIVER_QUEUE_BYTES, _MAX_RECEIVER_QUEUE_BYTES
    )
    return SourceOptions(
        service_url=service_url,
        admin_url=admin_url,
        topics=topics,
        starting=starting,
        ending=ending,
        max_records_per_trigger=max_records,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        receiver_queue_size=queue_size,
        receiver_queue_bytes=queue_bytes,
    )


def _bounded(opts: Mapping[str, str], key: str, default: int, most: int) -> int:
    """The integer option ``key`` (lower case), in 1..``most``; ``default`` when absent."""
    if key not in opts:
        return default
    text = opts[key].strip()
    if not text.isdigit() or not 0 < int(text) <= most:
        raise _fail(key, f"must be an integer in 1..{most}, got {text!r}")
    return int(text)


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write`` / ``df.writeStream``.

    Raises:
        BraidSparkOptionError: naming the first bad option.
    """
    _check_known(options, _SINK_KEYS, "sink")
    opts = _lower(options)
    service_url = _service_url(opts)
    topic_text = _required(opts, "topic")
    if "," in topic_text:
        raise _fail("topic", "a sink writes to one topic")
    producer_name = opts.get("producername")
    if producer_name is not None:
        producer_name = producer_name.strip()
        if not producer_name or any(c.isspace() for c in producer_name):
            raise _fail(
                "producername", f"must be a non-empty name without spaces, got {producer_name!r}"
            )
    return SinkOptions(
        service_url=service_url,
        admin_url=_admin_url(opts, service_url),
        topic=_topic("topic", topic_text),
        producer_name=producer_name,
        exactly_once=_bool(opts, "exactlyonce", True),
    )


__all__ = [
    "BraidSparkOptionError",
    "Position",
    "SinkOptions",
    "SourceOptions",
    "StartKind",
    "sink_options",
    "source_options",
]
