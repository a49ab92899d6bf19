"""A TCP proxy on 127.0.0.1 that can lose one Pulsar frame and cut the connection it travelled on.

Between clients and one broker (the broker advertises the proxy as its listener, so lookups and
the DAG watch send every client through it), :class:`FrameCutProxy` forwards bytes both ways, on
its own event loop in a background thread. When armed (:meth:`FrameCutProxy.arm`), the first
broker-to-client frame whose ``BaseCommand`` matches is *not* forwarded: the proxy runs the test's
callback (in a worker thread, so it may block on the broker - a split, say), then closes both
sockets. The client sees what a real network fault shows it: a connection that died before the
answer came; the broker has done its work (for a SEND_RECEIPT: the message is stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable

from braid.protocol.generated import PulsarApi_pb2 as pb

_U32 = struct.Struct(">I")

Match = Callable[[pb.BaseCommand], bool]


class FrameCutProxy:
    """See the module docstring. ``port`` is known at construction (the socket is bound)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.upstream_port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._match: Match | None = None
        self._before_cut: Callable[[], None] | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        #: Set once an armed cut happened (the frame was dropped and the connection closed).
        self.cut = threading.Event()
        #: What the callback raised, if it did.
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def start(self, upstream_port: int) -> FrameCutProxy:
        self.upstream_port = upstream_port
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    def arm(self, match: Match, before_cut: Callable[[], None]) -> None:
        """Drop the next broker frame ``match`` accepts, run ``before_cut``, cut the connection."""
        self.cut.clear()
        self.error = None
        self._before_cut = before_cut
        self._match = match

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        pair = (writer, up_writer)
        self._writers.update(pair)
        upstream = asyncio.ensure_future(self._pipe(reader, up_writer, pair))
        try:
            await self._frames(up_reader, writer, pair)
        finally:
            upstream.cancel()
            for w in pair:
                w.close()
                self._writers.discard(w)

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, ...],
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        for w in pair:
            w.close()

    async def _frames(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, ...],
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readexactly(4)
                frame = await reader.readexactly(_U32.unpack(head)[0])
                match = self._match
                if match is not None:
                    cmd_size = _U32.unpack_from(frame)[0]
                    cmd = pb.BaseCommand.FromString(frame[4 : 4 + cmd_size])
                    if match(cmd):
                        self._match = None
                        await self._run_before_cut()
                        for w in pair:
                            w.transport.abort()
                        self.cut.set()
                        return
                writer.write(head + frame)
                await writer.drain()

    async def _run_before_cut(self) -> None:
        callback = self._before_cut
        if callback is None:
            return
        try:
            await asyncio.to_thread(callback)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.transport.abort()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._sock.close()


def receipt_of(sequence_id: int) -> Match:
    """Matches the SEND_RECEIPT of ``sequence_id``."""

    def match(cmd: pb.BaseCommand) -> bool:
        return (
            cmd.type == pb.BaseCommand.SEND_RECEIPT and cmd.send_receipt.sequence_id == sequence_id
        )

    return match


__all__ = ["FrameCutProxy", "receipt_of"]
