"""How many messages one per-segment consumer lets the broker send ahead: its receive window.

Pulsar's flow control counts messages: a consumer grants ``receiverQueueSize`` permits and grants
them again as the application takes messages. A window counted in messages alone bounds memory
only if messages are small - 50,000 permits are 5 MB of 100-byte messages but 5 GB of 100 kB ones.
A :class:`ReceiveWindow` may also be bounded in bytes (``receiver_queue_bytes``, as Kafka's
``fetch.max.bytes`` counted as entries arrive, compressed where the producer compressed): the
window is then ``receiver_queue_bytes / (average message size seen)`` messages, never more than
``receiver_queue_size`` and at least one. The average weighs recent entries most (each entry's
weight decays by 1/8 per later entry), so a topic whose messages grow shrinks the window within a
few entries, not after as many messages as it has already read. Until a first entry has been
seen the window is one message (the broker sends one whole entry for it): no guess at sizes.

Sans-I/O: the subscriber asks it how many permits to send and sends them. Invariants:

* without a byte bound the window is ``receiver_queue_size`` and every grant gives back exactly
  what was taken - Pulsar's behaviour;
* ``window`` is the number of permits the client has handed out and not yet seen taken; it moves
  towards :meth:`target` by granting more (as soon as an entry shows the window may grow) or by
  granting less than was taken (when it must shrink) - permits are never revoked;
* ``1 <= target() <= receiver_queue_size``.
"""

from __future__ import annotations

#: How much of the size average an entry leaves to the next ones.
_KEEP = 0.875


class ReceiveWindow:
    """The receive window of one per-segment consumer (see the module docstring)."""

    __slots__ = ("_bytes_seen", "_messages_seen", "max_bytes", "max_messages", "window")

    def __init__(self, max_messages: int, max_bytes: int | None = None) -> None:
        if max_messages < 1:
            raise ValueError(f"max_messages must be >= 1: {max_messages}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1: {max_bytes}")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._bytes_seen = 0.0
        self._messages_seen = 0.0
        #: Permits handed out (to the broker, or as messages in the queue) not yet seen taken.
        self.window = self.target()

    def target(self) -> int:
        """The window the byte bound allows now (``max_messages`` without a byte bound)."""
        if self.max_bytes is None:
            return self.max_messages
        if not self._messages_seen:
            return 1
        fit = int(self.max_bytes * self._messages_seen / max(1.0, self._bytes_seen))
        return max(1, min(self.max_messages, fit))

    @property
    def threshold(self) -> int:
        """How many taken messages make a grant worth a FLOW: half the window."""
        return max(1, self.window // 2)

    def restart(self) -> int:
        """A new subscription (attach, resume): the whole window is granted afresh."""
        self.window = self.target()
        return self.window

    def received(self, nbytes: int, messages: int) -> int:
        """An entry of ``messages`` messages and ``nbytes`` bytes arrived; the permits to grant
        now because the window may grow (0 when it may not, or by too little to be worth a
        FLOW)."""
        if self.max_bytes is None or messages <= 0:
            return 0
        self._bytes_seen = self._bytes_seen * _KEEP + nbytes
        self._messages_seen = self._messages_seen * _KEEP + messages
        grow = self.target() - self.window
        if grow <= 0 or grow < self.window // 4:
            return 0
        self.window += grow
        return grow

    def grant(self, taken: int) -> int:
        """``taken`` messages were taken since the last grant: the permits to grant for them
        (fewer when the window must shrink, more when it may grow)."""
        permits = max(0, taken + self.target() - self.window)
        self.window += permits - taken
        return permits


__all__ = ["ReceiveWindow"]
