"""The shared front of every metadata backend: validate once, then call the backend.

:class:`MetadataStoreBase` implements the public :class:`~braid.metadata.api.MetadataStore`
operations as template methods (the shape of httpcore's ``request()``, which validates once and
hands a checked request to the transport): each one validates its arguments with the rules of
:mod:`braid.metadata.paths`, asks the backend whether it can serve (``_check``: closed, session
lost, suspended), and only then calls the backend's ``_get``/``_put``/... hook with checked
values. So a backend never sees an invalid path, value or version, and no backend can forget a
rule. Listener registration goes to the backend's :class:`ListenerDispatcher`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from braid.metadata.api import Listener, SessionListener, Stat
from braid.metadata.dispatch import ListenerDispatcher
from braid.metadata.paths import (
    validate_expected_version,
    validate_path,
    validate_value,
    validate_writable_path,
)


class MetadataStoreBase(ABC):
    """A :class:`~braid.metadata.api.MetadataStore` whose backend fills in the hooks."""

    _dispatcher: ListenerDispatcher

    # -- the contract (validated here, once) ----------------------------------------------------

    async def get(self, path: str) -> tuple[bytes, Stat] | None:
        path = validate_path(path)
        self._check()
        return await self._get(path)

    async def exists(self, path: str) -> Stat | None:
        path = validate_path(path)
        self._check()
        return await self._exists(path)

    async def children(self, path: str) -> list[str]:
        path = validate_path(path)
        self._check()
        return await self._children(path)

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        path = validate_writable_path(path)
        value = validate_value(value)
        expected_version = validate_expected_version(expected_version)
        self._check()
        return await self._put(path, value, expected_version, ephemeral)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        path = validate_writable_path(path)
        expected_version = validate_expected_version(expected_version)
        self._check()
        await self._delete(path, expected_version)

    async def delete_recursive(self, path: str) -> None:
        path = validate_path(path)
        self._check()
        await self._delete_recursive(path)

    def register_listener(self, listener: Listener) -> Callable[[], None]:
        return self._dispatcher.add_listener(listener)

    def register_session_listener(self, listener: SessionListener) -> Callable[[], None]:
        return self._dispatcher.add_session_listener(listener)

    # -- backend hooks (arguments already validated) ---------------------------------------------

    @abstractmethod
    def _check(self) -> None:
        """Raise if the store cannot serve now (closed, session lost, disconnected)."""

    @abstractmethod
    async def _get(self, path: str) -> tuple[bytes, Stat] | None: ...

    async def _exists(self, path: str) -> Stat | None:
        """The stat alone; backends with a cheaper query override this."""
        found = await self._get(path)
        return None if found is None else found[1]

    @abstractmethod
    async def _children(self, path: str) -> list[str]: ...

    @abstractmethod
    async def _put(
        self, path: str, value: bytes, expected_version: int | None, ephemeral: bool
    ) -> Stat: ...

    @abstractmethod
    async def _delete(self, path: str, expected_version: int | None) -> None: ...

    @abstractmethod
    async def _delete_recursive(self, path: str) -> None: ...
