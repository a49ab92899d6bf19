"""What the broker checks in every SEND before storing it: poison messages never reach storage.

The broker stores a SEND's body unchanged and replays it to every consumer, so one entry a client
cannot read poisons the topic for everyone: the official C++ client (the PyPI ``pulsar-client``)
reconnects in a loop on metadata that does not parse, and reads past its buffer - a segfault - when
``num_messages_in_batch`` claims more messages than the payload holds. :class:`SendValidator`
refuses, per SEND:

* a body whose ``MessageMetadata`` does not parse or lacks a required field (``producer_name``,
  ``sequence_id``, ``publish_time``);
* a payload larger than ``maxMessageSize`` (the frame limit leaves room for headers, so a payload
  could otherwise exceed it by that much);
* a batch whose payload does not split into exactly ``num_messages_in_batch`` messages
  (:func:`braid.protocol.batch.check_batch`); a compressed batch is decompressed first (at most
  ``max_uncompressed_size`` bytes, the limit Braid's own readers apply). A batch whose payload the
  broker cannot look into - encrypted, or compressed with a codec whose library is not installed
  (SNAPPY) - is stored unchecked, as Pulsar stores every batch.

A refusal is :class:`~braid.broker.errors.InvalidMessage`: a ``SEND_ERROR`` with the code
``ChecksumError``, because that is the one ``SEND_ERROR`` the official clients answer by failing
just that message - any other code makes them drop the connection and resend the same poison
forever. The message names the real reason; the producer stays usable for the messages after it.

Cost: a non-batched entry pays one parse of its metadata (~1.5 µs); a batch pays its walk
(compiled: ~5-10 ns per message, ~7 µs for a whole 1000 x 100 B entry; ~0.2-0.8 µs per message
where the package was installed without its C extension - ADR 0032) and, when compressed, its
decompression. The parsed metadata is returned
so later stages of the same SEND can read it without parsing again
(``PersistentTopic.publish`` hands it to a segment topic's key sampler).
"""

from __future__ import annotations

import logging
import struct
from typing import Any, cast

from google.protobuf.message import DecodeError

from braid.broker.errors import InvalidMessage
from braid.protocol.batch import (
    DEFAULT_MAX_UNCOMPRESSED_SIZE,
    NATIVE_BATCH_WALK,
    check_batch,
    decompress,
)
from braid.protocol.errors import CorruptPayload, UnsupportedCompression
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_U32 = struct.Struct(">I")
_FROM_STRING = pb.MessageMetadata.FromString


class SendValidator:
    """Checks SEND bodies against the broker's limits (one per broker; stateless).

    Args:
        max_message_size: ``maxMessageSize``: the largest payload (after the metadata) accepted.
        max_uncompressed_size: the largest ``uncompressed_size`` a compressed batch may claim.
    """

    __slots__ = ("max_message_size", "max_uncompressed_size")

    def __init__(
        self,
        max_message_size: int,
        *,
        max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE,
    ) -> None:
        self.max_message_size = max_message_size
        self.max_uncompressed_size = max_uncompressed_size
        if not NATIVE_BATCH_WALK:
            log.warning(
                "the compiled batch walk (braid.protocol._batch_walk) is not installed: batched "
                "SENDs are checked in pure Python, ~0.2-0.8 µs per message (reinstall Braid "
                "where a C compiler and the Python headers are available)"
            )

    def validate(self, body: bytes) -> pb.MessageMetadata:
        """The body's parsed metadata, if the entry may be stored.

        Args:
            body: ``[u32 metadataSize][MessageMetadata][payload]`` as the SEND carried it.

        Raises:
            InvalidMessage: why the entry is refused (the text goes to the client).
        """
        total = len(body)
        if total < 4:
            raise InvalidMessage(f"message body of {total} bytes has no metadata size")
        (meta_size,) = _U32.unpack_from(body, 0)
        payload_start = 4 + meta_size
        if payload_start > total:
            raise InvalidMessage(f"metadata size {meta_size} exceeds the {total - 4} bytes of body")
        payload_size = total - payload_start
        if payload_size > self.max_message_size:
            raise InvalidMessage(
                f"payload of {payload_size} bytes exceeds maxMessageSize {self.max_message_size}"
            )
        try:
            metadata = _FROM_STRING(body[4:payload_start])
        except DecodeError as exc:
            raise InvalidMessage(f"message metadata does not parse: {exc}") from None
        if not metadata.IsInitialized():
            # FindInitializationErrors exists at runtime but not in the type stubs.
            missing = ", ".join(cast(Any, metadata).FindInitializationErrors())
            raise InvalidMessage(f"message metadata lacks required fields: {missing}")
        if metadata.HasField("num_messages_in_batch"):
            self._check_batch(metadata, memoryview(body)[payload_start:])
        return metadata

    def _check_batch(self, metadata: pb.MessageMetadata, payload: memoryview) -> None:
        count = metadata.num_messages_in_batch
        if metadata.encryption_keys:
            return  # encrypted: only the consumers holding the key can look inside
        data: bytes | memoryview = payload
        if metadata.compression != pb.NONE:
            try:
                data = decompress(
                    metadata.compression,
                    bytes(payload),
                    metadata.uncompressed_size,
                    max_size=self.max_uncompressed_size,
                )
            except UnsupportedCompression:
                return  # no library here to look inside: stored as Pulsar stores every batch
            except CorruptPayload as exc:
                raise InvalidMessage(f"batch of {count} messages: {exc}") from None
        try:
            check_batch(data, count)
        except CorruptPayload as exc:
            raise InvalidMessage(
                f"num_messages_in_batch={count} does not match the payload: {exc}"
            ) from None


__all__ = ["InvalidMessage", "SendValidator"]
