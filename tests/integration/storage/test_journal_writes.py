"""The journal writes a group's buffers with ``pwritev`` (no join): every byte lands in order,
across more buffers than one call takes and across short writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from braid.storage.bookie import ledger_files
from braid.storage.bookie.records import (
    JournalRecord,
    RecordKind,
    encode_record,
    encode_record_head,
)


def test_record_head_and_data_are_the_encoded_record() -> None:
    record = JournalRecord(RecordKind.ADD, 3, 9, 8, 120, b"payload" * 20)
    assert encode_record_head(record) + record.data == encode_record(record)


def _write(path: Path, buffers: list[bytes], offset: int) -> bytes:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"H" * offset, 0)
        ledger_files.pwritev_all(fd, buffers, offset)
    finally:
        os.close(fd)
    return path.read_bytes()


def test_more_buffers_than_one_call_takes_land_in_order(tmp_path: Path) -> None:
    buffers = [b"%05d|" % i for i in range(3 * ledger_files.IOV_MAX + 17)]
    assert _write(tmp_path / "j", buffers, 8) == b"H" * 8 + b"".join(buffers)


def test_short_writes_resume_mid_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pwritev

    def at_most_seven_bytes(fd: int, buffers: list[bytes], offset: int) -> int:
        # The kernel may write less than asked (a signal, a full pipe); simulate it.
        first = bytes(buffers[0])[:7]
        return real(fd, [first], offset)

    monkeypatch.setattr(ledger_files.os, "pwritev", at_most_seven_bytes)
    buffers = [b"abc", b"", b"defghijklmnop", b"q" * 40]
    assert _write(tmp_path / "j", buffers, 4) == b"HHHH" + b"".join(buffers)
