"""Flooding one connection with scalable-topic sessions, and reading a process's RSS (issue 27,
finding 2): what an attacker sends, written once for the flood test and ``bench/``.

:func:`flood_lookups` sends ``count`` ``SCALABLE_TOPIC_LOOKUP`` frames with distinct session ids
on one connection (in batches, reading the answers as they come so neither side's buffers grow
without bound), and returns how many sessions were opened and how many were refused, by
``ServerError`` name.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def flood_lookups(
    raw: RawClient, topic: str, count: int, *, batch: int = 500, within: float = 120.0
) -> Counter[str]:
    """Open ``count`` DAG-watch sessions (ids 1..count) on ``raw``; returns the answers counted:
    ``"opened"`` for a DAG, else the error's ``ServerError`` name."""
    answers: Counter[str] = Counter()
    async with asyncio.timeout(within):
        for start in range(1, count + 1, batch):
            ids = range(start, min(start + batch, count + 1))
            for session_id in ids:
                raw.proto.send(commands.scalable_topic_lookup(session_id, topic))
            await raw.send(commands.ping())
            pending = set(ids)
            while pending:
                cmd = await raw.next_command(
                    lambda c: c.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE, within=within
                )
                update = cmd.scalableTopicUpdate
                if update.session_id not in pending:
                    continue  # a later push to a session already counted
                pending.discard(update.session_id)
                if update.HasField("error"):
                    answers[pb.ServerError.Name(update.error)] += 1
                else:
                    answers["opened"] += 1
    return answers


__all__ = ["flood_lookups", "rss_bytes"]
