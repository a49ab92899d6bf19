"""Spark processes for the spark tier, started from the ``pyspark`` package's own scripts: a
standalone cluster (a master and workers, ``bin/spark-class``) and a Spark Connect server
(``sbin/start-connect-server.sh``).

Everything listens on 127.0.0.1 on free ports, keeps its logs and work directories under the
given directory, and is stopped by process id (the master's and workers' Java processes are the
ones this module started; the Connect server's is the one its pid file names).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pyspark

from braid.cli.process import free_port
from tests.support.polling import wait_for

SPARK_HOME = Path(pyspark.__file__).parent
#: How long a Spark JVM may take to come up on a loaded 2-core machine.
START_SECONDS = 120.0


def spark_env(directory: Path, **extra: str) -> dict[str, str]:
    """The environment of Spark processes started from the pyspark package."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(directory / "logs"),
        SPARK_PID_DIR=str(directory / "pids"),
        SPARK_LOCAL_DIRS=str(directory / "local"),
        SPARK_IDENT_STRING="braid-tests",
        PYSPARK_PYTHON=extra.pop("PYSPARK_PYTHON", sys.executable),
    )
    env.update(extra)
    return env


def _stop(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


def _log_tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers (``cores`` and ``memory`` each)."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.directory = directory
        self.port = free_port()
        self.web_port = free_port()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._workers = workers
        self._cores = cores
        self._memory = memory

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.directory / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                env=spark_env(self.directory),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
            )
        self._processes.append(process)
        return process

    def alive_workers(self) -> int:
        try:
            state = httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=2.0).json()
        except (httpx.HTTPError, ValueError):
            return 0
        return int(state.get("aliveworkers", 0))

    def start(self) -> StandaloneCluster:
        for sub in ("logs", "pids", "local"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        self._spark_class(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.web_port),
        )
        for i in range(self._workers):
            work = self.directory / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._spark_class(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self._cores),
                "--memory",
                self._memory,
                "--work-dir",
                str(work),
                self.url,
            )
        try:
            wait_for(
                lambda: self._all_running() and self.alive_workers() == self._workers,
                within=START_SECONDS,
                interval=0.5,
                message=lambda: (
                    f"{self._workers} Spark workers registered with the master\n"
                    + _log_tail(self.directory / "master.log")
                ),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _all_running(self) -> bool:
        dead = [p for p in self._processes if p.poll() is not None]
        if dead:
            raise RuntimeError(
                f"a Spark process exited with {dead[0].returncode}: {dead[0].args}\n"
                + _log_tail(self.directory / "master.log")
            )
        return True

    def stop(self) -> None:
        for process in reversed(self._processes):
            _stop(process)
        self._processes.clear()


class ConnectServer:
    """A Spark Connect server (``start-connect-server.sh``) running ``master`` on free ports;
    its Python workers run ``python``."""

    def __init__(self, directory: Path, python: str = sys.executable, master: str = "local[2]"):
        self.directory = directory
        self.port = free_port()
        self._python = python
        self._master = master
        self._pid: int | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        for sub in ("logs", "pids", "local"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        env = spark_env(self.directory, PYSPARK_PYTHON=self._python)
        subprocess.run(
            [
                str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
                "--master",
                self._master,
                "--conf",
                f"spark.connect.grpc.binding.port={self.port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--conf",
                "spark.sql.shuffle.partitions=2",
                "--conf",
                "spark.python.authenticate.socketTimeout=120s",  # a loaded machine starts slowly
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=START_SECONDS,
        )
        pid_files = list((self.directory / "pids").glob("*SparkConnectServer*.pid"))
        if len(pid_files) != 1:
            raise RuntimeError(f"no pid file of the Connect server in {self.directory / 'pids'}")
        self._pid = int(pid_files[0].read_text().strip())
        try:
            wait_for(
                self._listening,
                within=START_SECONDS,
                interval=0.5,
                message=lambda: "the Spark Connect server listening\n" + self.log_tail(),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self) -> str:
        logs = sorted((self.directory / "logs").glob("*SparkConnectServer*.out"))
        return _log_tail(logs[-1]) if logs else ""

    def _listening(self) -> bool:
        assert self._pid is not None
        os.kill(self._pid, 0)  # raises when the server died
        import socket

        with socket.socket() as probe:
            probe.settimeout(1.0)
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        pid, self._pid = self._pid, None
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not _alive(pid), within=30.0, interval=0.2, message="server exit")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        # A zombie (exited, not yet reaped by its parent) counts as gone.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


__all__ = ["SPARK_HOME", "ConnectServer", "StandaloneCluster", "spark_env"]
