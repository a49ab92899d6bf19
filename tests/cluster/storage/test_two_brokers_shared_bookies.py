"""Two brokers on shared bookies (``--bookies 0``) and one metadata store (ADR 0040).

Shared bookies make fencing real - a broker taking a topic over fences the other's ledger on the
bookie both write to - but they do not make two brokers on one store safe while brokers do not own
topics: both serve any topic, each takes the other's ledger over, and a ledger the new owner
deletes (an empty one at once, the others when trimmed) loses its fence on the bookie with it, so
the old owner's next sends are acknowledged into a ledger nobody lists (pinned as a known gap in
``tests/integration/ledger/test_fencing.py``). So the second broker is refused here too; another
data directory may take the store over once the first broker is gone (the ledgers are on the
bookies, not in a data directory), and brokers with stores of their own may share the bookies.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from braid.cli.process import StandaloneStartError
from tests.support.bookie_process import BookieProcess
from tests.support.standalone import StandaloneProcess, produce, read_all

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

TOPIC = "persistent://public/default/shared"


def _broker(tmp_path: Path, name: str, conf: Path) -> StandaloneProcess:
    return StandaloneProcess(
        tmp_path / name, extra_args=["--config", str(conf)], log_path=tmp_path / f"{name}.log"
    )


def test_a_second_broker_on_shared_bookies_is_refused_and_the_store_can_change_hands(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    bookies("bk-0").start()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metadataStoreUrl={zk_url}\nstandaloneBookies=0\n")
    first = _broker(tmp_path, "a", conf)
    first.start(timeout=60)
    try:
        produce(first, TOPIC, [f"a-{i}" for i in range(10)])
        second = _broker(tmp_path, "b", conf)
        with pytest.raises(StandaloneStartError) as refused:
            second.start(timeout=60)
        errors = [line for line in str(refused.value).splitlines() if "level=ERROR" in line]
        assert len(errors) == 1, errors
        assert first.service_url in errors[0] and "braid broker" in errors[0]
        assert "Traceback" not in str(refused.value)
        assert read_all(first, TOPIC) == [f"a-{i}" for i in range(10)]
    finally:
        first.stop()

    # The first broker is gone: another data directory serves the store, with every message.
    second.start(timeout=60)
    try:
        produce(second, TOPIC, ["b-0"])
        assert read_all(second, TOPIC) == [*(f"a-{i}" for i in range(10)), "b-0"]
    finally:
        second.stop()
