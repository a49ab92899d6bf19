"""Partitioned topics' naming rule (Pulsar's): partition ``i`` of ``name`` is ``name-partition-i``.

A partitioned topic is a name plus a partition count kept in metadata; each partition is an
ordinary ``persistent://`` topic named with the suffix. The helpers here say which partition a
name is and which partitioned topic it belongs to, as Pulsar's ``TopicName.getPartitionIndex``
and ``getPartitionedTopicName`` do: a name is a partition when it ends in ``-partition-<digits>``.

Pure: no I/O.
"""

from __future__ import annotations

from braid.core.errors import InvalidInputError
from braid.core.names import InvalidTopicName

#: What separates a partitioned topic's name from a partition index.
PARTITION_SUFFIX = "-partition-"

#: Most partitions one topic may have (Pulsar's ``maxNumPartitionsPerPartitionedTopic`` is
#: unlimited by default; a bound keeps a typo from creating a million managed ledgers).
MAX_PARTITIONS = 10_000


class InvalidPartitionCount(InvalidInputError):
    """A number of partitions out of range, or a decrease (partitions can only be added)."""


def partition_name(local_name: str, index: int) -> str:
    """The local name of partition ``index`` of ``local_name``."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidTopicName(f"a partition index is an integer >= 0, got {index!r}")
    return f"{local_name}{PARTITION_SUFFIX}{index}"


def partition_index(local_name: str) -> int:
    """The partition index ``local_name`` names, ``-1`` if it is not a partition's name."""
    base, sep, suffix = local_name.rpartition(PARTITION_SUFFIX)
    if not sep or not base or not suffix.isascii() or not suffix.isdigit():
        return -1
    return int(suffix)


def partitioned_topic_of(local_name: str) -> str:
    """The partitioned topic a partition's local name belongs to (the name itself otherwise)."""
    if partition_index(local_name) < 0:
        return local_name
    return local_name.rpartition(PARTITION_SUFFIX)[0]


def check_partition_count(count: object) -> int:
    """``count`` if it is a valid number of partitions (1..:data:`MAX_PARTITIONS`).

    Raises:
        InvalidPartitionCount: not an integer in range.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= MAX_PARTITIONS:
        raise InvalidPartitionCount(
            f"the number of partitions must be an integer from 1 to {MAX_PARTITIONS}, got {count!r}"
        )
    return count


__all__ = [
    "MAX_PARTITIONS",
    "PARTITION_SUFFIX",
    "InvalidPartitionCount",
    "check_partition_count",
    "partition_index",
    "partition_name",
    "partitioned_topic_of",
]
