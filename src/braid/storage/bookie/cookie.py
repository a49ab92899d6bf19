"""Bookie cookies: what keeps a bookie whose data was lost from rejoining as if it still had it.

BookKeeper's model. At its first start a bookie writes a
:class:`~braid.storage.bookie_registry.Cookie` (cluster instance id, bookie id, its directories)
into each of its directories (``COOKIE``) and into the metadata store
(``/storage/<cluster>/bookies/cookies/<bookieId>``). Every later start compares them:

* no cookie anywhere: a new bookie - the cookie is written (directories first, then the store);
* the same cookie in the directories and the store: the bookie's own data - start;
* a cookie in the store but none in the directories: the directories were wiped or replaced.
  The ledgers whose ensembles name this bookie lost their copy here; rejoining under the same id
  would pass it off as a healthy replica. Refused, unless the operator says this is a new bookie
  (``braid bookie --format``: the old cookie is deleted from the store and a new one written;
  auto-recovery re-replicates what the bookie held), or gives it another ``bookieId``;
* a cookie in the directories but none in the store (deleted by hand, or a crash between the two
  writes of a first start): written to the store again, with a warning;
* cookies that differ (another cluster instance, other directories, another id): refused, naming
  the difference.

The cluster instance id (``/storage/<cluster>/instanceid``) is created by the first bookie that
starts, with compare-and-swap.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from braid.core.errors import IllegalStateError
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import StorageError
from braid.storage.bookie_registry import (
    Cookie,
    cookie_path,
    decode_cookie,
    encode_cookie,
    instance_id_path,
)

log = logging.getLogger(__name__)

COOKIE_FILE = "COOKIE"


class CookieMismatch(StorageError, IllegalStateError):
    """The bookie's directories and the metadata store disagree about its data: it must not
    start as it is."""


async def cluster_instance_id(store: MetadataStore, cluster_name: str) -> str:
    """The cluster's instance id, made (with CAS) if this is the cluster's first bookie."""
    path = instance_id_path(cluster_name)
    while True:
        got = await store.get(path)
        if got is not None:
            return got[0].decode()
        try:
            await store.put(path, uuid.uuid4().hex.encode(), expected_version=-1)
        except BadVersion:
            continue  # another bookie made it first: read theirs


def _read_local(directory: Path) -> Cookie | None:
    try:
        return decode_cookie((directory / COOKIE_FILE).read_bytes())
    except FileNotFoundError:
        return None


def _write_local(directory: Path, cookie: Cookie) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (COOKIE_FILE + ".tmp")
    with tmp.open("wb") as f:
        f.write(encode_cookie(cookie))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / COOKIE_FILE)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _cookie_for(instance: str, bookie_id: str, journal_dir: Path, ledger_dir: Path) -> Cookie:
    return Cookie(instance, bookie_id, os.path.abspath(journal_dir), os.path.abspath(ledger_dir))


async def check_cookie(
    store: MetadataStore,
    cluster_name: str,
    bookie_id: str,
    journal_dir: Path,
    ledger_dir: Path,
    *,
    new_bookie: bool = False,
) -> Cookie:
    """Verify (or, for a new bookie, write) the bookie's cookie; returns it.

    Args:
        new_bookie: the operator says this is a new bookie (``--format``): an old cookie in the
            store is replaced. Refused while the directories still hold a cookie.

    Raises:
        CookieMismatch: the directories and the store disagree (see the module docstring).
    """
    instance = await cluster_instance_id(store, cluster_name)
    expected = _cookie_for(instance, bookie_id, journal_dir, ledger_dir)
    dirs = sorted({journal_dir, ledger_dir})
    local = {d: _read_local(d) for d in dirs}
    path = cookie_path(cluster_name, bookie_id)
    got = await store.get(path)
    stored = decode_cookie(got[0]) if got is not None else None
    present = [c for c in local.values() if c is not None]

    if new_bookie:
        if present:
            raise CookieMismatch(
                f"bookie {bookie_id}: --format refused, {', '.join(map(str, dirs))} still hold "
                "a bookie's cookie (and maybe its data); remove them first"
            )
        if got is not None:
            try:
                await store.delete(path, expected_version=got[1].version)
            except (BadVersion, NodeNotFound):
                pass
            log.warning("bookie %s: formatted as a new bookie, old cookie removed", bookie_id)
        stored = None
        got = None

    if not present and stored is not None:
        raise CookieMismatch(
            f"bookie {bookie_id}: its directories ({', '.join(map(str, dirs))}) hold no cookie "
            f"but the metadata store has one: the bookie's data was lost. Start it with --format "
            "to join as a new bookie (auto-recovery copies its ledgers back), or give it another "
            "bookieId"
        )
    for directory, cookie in local.items():
        if cookie is not None and cookie != expected:
            raise CookieMismatch(
                f"bookie {bookie_id}: the cookie in {directory} ({cookie}) does not match this "
                f"bookie ({expected})"
            )
    if stored is not None and stored != expected:
        raise CookieMismatch(
            f"bookie {bookie_id}: the cookie in the metadata store ({stored}) does not match "
            f"this bookie ({expected})"
        )
    for directory, cookie in local.items():
        if cookie is None:
            _write_local(directory, expected)
    if stored is None:
        if present:
            log.warning("bookie %s: cookie missing from the metadata store, writing it", bookie_id)
        try:
            await store.put(path, encode_cookie(expected), expected_version=-1)
        except BadVersion:
            raise CookieMismatch(
                f"bookie {bookie_id}: another bookie wrote a cookie for this id meanwhile"
            ) from None
    return expected
