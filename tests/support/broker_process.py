"""``braid broker`` as a real child process, for the cluster tests.

:class:`BrokerProcess` is :class:`braid.cli.process.StandaloneProcess` (free 127.0.0.1 ports kept
across restarts, readiness polled with a deadline, stop/kill by its own process id) running
``braid broker --config <file>`` instead: the file holds the given broker.conf settings plus the
process's address and ports. :func:`initialize_cluster` runs ``braid initialize-cluster-metadata``
as a child process too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from braid.cli.process import StandaloneProcess

_SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


class BrokerProcess(StandaloneProcess):
    """One ``braid broker`` child process with the broker.conf ``settings``."""

    def __init__(self, data_dir: Path, settings: Mapping[str, str], **kwargs: object) -> None:
        super().__init__(data_dir, env=_env(), **kwargs)  # type: ignore[arg-type]
        self.settings = dict(settings)
        self.conf_path = self.data_dir.with_name(self.data_dir.name + ".conf")

    @property
    def broker_id(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        lines = {
            **self.settings,
            "bindAddress": self.host,
            "advertisedAddress": self.host,
            "brokerServicePort": str(self.port),
            "webServicePort": str(self.web_port),
        }
        self.conf_path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return [
            sys.executable,
            "-m",
            "braid.cli.main",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--config",
            str(self.conf_path),
        ]


def initialize_cluster(
    cluster: str, store_url: str, web_url: str, broker_url: str, *, bundles: int = 16
) -> str:
    """Run ``braid initialize-cluster-metadata``; returns its output (raises if it fails)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "braid.cli.main",
            "initialize-cluster-metadata",
            "--cluster",
            cluster,
            "--metadata-store",
            store_url,
            "--configuration-metadata-store",
            store_url,
            "--web-service-url",
            web_url,
            "--broker-service-url",
            broker_url,
            "--default-namespace-bundle-number",
            str(bundles),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout
