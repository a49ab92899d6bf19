"""A minimal asyncio Pulsar-protocol client for tests that need to send exact commands or bytes.

It wraps the sans-I/O :class:`~braid.protocol.connection.ClientConnection` around a TCP stream:
``connect`` does the handshake, ``send`` queues commands, ``next_command`` returns the broker's
commands one by one (with a deadline), ``send_raw`` writes arbitrary bytes (garbage, oversize
frames) and ``wait_closed`` tells whether the broker hung up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from braid.protocol import commands
from braid.protocol.batch import build_entry
from braid.protocol.connection import ClientConnection
from braid.protocol.events import CommandReceived, ServerConnected
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb


class RawClient:
    """One raw connection to a broker."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        token: str | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.proto = (
            ClientConnection("braid-raw-test-client", created_at=0.0)
            if token is None
            else ClientConnection(
                "braid-raw-test-client",
                created_at=0.0,
                auth_method_name="token",
                auth_data=token.encode(),
            )
        )
        self._commands: deque[CommandReceived] = deque()
        self.connected: ServerConnected | None = None

    @classmethod
    async def open(
        cls, host: str, port: int, *, handshake: bool = True, token: str | None = None
    ) -> RawClient:
        reader, writer = await asyncio.open_connection(host, port)
        client = cls(reader, writer, token=token)
        if handshake:
            await client.handshake()
        return client

    async def handshake(self, within: float = 10.0) -> ServerConnected:
        await self._flush()
        async with asyncio.timeout(within):
            while self.connected is None:
                await self._read_once()
        return self.connected

    async def _flush(self) -> None:
        data = self.proto.data_to_send()
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def _read_once(self) -> bool:
        data = await self._reader.read(1 << 20)
        if not data:
            return False
        for event in self.proto.receive_data(data, 0.0):
            if isinstance(event, ServerConnected):
                self.connected = event
            elif isinstance(event, CommandReceived):
                self._commands.append(event)
        await self._flush()
        return True

    async def send(self, cmd: pb.BaseCommand, body: bytes | None = None) -> None:
        self.proto.send(cmd, body)
        await self._flush()

    async def send_raw(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def next_event(
        self,
        predicate: Callable[[pb.BaseCommand], bool] = lambda _: True,
        within: float = 10.0,
    ) -> CommandReceived:
        """The next command from the broker matching ``predicate`` (others are dropped)."""
        async with asyncio.timeout(within):
            while True:
                while self._commands:
                    event = self._commands.popleft()
                    if predicate(event.command):
                        return event
                if not await self._read_once():
                    raise ConnectionError("the broker closed the connection")

    async def next_command(
        self,
        predicate: Callable[[pb.BaseCommand], bool] = lambda _: True,
        within: float = 10.0,
    ) -> pb.BaseCommand:
        return (await self.next_event(predicate, within)).command

    async def wait_closed(self, within: float = 10.0) -> bool:
        """Read until the broker closes the socket; ``False`` if still open at the deadline."""
        try:
            async with asyncio.timeout(within):
                while True:
                    try:
                        data = await self._reader.read(1 << 20)
                    except ConnectionError:
                        return True
                    if not data:
                        return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass


# --- shorthands for the commands tests send most -----------------------------------------------


def _answer_to(request_id: int) -> Callable[[pb.BaseCommand], bool]:
    def matches(cmd: pb.BaseCommand) -> bool:
        inner = commands.inner(cmd)
        return getattr(inner, "request_id", None) == request_id

    return matches


async def request(raw: RawClient, cmd: pb.BaseCommand, request_id: int) -> pb.BaseCommand:
    """Send ``cmd`` and return the broker's answer to ``request_id`` (SUCCESS, ERROR, ...)."""
    await raw.send(cmd)
    return await raw.next_command(_answer_to(request_id))


def message_body(producer_name: str, sequence_id: int, payload: bytes, **fields: int) -> bytes:
    """A stored-form body with the metadata a producer would write (extra int fields allowed)."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=1_700_000_000_000
    )
    for name, value in fields.items():
        setattr(meta, name, value)
    return encode_message_body(meta, payload)


def batch_body(producer_name: str, sequence_id: int, payloads: list[bytes]) -> bytes:
    """A stored-form batch entry of ``payloads`` (what a batching producer sends)."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=1_700_000_000_000
    )
    return build_entry(meta, [(pb.SingleMessageMetadata(), p) for p in payloads])


async def publish(
    raw: RawClient,
    producer_id: int,
    producer_name: str,
    sequence_id: int,
    payload: bytes = b"x",
    *,
    num_messages: int | None = None,
) -> pb.BaseCommand:
    """SEND one entry and return its SEND_RECEIPT or SEND_ERROR; with ``num_messages`` the entry
    is a real batch of that many copies of ``payload``."""
    if num_messages is None:
        body = message_body(producer_name, sequence_id, payload)
    else:
        body = batch_body(producer_name, sequence_id, [payload] * num_messages)
    highest = None if num_messages is None else sequence_id + num_messages - 1
    await raw.send(
        commands.send(
            producer_id, sequence_id, num_messages=num_messages, highest_sequence_id=highest
        ),
        body,
    )
    return await raw.next_command(
        lambda c: (
            (c.type == pb.BaseCommand.SEND_RECEIPT and c.send_receipt.producer_id == producer_id)
            or (c.type == pb.BaseCommand.SEND_ERROR and c.send_error.producer_id == producer_id)
        )
    )
