"""Parsing of metadata-store URLs (``memory://``, ``sqlite:///path``, ``zk://hosts/chroot``).

BookKeeper's metadata-service URIs name the ledger layout after a ``+``: ``zk+null://`` (the
layout the cluster was formatted with), ``zk+hierarchical://``, ``zk+longhierarchical://``,
``zk+flat://``; and separate hosts with ``;`` as well as ``,``. Braid's stores have one layout, so
these parse as the plain ``zk`` store at the same hosts and chroot (PIP-470 registers clusters
as ``zk+null://new-zk:2181/ledgers-v2``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from braid.metadata.api import InvalidPath, InvalidStoreUrl
from braid.metadata.paths import validate_path

_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")
_MEMORY_NAME = re.compile(r"^[A-Za-z0-9._-]*$")
#: BookKeeper's layout names in ``zk+<layout>://`` (``null``: whatever the cluster uses).
ZK_LAYOUTS = frozenset({"null", "hierarchical", "longhierarchical", "flat"})


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL: ``location`` is the memory name, the sqlite file or the zk host list;
    ``chroot`` is the ZooKeeper chroot (``/`` for none)."""

    scheme: str
    location: str
    chroot: str = "/"


def parse_store_url(url: object) -> StoreUrl:
    """Parse ``url`` or raise :class:`InvalidStoreUrl` saying what is wrong."""
    if not isinstance(url, str):
        raise InvalidStoreUrl(f"a metadata store URL must be a str, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidStoreUrl(f"{url!r} is not a URL (expected scheme://...)")
    if scheme == "memory":
        if not _MEMORY_NAME.match(rest):
            raise InvalidStoreUrl(f"{url!r}: a memory store name may only use [A-Za-z0-9._-]")
        return StoreUrl("memory", rest)
    if scheme == "sqlite":
        if not rest.startswith("/") or rest.endswith("/") or "\x00" in rest:
            raise InvalidStoreUrl(f"{url!r}: expected sqlite:///absolute/path/to/file.db")
        # ``sqlite:////abs`` (an f-string around an absolute path) means the same file.
        return StoreUrl("sqlite", os.path.normpath("/" + rest.lstrip("/")))
    base, plus, layout = scheme.partition("+")
    if plus and base == "zk" and layout not in ZK_LAYOUTS:
        raise InvalidStoreUrl(
            f"{url!r}: unknown ledger layout {layout!r} "
            f"(expected zk+{', zk+'.join(sorted(ZK_LAYOUTS))})"
        )
    if scheme in ("zk", "zookeeper") or (plus and base == "zk"):
        hosts, slash, chroot_rest = rest.partition("/")
        hosts = hosts.replace(";", ",")
        if not hosts:
            raise InvalidStoreUrl(f"{url!r}: expected zk://host:port[,host:port]/chroot")
        for host in hosts.split(","):
            match = _HOST_PORT.match(host)
            if match is None or not 0 < int(match.group(2)) < 65536:
                raise InvalidStoreUrl(f"{url!r}: {host!r} is not host:port")
        chroot = "/" + chroot_rest if slash else "/"
        if chroot != "/" and chroot.endswith("/"):
            chroot = chroot.rstrip("/") or "/"
        try:
            validate_path(chroot)
        except InvalidPath as exc:
            raise InvalidStoreUrl(f"{url!r}: bad chroot: {exc}") from None
        return StoreUrl("zk", hosts, chroot)
    raise InvalidStoreUrl(
        f"{url!r}: unknown metadata store scheme {scheme!r} "
        f"(expected memory, sqlite, zk or zk+<layout>)"
    )
