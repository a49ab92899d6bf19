"""Producer configuration, validated once at ``create_producer``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from braid.client.errors import InvalidConfigurationError
from braid.client.schema import Schema, check_schema
from braid.core.errors import InvalidInputError
from braid.protocol.generated import PulsarApi_pb2 as pb

ACCESS_MODES: dict[str, int] = {
    "shared": pb.Shared,
    "exclusive": pb.Exclusive,
    "exclusive_with_fencing": pb.ExclusiveWithFencing,
    "wait_for_exclusive": pb.WaitForExclusive,
}
COMPRESSIONS: dict[str | None, int] = {
    None: pb.NONE,
    "none": pb.NONE,
    "lz4": pb.LZ4,
    "zlib": pb.ZLIB,
    "zstd": pb.ZSTD,
    "snappy": pb.SNAPPY,
}


@dataclass(frozen=True)
class ProducerOptions:
    """Everything ``create_producer`` accepts besides the topic (times in seconds).

    Attributes:
        producer_name: the name (``None``: the broker generates one for a classic topic, the
            client one for a scalable topic); per-segment producers are ``<name>-seg-<id>``.
        access_mode: ``"shared"``, ``"exclusive"``, ``"exclusive_with_fencing"`` or
            ``"wait_for_exclusive"`` (dashes accepted too).
        batching: group messages per segment into entries.
        batching_max_messages / batching_max_bytes / batching_max_delay: when a batch is sent.
        compression: ``None``, ``"lz4"``, ``"zlib"``, ``"zstd"`` or ``"snappy"``.
        send_timeout: a send not stored within this time fails with ``TimeoutError``
            (0 = never).
        max_pending_messages: sends beyond this many unconfirmed ones wait (blocking and
            awaiting forms) or fail with ``ProducerQueueFullError`` (``send_async``).
        initial_sequence_id: the first sequence id is this plus one (default: continue from
            what the broker reports for the producer name, else 0).
        schema: how values are encoded (:class:`~braid.client.schema.Schema`; ``None``:
            bytes), sent on every per-segment PRODUCER.
    """

    producer_name: str | None = None
    access_mode: str = "shared"
    batching: bool = True
    batching_max_messages: int = 1000
    batching_max_bytes: int = 128 * 1024
    batching_max_delay: float = 0.01
    compression: str | None = None
    send_timeout: float = 30.0
    max_pending_messages: int = 50_000
    initial_sequence_id: int | None = None
    schema: Schema | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "schema", check_schema(self.schema))
        mode = (
            self.access_mode.replace("-", "_").lower() if isinstance(self.access_mode, str) else ""
        )
        if mode not in ACCESS_MODES:
            raise InvalidConfigurationError(
                f"access_mode {self.access_mode!r} is not one of {sorted(ACCESS_MODES)}"
            )
        object.__setattr__(self, "access_mode", mode)
        codec = self.compression.lower() if isinstance(self.compression, str) else self.compression
        if codec not in COMPRESSIONS:
            raise InvalidConfigurationError(
                f"compression {self.compression!r} is not one of lz4, zlib, zstd, snappy or None"
            )
        object.__setattr__(self, "compression", codec)
        if self.producer_name is not None and (
            not isinstance(self.producer_name, str) or not self.producer_name
        ):
            raise InvalidConfigurationError("producer_name must be a non-empty string or None")
        _positive_int("batching_max_messages", self.batching_max_messages)
        _positive_int("batching_max_bytes", self.batching_max_bytes)
        _positive_int("max_pending_messages", self.max_pending_messages)
        for name in ("batching_max_delay", "send_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidConfigurationError(f"{name} must be a number >= 0: {value!r}")
        seq = self.initial_sequence_id
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < -1):
            raise InvalidConfigurationError(f"initial_sequence_id must be an int >= -1: {seq!r}")

    @property
    def wire_access_mode(self) -> int:
        """The ``ProducerAccessMode`` value of :attr:`access_mode`."""
        return ACCESS_MODES[self.access_mode]

    @property
    def exclusive(self) -> bool:
        """Whether the access mode attaches eagerly (every mode but shared)."""
        return self.access_mode != "shared"

    @property
    def wire_compression(self) -> int:
        """The ``CompressionType`` value of :attr:`compression`."""
        return COMPRESSIONS[self.compression]


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigurationError(f"{name} must be a positive integer: {value!r}")


def check_fields(
    value: Any, key: Any, properties: Any, event_time: Any, sequence_id: Any
) -> tuple[bytes, dict[str, str] | None]:
    """A message's value and properties as sent (bytes, a plain dict or ``None``).

    Raises:
        InvalidInputError: a field of the wrong type or range.
    """
    if type(value) is not bytes:
        if not isinstance(value, bytearray | memoryview):
            raise InvalidInputError(f"a message value must be bytes, got {type(value).__name__}")
        value = bytes(value)
    if key is not None and type(key) is not str:
        raise InvalidInputError(f"a message key must be a str or None, got {type(key).__name__}")
    if properties is not None:
        if not isinstance(properties, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
        ):
            raise InvalidInputError("message properties must map str to str")
        properties = dict(properties) or None
    if event_time is not None and (
        isinstance(event_time, bool) or not isinstance(event_time, int) or event_time < 0
    ):
        raise InvalidInputError(f"event_time must be milliseconds since the epoch: {event_time!r}")
    if sequence_id is not None and (
        isinstance(sequence_id, bool) or not isinstance(sequence_id, int) or sequence_id < 0
    ):
        raise InvalidInputError(f"sequence_id must be a non-negative int: {sequence_id!r}")
    return value, properties


__all__ = ["ACCESS_MODES", "COMPRESSIONS", "ProducerOptions", "check_fields"]
