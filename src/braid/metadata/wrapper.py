"""The pass-through half of a :class:`~braid.metadata.api.MetadataStore` that wraps another:
listeners, the session id and closing always go to the wrapped store.

Wrappers (:class:`~braid.metadata.last_known.LastKnownReads`,
:class:`~braid.metadata.faults.FaultInjectionMetadataStore`) subclass it and define the data
operations they change; the wrapped store stays the one owner of sessions and notifications.
"""

from __future__ import annotations

from collections.abc import Callable

from braid.metadata.api import Listener, MetadataStore, SessionListener


class StoreWrapper:
    """Listeners, session and close of the wrapped store, unchanged."""

    def __init__(self, inner: MetadataStore) -> None:
        self._inner = inner

    def register_listener(self, listener: Listener) -> Callable[[], None]:
        return self._inner.register_listener(listener)

    def register_session_listener(self, listener: SessionListener) -> Callable[[], None]:
        return self._inner.register_session_listener(listener)

    @property
    def session_id(self) -> str:
        return self._inner.session_id

    async def close(self) -> None:
        await self._inner.close()


__all__ = ["StoreWrapper"]
