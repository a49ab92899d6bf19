"""The transaction coordinator (TC; Pulsar's ``TransactionMetadataStore``; ADR 0064).

A client finds coordinators as partitions of
``persistent://pulsar/system/transaction_coordinator_assign``: coordinator *n* is partition *n*,
served by the broker that serves that partition. Each coordinator owns its transactions' state,
kept in the metadata store as one node per transaction (``<root>/<tc>/txns/<most>-<least>``, JSON,
every change a CAS on the node's version) plus a CAS'd block of sequence numbers
(``<root>/<tc>/sequence``), so ids are never reused after a restart.

A transaction is OPEN until END_TXN, then COMMITTING or ABORTING - recorded *before* any topic
hears of the outcome - until every produced partition has its marker and every acknowledged
subscription applied or released its pending acks; then its node is deleted (an END_TXN for it
afterwards is ``TransactionNotFound``, as in Pulsar). A transaction still OPEN at its deadline
(NEW_TXN's ``txn_ttl_millis`` from its start, on the injected clock) is aborted by the
coordinator. After a restart (:meth:`TransactionCoordinator.recover`), OPEN transactions continue
with their original deadline and COMMITTING/ABORTING ones are driven to their recorded end.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from braid.broker.errors import (
    BrokerError,
    CoordinatorNotFound,
    InvalidTxnStatus,
    NotSupported,
    TooManyRequests,
    TransactionNotFound,
)
from braid.broker.transactions.ids import TxnId
from braid.clock import Clock, TimerHandle
from braid.metadata.api import MetadataStore, NodeNotFound
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import AuthorizationDenied

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The partitioned topic whose partitions name the coordinators (Pulsar's name).
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
COORDINATORS_ROOT = "/transactions/coordinators"
#: A NEW_TXN without a timeout gets Pulsar clients' default.
DEFAULT_TIMEOUT_MS = 60_000
#: Sequence numbers reserved per CAS of the sequence node.
_SEQUENCE_BLOCK = 100
#: Delay before an end that failed part-way (a topic not loadable yet) is tried again.
_END_RETRY_S = 1.0


class TxnStatus(enum.Enum):
    """Where a transaction stands at its coordinator (Pulsar's ``TxnStatus`` names)."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"


@dataclass(frozen=True)
class TxnMeta:
    """One transaction as its coordinator records it."""

    txn: TxnId
    status: TxnStatus
    opened_ms: int
    timeout_ms: int
    partitions: tuple[str, ...] = ()
    subscriptions: tuple[tuple[str, str], ...] = ()
    #: The authenticated role that began it (``None`` without authentication): only it, or a
    #: super user, may add to it or end it (Pulsar's ownership check).
    owner: str | None = None

    @property
    def deadline_ms(self) -> int:
        return self.opened_ms + self.timeout_ms

    def encode(self) -> bytes:
        return json.dumps(
            {
                "status": self.status.value,
                "openedMs": self.opened_ms,
                "timeoutMs": self.timeout_ms,
                "partitions": list(self.partitions),
                "subscriptions": [list(s) for s in self.subscriptions],
                "owner": self.owner,
            }
        ).encode()

    @classmethod
    def decode(cls, txn: TxnId, data: bytes) -> TxnMeta:
        raw = json.loads(data)
        return cls(
            txn,
            TxnStatus(raw["status"]),
            int(raw["openedMs"]),
            int(raw["timeoutMs"]),
            tuple(str(p) for p in raw["partitions"]),
            tuple((str(t), str(s)) for t, s in raw["subscriptions"]),
            raw.get("owner"),
        )


class TransactionParticipants(Protocol):
    """Where a coordinator sends a transaction's outcome (the topics' owner)."""

    async def end_on_partition(
        self, topic: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """Write the marker on ``topic`` (END_TXN_ON_PARTITION)."""
        ...

    async def end_on_subscription(
        self, topic: str, subscription: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """Apply or release the pending acks (END_TXN_ON_SUBSCRIPTION)."""
        ...


def _unique(existing: Sequence[_T], added: Iterable[_T]) -> tuple[_T, ...]:
    out = list(existing)
    for item in added:
        if item not in out:
            out.append(item)
    return tuple(out)


class TransactionCoordinator:
    """One coordinator (one partition of the assign topic): the one owner of its transactions."""

    def __init__(
        self,
        tc_id: int,
        store: MetadataStore,
        participants: TransactionParticipants,
        clock: Clock,
        *,
        max_active: int = 0,
    ) -> None:
        self.tc_id = tc_id
        self._store = store
        self._participants = participants
        self._clock = clock
        self._max_active = max_active
        self._root = f"{COORDINATORS_ROOT}/{tc_id}"
        self._txns: dict[TxnId, TxnMeta] = {}
        self._versions: dict[TxnId, int] = {}
        self._locks: dict[TxnId, asyncio.Lock] = {}
        self._timers: dict[TxnId, TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_sequence = 0
        self._sequence_end = 0
        self._sequence_lock = asyncio.Lock()
        self._closed = False
        #: Transactions aborted at their deadline (for stats and tests).
        self.timed_out = 0
        #: When the last :meth:`recover` started and ended (ms; 0 before it ran).
        self.recover_start_ms = 0
        self.recover_end_ms = 0

    # -- recovery ------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Load every recorded transaction; re-arm OPEN ones' deadlines, finish ending ones."""
        self.recover_start_ms = self._clock.now_ms()
        found = await self._store.get(f"{self._root}/sequence")
        if found is not None:
            self._next_sequence = self._sequence_end = int(found[0])
        for key in await self._store.children(f"{self._root}/txns"):
            loaded = await self._store.get(f"{self._root}/txns/{key}")
            if loaded is None:
                continue
            meta = TxnMeta.decode(TxnId.from_key(key), loaded[0])
            self._txns[meta.txn] = meta
            self._versions[meta.txn] = loaded[1].version
            if meta.status is TxnStatus.OPEN:
                self._arm_timeout(meta)
            else:
                action = pb.TxnAction.COMMIT
                if meta.status is TxnStatus.ABORTING:
                    action = pb.TxnAction.ABORT
                self._spawn(self._finish_later(meta.txn, action, 0.0))
        if self._txns:
            log.info("coordinator %d recovered %d transactions", self.tc_id, len(self._txns))
        self.recover_end_ms = self._clock.now_ms()

    # -- requests ------------------------------------------------------------------------------

    async def new_transaction(self, timeout_ms: int, owner: str | None = None) -> TxnId:
        """Begin a transaction that times out ``timeout_ms`` from now (0: the default), owned by
        the role ``owner``."""
        if self._max_active and len(self._txns) >= self._max_active:
            raise TooManyRequests(
                f"coordinator {self.tc_id} holds {len(self._txns)} open transactions "
                f"(maxActiveTransactionsPerCoordinator={self._max_active})"
            )
        txn = TxnId(self.tc_id, await self._next_id())
        timeout = timeout_ms or DEFAULT_TIMEOUT_MS
        meta = TxnMeta(txn, TxnStatus.OPEN, self._clock.now_ms(), timeout, owner=owner)
        await self._write(meta, create=True)
        self._arm_timeout(meta)
        return txn

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        """Record that ``txn`` produces to ``partitions`` (ADD_PARTITION_TO_TXN)."""
        async with self._lock(txn):
            meta = self._open(txn)
            merged = _unique(meta.partitions, partitions)
            if merged != meta.partitions:
                await self._write(replace(meta, partitions=merged))

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        """Record that ``txn`` acknowledges on ``subscriptions`` (ADD_SUBSCRIPTION_TO_TXN)."""
        async with self._lock(txn):
            meta = self._open(txn)
            subs = _unique(meta.subscriptions, subscriptions)
            if subs != meta.subscriptions:
                await self._write(replace(meta, subscriptions=subs))

    async def end(self, txn: TxnId, action: pb.TxnAction.ValueType) -> None:
        """Commit or abort ``txn`` (END_TXN): recorded first, then every participant told.

        Raises:
            TransactionNotFound: unknown, already ended or timed out.
            InvalidTxnStatus: already ending the other way.
        """
        await self._end(txn, action, retry=True)

    async def _end(self, txn: TxnId, action: pb.TxnAction.ValueType, *, retry: bool) -> None:
        target = TxnStatus.COMMITTING if action == pb.TxnAction.COMMIT else TxnStatus.ABORTING
        async with self._lock(txn):
            meta = self._txns.get(txn)
            if meta is None:
                raise TransactionNotFound(
                    f"transaction {txn} not found at coordinator {self.tc_id} "
                    "(never begun, already ended or timed out)"
                )
            if meta.status is TxnStatus.OPEN:
                self._cancel_timeout(txn)
                meta = replace(meta, status=target)
                await self._write(meta)
            elif meta.status is not target:
                raise InvalidTxnStatus(
                    f"transaction {txn} is {meta.status.value}; it cannot be "
                    f"{'committed' if action == pb.TxnAction.COMMIT else 'aborted'}"
                )
            try:
                await self._finish(meta, action)
            except Exception:
                if retry:  # the outcome is recorded: finish it in the background, as Pulsar
                    self._spawn(self._finish_later(txn, action, _END_RETRY_S))
                raise

    def check_owner(self, txn: TxnId, role: str | None, super_user: bool) -> None:
        """Refuse ``role`` unless it began ``txn`` or is a super user (an unknown transaction is
        left to the request itself to report).

        Raises:
            AuthorizationDenied: another role's transaction.
        """
        meta = self._txns.get(txn)
        if meta is None or meta.owner is None or meta.owner == role or super_user:
            return
        raise AuthorizationDenied(f"transaction {txn} belongs to another role")

    def check_participant(
        self, txn: TxnId, topic: str, subscription: str | None = None
    ) -> BrokerError | None:
        """Why a SEND (or, with ``subscription``, an ACK) in ``txn`` on ``topic`` must be refused:
        the transaction is not open here, or did not add that partition / subscription first (it
        would never be ended there, and would hold the topic's consumers for good)."""
        meta = self._txns.get(txn)
        if meta is None:
            return TransactionNotFound(f"transaction {txn} not found at coordinator {self.tc_id}")
        if meta.status is not TxnStatus.OPEN:
            return InvalidTxnStatus(f"transaction {txn} is {meta.status.value}, not OPEN")
        if subscription is None and topic not in meta.partitions:
            return NotSupported(
                f"transaction {txn} did not add partition {topic} (ADD_PARTITION_TO_TXN first)"
            )
        if subscription is not None and (topic, subscription) not in meta.subscriptions:
            return NotSupported(
                f"transaction {txn} did not add subscription {topic}/{subscription} "
                "(ADD_SUBSCRIPTION_TO_TXN first)"
            )
        return None

    # -- internals -----------------------------------------------------------------------------

    def _open(self, txn: TxnId) -> TxnMeta:
        meta = self._txns.get(txn)
        if meta is None:
            raise TransactionNotFound(f"transaction {txn} not found at coordinator {self.tc_id}")
        if meta.status is not TxnStatus.OPEN:
            raise InvalidTxnStatus(f"transaction {txn} is {meta.status.value}, not OPEN")
        return meta

    async def _finish(self, meta: TxnMeta, action: pb.TxnAction.ValueType) -> None:
        for topic in meta.partitions:
            await self._participants.end_on_partition(topic, meta.txn, action)
        for topic, subscription in meta.subscriptions:
            await self._participants.end_on_subscription(topic, subscription, meta.txn, action)
        try:
            await self._store.delete(
                f"{self._root}/txns/{meta.txn.key}", self._versions.get(meta.txn)
            )
        except NodeNotFound:
            pass
        self._txns.pop(meta.txn, None)
        self._versions.pop(meta.txn, None)
        self._locks.pop(meta.txn, None)

    async def _finish_later(self, txn: TxnId, action: pb.TxnAction.ValueType, delay: float) -> None:
        """Drive an ending transaction to its end, retrying while a participant fails."""
        while not self._closed:
            if delay:
                await self._clock.sleep(delay)
            try:
                if txn in self._txns:
                    await self._end(txn, action, retry=False)
                return
            except (TransactionNotFound, InvalidTxnStatus):
                return
            except Exception as exc:
                log.warning("ending transaction %s failed (%s); retrying", txn, exc)
                delay = _END_RETRY_S

    async def _write(self, meta: TxnMeta, *, create: bool = False) -> None:
        expected = -1 if create else self._versions[meta.txn]
        stat = await self._store.put(f"{self._root}/txns/{meta.txn.key}", meta.encode(), expected)
        self._txns[meta.txn] = meta
        self._versions[meta.txn] = stat.version

    async def _next_id(self) -> int:
        async with self._sequence_lock:
            if self._next_sequence >= self._sequence_end:
                path = f"{self._root}/sequence"
                found = await self._store.get(path)
                start = int(found[0]) if found is not None else 0
                end = start + _SEQUENCE_BLOCK
                await self._store.put(
                    path, str(end).encode(), found[1].version if found is not None else -1
                )
                self._next_sequence, self._sequence_end = start, end
            sequence = self._next_sequence
            self._next_sequence += 1
            return sequence

    def _lock(self, txn: TxnId) -> asyncio.Lock:
        lock = self._locks.get(txn)
        if lock is None:
            lock = self._locks[txn] = asyncio.Lock()
        return lock

    def _arm_timeout(self, meta: TxnMeta) -> None:
        delay_s = max(0, meta.deadline_ms - self._clock.now_ms()) / 1000
        self._timers[meta.txn] = self._clock.call_at(
            self._clock.monotonic() + delay_s, lambda: self._spawn(self._time_out(meta.txn))
        )

    def _cancel_timeout(self, txn: TxnId) -> None:
        timer = self._timers.pop(txn, None)
        if timer is not None:
            timer.cancel()

    async def _time_out(self, txn: TxnId) -> None:
        self._timers.pop(txn, None)
        meta = self._txns.get(txn)
        if meta is None or meta.status is not TxnStatus.OPEN:
            return
        log.info("transaction %s timed out after %d ms; aborting", txn, meta.timeout_ms)
        self.timed_out += 1
        await self._finish_later(txn, pb.TxnAction.ABORT, 0.0)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stats(self) -> dict[str, object]:
        counts = {status.value: 0 for status in TxnStatus}
        for meta in self._txns.values():
            counts[meta.status.value] += 1
        return {"coordinatorId": self.tc_id, "transactions": counts, "timedOut": self.timed_out}

    # -- read accessors (the admin API's /admin/v3/transactions) -------------------------------

    def transaction(self, txn: TxnId) -> TxnMeta | None:
        """``txn`` as recorded here (``None``: unknown, or ended)."""
        return self._txns.get(txn)

    def transactions(self) -> list[TxnMeta]:
        """Every transaction open or ending here, by id."""
        return [self._txns[txn] for txn in sorted(self._txns)]

    @property
    def sequence(self) -> int:
        """The highest sequence (``leastBits``) handed out or reserved here (-1: none yet)."""
        return self._next_sequence - 1

    async def close(self) -> None:
        self._closed = True
        for txn in list(self._timers):
            self._cancel_timeout(txn)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class TransactionCoordinators:
    """The coordinators this broker serves, by id."""

    def __init__(
        self,
        store: MetadataStore,
        participants: TransactionParticipants,
        clock: Clock,
        *,
        count: int,
        max_active: int = 0,
    ) -> None:
        self._coordinators = {
            tc_id: TransactionCoordinator(tc_id, store, participants, clock, max_active=max_active)
            for tc_id in range(count)
        }

    @property
    def count(self) -> int:
        return len(self._coordinators)

    async def start(self) -> None:
        for coordinator in self._coordinators.values():
            await coordinator.recover()

    def get(self, tc_id: int) -> TransactionCoordinator:
        """The coordinator ``tc_id``, or :class:`CoordinatorNotFound`."""
        coordinator = self._coordinators.get(tc_id)
        if coordinator is None:
            raise CoordinatorNotFound(f"transaction coordinator {tc_id} is not served here")
        return coordinator

    def of(self, txn: TxnId) -> TransactionCoordinator:
        return self.get(txn.coordinator_id)

    def stats(self) -> list[dict[str, object]]:
        return [c.stats() for c in self._coordinators.values()]

    def served(self) -> list[TransactionCoordinator]:
        """The coordinators served here, by id (the admin API reads them)."""
        return [self._coordinators[tc_id] for tc_id in sorted(self._coordinators)]

    async def close(self) -> None:
        for coordinator in self._coordinators.values():
            await coordinator.close()
