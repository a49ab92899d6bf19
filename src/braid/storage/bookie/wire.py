"""The bookie wire protocol's frames and messages (pure, no I/O; ADR 0033).

A connection carries frames both ways::

    [u32 body length][u32 CRC32C of body][body = one protobuf Request or Response]

(big-endian, as every length on the Pulsar and BookKeeper wires). :class:`FrameDecoder` turns a
byte stream into bodies: a length above the connection's limit, or a checksum that does not
match, raises :class:`BadFrame` - the connection is then closed (with one log line) by its owner,
since nothing after a bad frame can be trusted. A body that is not a valid message of the
expected type is a :class:`BadFrame` too.

Requests carry a transaction id chosen by the client (unique among its requests in flight on
that connection); the response echoes it. Responses can come back out of order across ledgers;
adds of one ledger are answered in the order the bookie journaled them.

Status codes map one-to-one to the storage error types (:data:`STATUS_OF_ERROR`): the bookie sends
the code of the error it raised, and the client raises the same type - except ``ESHUTDOWN`` (the
bookie is closing), which its clients raise as ``BookieUnavailable``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from braid.core.errors import InvalidInputError
from braid.storage.api import (
    BookieUnavailable,
    EntryTooLarge,
    InvalidEntryId,
    InvalidLedgerId,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    StorageClosed,
    StorageError,
    StorageIOError,
    StorageReadOnly,
)
from braid.storage.bookie.engine import LacInfo, StoredEntry
from braid.storage.bookie.generated import BookieProtocol_pb2 as bpb

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FRAME_HEADER_SIZE",
    "STATUS_OF_ERROR",
    "BadFrame",
    "FrameDecoder",
    "bpb",
    "encode_frame",
    "error_for_status",
    "status_for_error",
]

_FRAME_HEADER = struct.Struct(">II")
FRAME_HEADER_SIZE = _FRAME_HEADER.size
#: BookKeeper's ``nettyMaxFrameSizeBytes`` default (5 MiB) plus room for the largest entry a
#: bookie stores and its headers: one add of a maximal entry always fits.
DEFAULT_MAX_FRAME_SIZE = 6 * 1024 * 1024

#: Sentinel first entry id of a fence-only read (BookKeeper's ``LAST_ADD_CONFIRMED``).
FENCE_ONLY = -1


class BadFrame(InvalidInputError):
    """A frame whose length is over the limit, whose checksum fails, or whose body is not a
    message of the protocol: the connection that carried it is closed."""


#: The storage error raised for each non-OK status, and the status sent for each error type. The
#: one table both directions read.
STATUS_OF_ERROR: dict[type[StorageError], int] = {
    NoSuchLedger: bpb.ENOLEDGER,
    NoSuchEntry: bpb.ENOENTRY,
    StorageIOError: bpb.EIO,
    LedgerFenced: bpb.EFENCED,
    StorageReadOnly: bpb.EREADONLY,
    StorageClosed: bpb.ESHUTDOWN,
    EntryTooLarge: bpb.ETOOLARGE,
    InvalidLedgerId: bpb.EINVALIDLEDGERID,
    InvalidEntryId: bpb.EINVALIDENTRYID,
}
_ERROR_OF_STATUS: dict[int, type[StorageError]] = {v: k for k, v in STATUS_OF_ERROR.items()}
# A bookie that is closing is, to its clients, a bookie that is not available (the writer moves
# on to others); ``StorageClosed`` on the client side means the client itself was closed.
_ERROR_OF_STATUS[bpb.ESHUTDOWN] = BookieUnavailable


def status_for_error(error: BaseException) -> int:
    """The status code a bookie answers with for ``error`` (``EBADREQ`` for a type it does not
    map: a request it could not make sense of)."""
    for cls in type(error).__mro__:
        status = STATUS_OF_ERROR.get(cls)
        if status is not None:
            return status
    return bpb.EBADREQ


def error_for_status(status: int, message: str) -> StorageError:
    """The storage error a client raises for a non-OK ``status``."""
    cls = _ERROR_OF_STATUS.get(status, StorageError)
    known = status in bpb.StatusCode.values()
    name = bpb.StatusCode.Name(status) if known else str(status)  # type: ignore[arg-type]
    return cls(message or f"bookie answered {name}")


def encode_frame(body: bytes) -> bytes:
    """One frame around ``body`` (a serialized message)."""
    return _FRAME_HEADER.pack(len(body), crc32c.crc32c(body)) + body


class FrameDecoder:
    """Splits a byte stream into frame bodies, checking length and checksum.

    Feed bytes as they arrive with :meth:`feed`; it returns every body they complete, in order,
    and keeps the incomplete rest. Each body is copied once out of the received bytes; a frame
    that arrives in many pieces is only joined once it is complete. Once it raised
    :class:`BadFrame` the decoder is broken: the stream is not resynchronised (the caller closes
    the connection).
    """

    __slots__ = ("_buffer", "_max", "_need")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._max = max_frame_size
        self._buffer = bytearray()
        self._need = FRAME_HEADER_SIZE  # bytes the buffer must hold before a frame is complete

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data`` and return the bodies of the frames it completes.

        Raises:
            BadFrame: a frame announces more than the limit, or its checksum does not match.
        """
        buf = self._buffer
        if buf:
            buf += data
            if len(buf) < self._need:
                return []
            data = bytes(buf)
            buf.clear()
        bodies: list[bytes] = []
        pos = 0
        end = len(data)
        unpack = _FRAME_HEADER.unpack_from
        while True:
            if end - pos < FRAME_HEADER_SIZE:
                self._need = FRAME_HEADER_SIZE
                break
            length, checksum = unpack(data, pos)
            if length > self._max:
                raise BadFrame(f"frame of {length} bytes exceeds the limit of {self._max}")
            stop = pos + FRAME_HEADER_SIZE + length
            if stop > end:
                self._need = FRAME_HEADER_SIZE + length
                break
            body = data[pos + FRAME_HEADER_SIZE : stop]
            if crc32c.crc32c(body) != checksum:
                raise BadFrame(f"frame of {length} bytes fails its CRC32C checksum")
            bodies.append(body)
            pos = stop
        if pos < end:
            buf += memoryview(data)[pos:]
        return bodies


# -- messages --------------------------------------------------------------------------------


def parse_request(body: bytes) -> bpb.Request:
    """Decode a request body. Raises :class:`BadFrame` when it is not a complete ``Request``."""
    request = bpb.Request()
    try:
        request.ParseFromString(body)
    except Exception as exc:  # protobuf's DecodeError; upb raises it for missing required too
        raise BadFrame(f"not a bookie request: {exc}") from None
    if not request.IsInitialized():
        raise BadFrame("a bookie request with required fields missing")
    return request


def parse_response(body: bytes) -> bpb.Response:
    """Decode a response body. Raises :class:`BadFrame` when it is not a complete ``Response``."""
    response = bpb.Response()
    try:
        response.ParseFromString(body)
    except Exception as exc:
        raise BadFrame(f"not a bookie response: {exc}") from None
    if not response.IsInitialized():
        raise BadFrame("a bookie response with required fields missing")
    return response


# One message of each per-add kind, reused: an add's request (client) and its acknowledgement
# (bookie) are built and serialised in one synchronous step, so nothing else can see them half
# set, and the hot path skips allocating three message objects per entry.
_ADD_REQUEST = bpb.Request()
_ADD_REQUEST.header.version = bpb.VERSION_ONE
_ADD_REQUEST.header.operation = bpb.ADD_ENTRY
_ADD_RESPONSE = bpb.Response()
_ADD_RESPONSE.header.version = bpb.VERSION_ONE
_ADD_RESPONSE.header.operation = bpb.ADD_ENTRY
_ADD_RESPONSE.status = bpb.EOK


def add_request(
    txn_id: int,
    ledger_id: int,
    entry_id: int,
    data: bytes,
    last_add_confirmed: int,
    length: int,
    recovery: bool,
) -> bytes:
    """The frame of an add."""
    request = _ADD_REQUEST
    request.header.txn_id = txn_id
    add = request.add_request
    add.ledger_id = ledger_id
    add.entry_id = entry_id
    add.last_add_confirmed = last_add_confirmed
    add.length = length
    add.body = data
    if recovery:
        add.flag = bpb.AddRequest.RECOVERY_ADD
    else:
        add.ClearField("flag")
    return encode_frame(request.SerializeToString())


#: One add of a batch: ``(txn_id, ledger_id, entry_id, data, last_add_confirmed, length,
#: recovery)``.
BatchedAdd = tuple[int, int, int, bytes, int, int, bool]

_ADD_ENTRIES_REQUEST = bpb.Request()
_ADD_ENTRIES_REQUEST.header.version = bpb.VERSION_ONE
_ADD_ENTRIES_REQUEST.header.operation = bpb.ADD_ENTRIES
_ADD_ENTRIES_REQUEST.header.txn_id = 0
_ADD_ENTRIES_RESPONSE = bpb.Response()
_ADD_ENTRIES_RESPONSE.header.version = bpb.VERSION_ONE
_ADD_ENTRIES_RESPONSE.header.operation = bpb.ADD_ENTRIES
_ADD_ENTRIES_RESPONSE.header.txn_id = 0
_ADD_ENTRIES_RESPONSE.status = bpb.EOK


def add_entries_request(adds: Sequence[BatchedAdd]) -> bytes:
    """The frame of several adds (``ADD_ENTRIES``), each with its own transaction id."""
    batch = _ADD_ENTRIES_REQUEST.add_entries_request
    del batch.adds[:]
    new = batch.adds.add
    for txn_id, ledger_id, entry_id, data, lac, length, recovery in adds:
        if recovery:
            new(
                txn_id=txn_id,
                ledger_id=ledger_id,
                entry_id=entry_id,
                last_add_confirmed=lac,
                length=length,
                body=data,
                flag=bpb.AddRequest.RECOVERY_ADD,
            )
        else:
            new(
                txn_id=txn_id,
                ledger_id=ledger_id,
                entry_id=entry_id,
                last_add_confirmed=lac,
                length=length,
                body=data,
            )
    return encode_frame(_ADD_ENTRIES_REQUEST.SerializeToString())


def add_entries_response(txn_ids: Sequence[int]) -> bytes:
    """The frame acknowledging several adds (each durable on this bookie), by transaction id."""
    ids = _ADD_ENTRIES_RESPONSE.add_entries_response.txn_ids
    del ids[:]
    ids.extend(txn_ids)
    return encode_frame(_ADD_ENTRIES_RESPONSE.SerializeToString())


def read_request(txn_id: int, ledger_id: int, first: int, last: int, *, fence: bool) -> bytes:
    """The frame of a read of ``first..last`` (``first = -1`` with ``fence``: fence only)."""
    request = bpb.Request()
    request.header.version = bpb.VERSION_ONE
    request.header.operation = bpb.READ_ENTRY
    request.header.txn_id = txn_id
    read = request.read_request
    read.ledger_id = ledger_id
    read.first_entry_id = first
    if last != first:
        read.last_entry_id = last
    if fence:
        read.flag = bpb.ReadRequest.FENCE_LEDGER
    return encode_frame(request.SerializeToString())


def read_lac_request(txn_id: int, ledger_id: int) -> bytes:
    """The frame of a read of a ledger's LAC and last stored entry."""
    request = bpb.Request()
    request.header.version = bpb.VERSION_ONE
    request.header.operation = bpb.READ_LAC
    request.header.txn_id = txn_id
    request.read_lac_request.ledger_id = ledger_id
    return encode_frame(request.SerializeToString())


def delete_ledger_request(txn_id: int, ledger_id: int) -> bytes:
    """The frame of a ledger deletion."""
    request = bpb.Request()
    request.header.version = bpb.VERSION_ONE
    request.header.operation = bpb.DELETE_LEDGER
    request.header.txn_id = txn_id
    request.delete_ledger_request.ledger_id = ledger_id
    return encode_frame(request.SerializeToString())


def response_for(request: bpb.Request) -> bpb.Response:
    """An ``EOK`` response skeleton echoing ``request``'s header."""
    response = bpb.Response()
    response.header.CopyFrom(request.header)
    response.status = bpb.EOK
    return response


def error_response(header: bpb.PacketHeader, error: BaseException) -> bytes:
    """The frame answering a request (by its header) with the status of ``error``."""
    response = bpb.Response()
    response.header.CopyFrom(header)
    response.status = status_for_error(error)  # type: ignore[assignment]
    response.error_message = str(error)
    return encode_frame(response.SerializeToString())


def add_response(txn_id: int, ledger_id: int, entry_id: int) -> bytes:
    """The frame acknowledging an add (the entry is durable on this bookie)."""
    response = _ADD_RESPONSE
    response.header.txn_id = txn_id
    add = response.add_response
    add.ledger_id = ledger_id
    add.entry_id = entry_id
    return encode_frame(response.SerializeToString())


def entries_of(read: bpb.ReadResponse) -> list[StoredEntry]:
    """The entries a read response carries."""
    return [StoredEntry(e.entry_id, e.body, e.last_add_confirmed, e.length) for e in read.entries]


def lac_of_fence(read: bpb.ReadResponse) -> LacInfo:
    """A fencing read's ledger state at the fence."""
    if not (read.HasField("last_add_confirmed") and read.HasField("last_entry_id")):
        raise BadFrame("a fencing read response without the ledger's LAC")
    return LacInfo(read.last_add_confirmed, read.last_entry_id)
