"""A second process on a sqlite metadata store, driven by the sqlite durability tests.

``writer DB``: CAS-writes forever, printing ``ack <i>`` after each acknowledged write, until killed.
``writers DB``: eight writers at once (their writes are committed in groups), each creating its
items in turn and printing ``ack <w> <i>`` after each acknowledged one, until killed.
``holder DB``: creates an ephemeral node, prints ``ready``, writes ``/proc/after`` when a line
arrives on stdin, prints ``done`` and then waits to be killed.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys

from braid.metadata.sqlite import SqliteMetadataStore


def crash_value(i: int) -> bytes:
    """A self-checking value: index, a 4 KiB body, and the body's digest."""
    body = hashlib.sha256(str(i).encode()).hexdigest().encode() * 128
    return f"{i}|".encode() + body + b"|" + hashlib.sha256(body).hexdigest().encode()


def check_crash_value(value: bytes) -> int:
    """Return the index of an intact :func:`crash_value`, or raise ``AssertionError``."""
    index, body, digest = value.split(b"|")
    assert hashlib.sha256(body).hexdigest().encode() == digest, "torn value"
    assert value == crash_value(int(index)), "value does not match its index"
    return int(index)


async def writer(db: str) -> None:
    store = await SqliteMetadataStore.open(db)
    await store.put("/crash/ephemeral", b"writer", ephemeral=True)
    found = await store.get("/crash/counter")
    version = -1 if found is None else found[1].version
    # Resume after the last item written (it may be past the counter if we died in between).
    i = max((int(name) + 1 for name in await store.children("/crash/items")), default=0)
    while True:
        value = crash_value(i)
        await store.put(f"/crash/items/{i}", value, -1)
        stat = await store.put("/crash/counter", value, version)
        version = stat.version
        print(f"ack {i}", flush=True)
        i += 1


async def writers(db: str) -> None:
    store = await SqliteMetadataStore.open(db)

    async def one(w: int) -> None:
        i = len(await store.children(f"/group/{w}")) if await store.exists(f"/group/{w}") else 0
        while True:
            await store.put(f"/group/{w}/{i}", crash_value(i), -1)
            print(f"ack {w} {i}", flush=True)
            i += 1

    await asyncio.gather(*(one(w) for w in range(8)))


async def holder(db: str) -> None:
    store = await SqliteMetadataStore.open(db)
    await store.put("/proc/eph", b"holder", ephemeral=True)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await store.put("/proc/after", b"x")
    print("done", flush=True)
    await asyncio.to_thread(sys.stdin.read)


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    main = {"writer": writer, "writers": writers, "holder": holder}[mode]
    asyncio.run(main(path))
