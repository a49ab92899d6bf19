"""PIP-470 on a cluster of ``braid broker`` processes, for the cluster tests: a second storage
cluster of ``braid bookie`` processes in its own ZooKeeper chroot, and what the stores say about a
cursor and the switch (read straight from ZooKeeper and the bookies, never fencing a ledger).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import httpx

from braid.clusters.registry import BookieClusterRegistry
from braid.core.storage_switch import MigrationItem, SwitchState
from braid.ledger.codec import ManagedCursorInfo, decode_cursor_info
from braid.ledger.factory import DEFAULT_ROOT
from braid.ledger.names import cursor_path
from braid.metadata import open_store
from braid.storage.api import NoSuchEntry, NoSuchLedger
from braid.storage.remote import open_remote_cluster
from tests.support.bookie_process import BookieProcess
from tests.support.broker_process import BrokerProcess

#: The name of the cluster the brokers start with (their bookies register under it).
HOME = "standalone"
NEW = "new"


def new_cluster_bookies(tmp_path: Path, zk_url: str, count: int) -> list[BookieProcess]:
    """``count`` bookies of storage cluster :data:`NEW` registered in ``zk_url`` (not started)."""
    return [
        BookieProcess(f"new-{i}", tmp_path / f"new-{i}", zk_url, cluster=NEW) for i in range(count)
    ]


@dataclasses.dataclass(frozen=True)
class PersistedCursor:
    """A cursor's node, and the last snapshot of the cursor ledger it points at (if any)."""

    node: ManagedCursorInfo
    snapshot: ManagedCursorInfo | None

    @property
    def state(self) -> ManagedCursorInfo:
        """What a new owner would load."""
        return self.snapshot if self.snapshot is not None else self.node


def managed_ledger(topic: str) -> str:
    """The managed ledger of a ``persistent://public/default/x`` topic."""
    return "public/default/persistent/" + topic.rsplit("/", 1)[1]


def persisted_cursor(urls: dict[str, str], topic: str, cursor: str) -> PersistedCursor:
    """Read the cursor as stored: ``urls`` maps each storage cluster to its metadata URL (the
    node lives in the home one). The cursor ledger is read without recovery (up to what an ack
    quorum holds), so its writer is not disturbed."""
    return asyncio.run(_persisted_cursor(urls, managed_ledger(topic), cursor))


async def _persisted_cursor(urls: dict[str, str], ml: str, cursor: str) -> PersistedCursor:
    # The owner replaces its cursor ledger and deletes the old one while this reads: a snapshot
    # counts only when the node did not move between reading it and reading its ledger (the
    # ledger may be gone, whole or in part, once the node points elsewhere).
    for _ in range(_CONSISTENT_READ_ATTEMPTS):
        node, version = await _cursor_node(urls, ml, cursor)
        if node.cursors_ledger_id < 0 or node.bookie_cluster_name is None:
            return PersistedCursor(node, None)
        try:
            snapshot = await last_snapshot(urls, node.bookie_cluster_name, node.cursors_ledger_id)
        except NoSuchEntry:
            if (await _cursor_node(urls, ml, cursor))[1] == version:
                raise  # the ledger the node still points at lost its last snapshot
            continue
        if (await _cursor_node(urls, ml, cursor))[1] == version:
            return PersistedCursor(node, snapshot)
    raise AssertionError(f"cursor {cursor} of {ml} moved on every one of the reads")


_CONSISTENT_READ_ATTEMPTS = 20


async def _cursor_node(urls: dict[str, str], ml: str, cursor: str) -> tuple[ManagedCursorInfo, int]:
    store = await open_store(urls[HOME])
    try:
        got = await store.get(cursor_path(DEFAULT_ROOT, ml, cursor))
        assert got is not None, f"no node for cursor {cursor} of {ml}"
        return decode_cursor_info(got[0]), got[1].version
    finally:
        await store.close()


async def last_snapshot(
    urls: dict[str, str], cluster: str, ledger_id: int
) -> ManagedCursorInfo | None:
    """The last snapshot in a cursor ledger (``None``: no such ledger, or empty)."""
    store = await open_store(urls[cluster])
    try:
        client = await open_remote_cluster(store, cluster)
        try:
            try:
                handle = await client.open_ledger(ledger_id, recovery=False)
            except NoSuchLedger:
                return None
            try:
                last = handle.last_add_confirmed
                if last < 0:
                    return None
                (entry,) = await handle.read_entries(last, last)
                return decode_cursor_info(entry.data)
            finally:
                await handle.close()
        finally:
            await client.close()
    finally:
        await store.close()


def ledger_exists(urls: dict[str, str], cluster: str, ledger_id: int) -> bool:
    async def check() -> bool:
        store = await open_store(urls[cluster])
        try:
            client = await open_remote_cluster(store, cluster)
            try:
                await client.get_ledger_metadata(ledger_id)
                return True
            except NoSuchLedger:
                return False
            finally:
                await client.close()
        finally:
            await store.close()

    return asyncio.run(check())


def switch_state(zk_url: str) -> SwitchState | None:
    async def read() -> SwitchState | None:
        store = await open_store(zk_url)
        try:
            got = await BookieClusterRegistry(store).state()
            return None if got is None else got[0]
        finally:
            await store.close()

    return asyncio.run(read())


def cursor_item(state: SwitchState, topic: str, cursor: str) -> MigrationItem:
    (item,) = [i for i in state.items if i.owner == managed_ledger(topic) and i.cursor == cursor]
    return item


def counter(broker: BrokerProcess, name: str) -> float:
    """A counter of the broker's ``/metrics`` (``name`` without ``_total``)."""
    text = httpx.get(broker.web_url + "/metrics", timeout=30).text
    found = re.search(rf"^{re.escape(name)}_total (\S+)$", text, re.MULTILINE)
    assert found is not None, f"{name}_total is not exported"
    return float(found.group(1))


def cursor_text(info: ManagedCursorInfo) -> tuple[str, str]:
    """``(markDeletePosition, individuallyDeletedMessages)`` as internal stats print them."""
    ranges = [f"({lo}..{hi}]" for lo, hi in info.individually_deleted]
    return str(info.mark_delete), "[" + ",".join(ranges) + "]"


__all__ = [
    "HOME",
    "NEW",
    "PersistedCursor",
    "counter",
    "cursor_item",
    "cursor_text",
    "ledger_exists",
    "managed_ledger",
    "new_cluster_bookies",
    "persisted_cursor",
    "switch_state",
]
