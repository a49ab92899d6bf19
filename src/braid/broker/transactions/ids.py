"""A transaction's id, as Pulsar builds it: ``(mostBits, leastBits)`` with ``mostBits`` the id of
the coordinator that began it and ``leastBits`` that coordinator's sequence number. Immutable and
hashable; its text form ``(most,least)`` is Pulsar's ``TxnID.toString()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class _HasTxnBits(Protocol):
    @property
    def txnid_most_bits(self) -> int: ...

    @property
    def txnid_least_bits(self) -> int: ...


@dataclass(frozen=True, order=True, slots=True)
class TxnId:
    """One transaction's id."""

    most_bits: int
    least_bits: int

    def __post_init__(self) -> None:
        if not (0 <= self.most_bits < 1 << 64 and 0 <= self.least_bits < 1 << 64):
            raise ValueError(f"transaction id bits out of range: {self}")

    def __str__(self) -> str:
        return f"({self.most_bits},{self.least_bits})"

    @property
    def coordinator_id(self) -> int:
        """The coordinator (partition of the assign topic) that owns this transaction."""
        return self.most_bits

    @classmethod
    def of(cls, message: _HasTxnBits) -> TxnId:
        """The id a command or ``MessageMetadata`` carries in ``txnid_most/least_bits``."""
        return cls(message.txnid_most_bits, message.txnid_least_bits)

    @property
    def key(self) -> str:
        """A path segment naming this transaction in the metadata store."""
        return f"{self.most_bits}-{self.least_bits}"

    @classmethod
    def from_key(cls, key: str) -> TxnId:
        most, _, least = key.partition("-")
        return cls(int(most), int(least))
