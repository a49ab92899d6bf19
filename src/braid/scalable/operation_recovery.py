"""Recovering a split or merge that failed on a living leader (issue 22, ADR 0040).

A controller that dies between two steps leaves its operation recorded, and the next leader rolls
it forward on take-over (docs/decisions/0021-split-merge-recovery.md). A step can also *fail*
while the leader lives - a child topic that cannot be created, a parent on a broker that answers
404, a metadata store that times out. Before this module the record then stayed with nothing
running it: ``stats`` showed the operation in flight forever and every later split was refused.

Now the leader recovers it in the background, on the controller's clock, one attempt at a time
under the controller's operation lock:

* **roll back** when no parent was sealed yet - the failure came before step 4 in this attempt
  and every parent is still unterminated: delete the children created so far (nothing showed them
  to a client: the layout was not changed) and drop the record. The layout is as before the
  request, and the operation can simply be asked for again;
* **roll forward** otherwise - a parent may be sealed and cannot be un-sealed: run the operation
  again from step 2 (every step is idempotent) until it completes.

Attempts start :data:`FIRST_DELAY_S` after the failure and back off to :data:`MAX_DELAY_S`. The
recovery stops when this broker stops leading (the next leader's take-over resumes the record) or
the controller closes. While it is pending the controller reports an operation running and
refuses new ones, and ``stats`` shows what it does (:meth:`OperationRecovery.stats`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from braid.clock import Clock
from braid.scalable.operations import StructuralOperation

log = logging.getLogger(__name__)

#: Delay before the first recovery attempt, and its cap as attempts fail.
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0

ROLL_BACK = "roll-back"
ROLL_FORWARD = "roll-forward"


class RecoveryHost(Protocol):
    """What the recovery may ask of its controller."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def operation_lock(self) -> asyncio.Lock: ...

    async def recorded_operation(self) -> StructuralOperation | None:
        """The operation recorded for the topic (``None``: none)."""
        ...

    async def any_parent_sealed(self, operation: StructuralOperation) -> bool:
        """Whether a parent of ``operation`` is terminated already (or may be)."""
        ...

    async def roll_back(self, operation: StructuralOperation) -> None:
        """Delete the children and drop the record (no parent is sealed)."""
        ...

    async def roll_forward(self, operation: StructuralOperation) -> None:
        """Run ``operation`` again from step 2."""
        ...


class OperationRecovery:
    """The background recovery of this controller's failed operation (at most one)."""

    def __init__(self, topic: str, host: RecoveryHost, clock: Clock) -> None:
        self._topic = topic
        self._host = host
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._operation: StructuralOperation | None = None
        self._action = ROLL_FORWARD
        self._attempts = 0
        self._last_error = ""
        self._next_attempt_ms = 0

    @property
    def active(self) -> bool:
        """A recovery is scheduled or running."""
        return self._task is not None and not self._task.done()

    def describe(self) -> str:
        """What is being recovered, for a refusal message."""
        if self._operation is None:
            return "nothing"
        return f"{self._action} of the failed {self._operation.describe()} ({self._last_error})"

    def schedule(
        self, operation: StructuralOperation, error: BaseException, *, may_roll_back: bool
    ) -> None:
        """Recover ``operation``, which just failed with ``error``; ``may_roll_back`` says that
        the failed attempt sealed no parent."""
        if self.active:
            return
        self._operation = operation
        self._action = ROLL_BACK if may_roll_back else ROLL_FORWARD
        self._attempts = 0
        self._last_error = _describe(error)
        log.warning(
            "controller of %s: the %s failed (%s); %s in %.0fs",
            self._topic,
            operation.describe(),
            self._last_error,
            "rolling it back" if may_roll_back else "retrying it",
            FIRST_DELAY_S,
        )
        self._task = asyncio.ensure_future(self._run(operation))

    async def _run(self, operation: StructuralOperation) -> None:
        delay = FIRST_DELAY_S
        while self._host.is_leader:
            self._next_attempt_ms = self._clock.now_ms() + round(delay * 1000)
            await self._clock.sleep(delay)
            if not self._host.is_leader:
                return  # the next leader's take-over resumes the record
            try:
                if await self._attempt(operation):
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._attempts += 1
                self._last_error = _describe(exc)
                delay = min(delay * 2, MAX_DELAY_S)
                log.warning(
                    "controller of %s: %s of the %s failed (attempt %d: %s); again in %.0fs",
                    self._topic,
                    self._action,
                    operation.describe(),
                    self._attempts,
                    self._last_error,
                    delay,
                )

    async def _attempt(self, operation: StructuralOperation) -> bool:
        """One attempt; ``True`` when nothing is left to do."""
        host = self._host
        async with host.operation_lock:
            if await host.recorded_operation() != operation:
                return True  # finished or abandoned meanwhile
            if self._action == ROLL_BACK and await host.any_parent_sealed(operation):
                self._action = ROLL_FORWARD
            if self._action == ROLL_BACK:
                await host.roll_back(operation)
            else:
                await host.roll_forward(operation)
        log.info(
            "controller of %s: %s of the failed %s done",
            self._topic,
            self._action,
            operation.describe(),
        )
        return True

    def stats(self) -> dict[str, Any] | None:
        """``None`` when idle; else the action, attempts, last error and next attempt time."""
        if not self.active or self._operation is None:
            return None
        return {
            "action": self._action,
            "operation": self._operation.describe(),
            "failedAttempts": self._attempts,
            "lastError": self._last_error,
            "nextAttemptAtMs": self._next_attempt_ms,
        }

    async def close(self) -> None:
        """Stop recovering (the record stays for the next leader). Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


__all__ = [
    "FIRST_DELAY_S",
    "MAX_DELAY_S",
    "ROLL_BACK",
    "ROLL_FORWARD",
    "OperationRecovery",
    "RecoveryHost",
]
