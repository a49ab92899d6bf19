"""A metadata store wrapper that injects failures and delays, for tests of the layers above.

Modelled on Pulsar's ``FaultInjectionMetadataStore``: a test names an operation (``put``, ``get``,
...), a path (exact, or a predicate) and what should happen - raise an error before the call reaches
the real store, raise it *after* the call succeeded (the "acknowledgement lost" case), wait for a
delay on an injected clock, or park until the test releases a :class:`Gate`. Everything else is
passed straight to the wrapped store, which stays a real backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from braid.clock import Clock, SystemClock
from braid.metadata.api import MetadataStore, Stat, StoreUnavailable
from braid.metadata.wrapper import StoreWrapper

OPERATIONS = frozenset({"get", "exists", "put", "delete", "delete_recursive", "children"})

PathMatcher = str | Callable[[str], bool] | None


class Gate:
    """Parks matching operations until :meth:`release` is called."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.waiting = 0

    def release(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        self.waiting += 1
        try:
            await self._event.wait()
        finally:
            self.waiting -= 1


@dataclass(eq=False)
class Fault:
    """One injected behaviour. ``times`` counts remaining hits (``None`` = forever)."""

    operation: str
    path: PathMatcher
    error: BaseException | type[BaseException] | None = None
    after: bool = False
    delay_s: float = 0.0
    gate: Gate | None = None
    times: int | None = 1
    hits: int = field(default=0)

    def matches(self, operation: str, path: str) -> bool:
        if self.operation not in ("*", operation):
            return False
        if self.times is not None and self.times <= 0:
            return False
        if self.path is None:
            return True
        if callable(self.path):
            return bool(self.path(path))
        return self.path == path


class FaultInjectionMetadataStore(StoreWrapper):
    """Wraps a real :class:`MetadataStore`, injecting the faults a test registers."""

    def __init__(self, inner: MetadataStore, *, clock: Clock | None = None) -> None:
        super().__init__(inner)
        self._clock: Clock = clock or SystemClock()
        self._faults: list[Fault] = []

    @property
    def inner(self) -> MetadataStore:
        return self._inner

    def _add(self, fault: Fault) -> Fault:
        if fault.operation != "*" and fault.operation not in OPERATIONS:
            raise ValueError(f"unknown operation {fault.operation!r}; one of {sorted(OPERATIONS)}")
        self._faults.append(fault)
        return fault

    def fail(
        self,
        operation: str,
        path: PathMatcher = None,
        error: BaseException | type[BaseException] | None = None,
        *,
        after: bool = False,
        times: int | None = 1,
    ) -> Fault:
        """Make ``operation`` on ``path`` raise ``error`` (default :class:`StoreUnavailable`).

        With ``after=True`` the real operation runs first and the error is raised anyway.
        """
        injected = error if error is not None else StoreUnavailable("injected fault")
        return self._add(Fault(operation, path, error=injected, after=after, times=times))

    def delay(
        self, operation: str, path: PathMatcher, seconds: float, *, times: int | None = 1
    ) -> Fault:
        """Make ``operation`` on ``path`` wait ``seconds`` on the clock before running."""
        return self._add(Fault(operation, path, delay_s=seconds, times=times))

    def hold(self, operation: str, path: PathMatcher = None, *, times: int | None = 1) -> Gate:
        """Park ``operation`` on ``path`` until the returned gate is released."""
        gate = Gate()
        self._add(Fault(operation, path, gate=gate, times=times))
        return gate

    def remove(self, fault: Fault) -> None:
        if fault in self._faults:
            self._faults.remove(fault)

    def clear(self) -> None:
        self._faults.clear()

    async def _run(self, operation: str, path: str, call: Callable[[], object]) -> object:
        fault = next((f for f in self._faults if f.matches(operation, path)), None)
        if fault is None:
            return await call()  # type: ignore[misc]
        fault.hits += 1
        if fault.times is not None:
            fault.times -= 1
        if fault.gate is not None:
            await fault.gate.wait()
        if fault.delay_s > 0:
            await self._clock.sleep(fault.delay_s)
        if fault.error is not None and not fault.after:
            raise _fresh(fault.error)
        result = await call()  # type: ignore[misc]
        if fault.error is not None:
            raise _fresh(fault.error)
        return result

    async def get(self, path: str) -> tuple[bytes, Stat] | None:
        return await self._run("get", path, lambda: self._inner.get(path))  # type: ignore[return-value]

    async def exists(self, path: str) -> Stat | None:
        return await self._run("exists", path, lambda: self._inner.exists(path))  # type: ignore[return-value]

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        return await self._run(  # type: ignore[return-value]
            "put",
            path,
            lambda: self._inner.put(path, value, expected_version, ephemeral=ephemeral),
        )

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        await self._run("delete", path, lambda: self._inner.delete(path, expected_version))

    async def delete_recursive(self, path: str) -> None:
        await self._run("delete_recursive", path, lambda: self._inner.delete_recursive(path))

    async def children(self, path: str) -> list[str]:
        return await self._run("children", path, lambda: self._inner.children(path))  # type: ignore[return-value]


def _fresh(error: BaseException | type[BaseException]) -> BaseException:
    """An exception instance to raise (a class is instantiated each time)."""
    if isinstance(error, type):
        return error("injected fault")
    return error
