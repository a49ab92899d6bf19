"""The in-process standalone assembly: data-dir lock, URLs, clean close."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.cli.standalone import StandaloneServer
from braid.filelock import DataDirInUse
from tests.support.standalone import standalone_config


async def test_second_server_on_the_same_data_dir_is_refused(
    standalone: StandaloneServer,
) -> None:
    second = StandaloneServer(standalone.config)
    with pytest.raises(DataDirInUse, match="in use"):
        await second.start()
    # The refused server must not have disturbed the running one.
    assert standalone.service_url.startswith("pulsar://127.0.0.1:")


async def test_urls_report_the_bound_ports(standalone: StandaloneServer) -> None:
    assert not standalone.service_url.endswith(":0")
    assert standalone.web_service_url.startswith("http://127.0.0.1:")
    assert not standalone.web_service_url.endswith(":0")


async def test_close_is_idempotent_and_releases_the_data_dir(tmp_path: Path) -> None:
    config = standalone_config(tmp_path / "data")
    server = StandaloneServer(config)
    await server.start()
    await server.close()
    await server.close()
    again = StandaloneServer(config)
    await again.start()
    await again.close()
    assert (tmp_path / "data" / "metadata" / "metadata.db").exists()
