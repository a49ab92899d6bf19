"""Random sequences of bookie operations, checked against a plain in-memory model.

Adds, fences, deletes, checkpoints and restarts are interleaved at random (with a tiny journal so
it rolls often); after every step the bookie must agree with the model on which ledgers exist,
their last entry, their fence flag and every entry's content. A deleted *fenced* ledger leaves a
tombstone: it is listed no more, stays fenced and refuses every add; an unfenced one is forgotten.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from braid.storage.api import LedgerFenced, NoSuchLedger
from braid.storage.bookie import Bookie

_OPS = ["add", "fence", "delete", "checkpoint", "restart"]
_WEIGHTS = [70, 5, 6, 8, 6]


@dataclass
class _Model:
    entries: dict[int, list[bytes]] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)


async def _check(bookie: Bookie, model: _Model) -> None:
    assert bookie.ledgers() == sorted(set(model.entries) | model.fenced)
    for ledger_id, entries in model.entries.items():
        assert bookie.last_entry_id(ledger_id) == len(entries) - 1
        if entries:
            stored = await bookie.read_entries(ledger_id, 0, len(entries) - 1)
            assert [s.data for s in stored] == entries
    for ledger_id in model.fenced | model.deleted:
        assert bookie.is_fenced(ledger_id)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_bookie_matches_a_model_under_random_operations(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    model = _Model()
    directory = tmp_path / "b"
    bookie = await Bookie.open(directory, journal_max_bytes=16 * 1024)
    try:
        for _ in range(120):
            ledger_id = rng.randint(1, 4)
            op = rng.choices(_OPS, weights=_WEIGHTS)[0]
            if op == "add":
                entries = model.entries.setdefault(ledger_id, [])
                batch = [rng.randbytes(rng.randint(0, 3000)) for _ in range(rng.randint(1, 6))]
                first = len(entries)
                adds = [
                    bookie.add_entry(ledger_id, first + i, data, last_add_confirmed=first + i - 1)
                    for i, data in enumerate(batch)
                ]
                if ledger_id in model.fenced or ledger_id in model.deleted:
                    with pytest.raises(LedgerFenced):
                        await adds[0]
                    for add in adds[1:]:
                        add.close()
                    if not entries:
                        del model.entries[ledger_id]
                else:
                    await asyncio.gather(*adds)
                    entries.extend(batch)
            elif op == "fence":
                await bookie.fence(ledger_id)
                if ledger_id not in model.deleted:
                    model.fenced.add(ledger_id)
                    model.entries.setdefault(ledger_id, [])
            elif op == "delete":
                await bookie.delete_ledger(ledger_id)
                model.entries.pop(ledger_id, None)
                if ledger_id in model.fenced:
                    model.deleted.add(ledger_id)
                model.fenced.discard(ledger_id)
                with pytest.raises(NoSuchLedger):
                    await bookie.read_entry(ledger_id, 0)
            elif op == "checkpoint":
                await bookie.checkpoint()
            else:
                await bookie.close()
                bookie = await Bookie.open(directory, journal_max_bytes=16 * 1024)
            await _check(bookie, model)
    finally:
        await bookie.close()
