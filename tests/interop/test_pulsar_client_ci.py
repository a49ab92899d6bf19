"""The official Python client's own CI setup and its own test suites against a standalone -
``pulsar_test.py`` (every test but ``test_connect_timeout``, which needs a route to a TEST-NET
address), ``schema_test.py``, ``asyncio_test.py``, ``reader_test.py``, ``table_view_test.py``:
92 + 74 tests - with ``braid`` in place of ``bin/pulsar`` (``tools/run_pulsar_client_ci.py
--all``).

The upstream setup uses fixed ports (6650, 6651, 8080, 8443), so the run happens in a network
namespace of its own (root, as CI runs); the script deletes it and stops every process it started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import NetworkLab, missing_requirement

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "run_pulsar_client_ci.py"


@pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement()))
def test_the_official_clients_own_test_suite_passes_against_braid_standalone(
    tmp_path: Path,
) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--netns", "--all", "--work-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=840,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-20_000:]
    assert "Ran 166 tests" in output and "\nOK" in output, output[-20_000:]
    for status in (
        "PUT /admin/v2/tenants/private -> 204",
        "namespaces/private/auth -> 204",
        # public/default exists from the start: the setup's grant is applied as an update.
        "POST /admin/v2/namespaces/public/default/permissions/anonymous -> 204",
    ):
        assert status in output


#: Inside a lab host: the runner's ``run`` with its test process made to report the client's
#: close race after the tests really ran - so the first standalone holds their messages.
_RERUN_DRIVER = """
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import run_pulsar_client_ci as runner

real = runner._unittest
calls = []


def first_run_aborts(names, tests_dir):
    status, output = real(names, tests_dir)
    calls.append(status)
    if len(calls) == 1:
        return -6, output + "terminate called: " + runner.CLIENT_CLOSE_RACE
    return status, output


runner._unittest = first_run_aborts
status = runner.run(Path(sys.argv[2]), sys.argv[3:], 120.0)
print("statuses", calls, "final", status, flush=True)
sys.exit(status)
"""


@pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement()))
def test_a_run_the_clients_close_race_aborted_is_redone_on_a_fresh_standalone(
    tmp_path: Path,
) -> None:
    # These tests read fixed-name topics from the earliest message: on the first run's
    # standalone, a second run reads the first one's messages too (CI, 2026-11-28).
    tests = ["test_reader_simple", "test_get_last_message_id", "test_encryption"]
    driver = tmp_path / "driver.py"
    driver.write_text(_RERUN_DRIVER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    with NetworkLab() as lab:
        host = lab.add_host("client-ci")
        proc = lab.popen(
            host,
            [sys.executable, str(driver), str(SCRIPT.parent), str(tmp_path / "run"), *tests],
            env=env,
            stdout=subprocess.PIPE,
        )
        output = proc.communicate(timeout=600)[0].decode(errors="replace")
    assert proc.returncode == 0, output[-20_000:]
    assert "statuses [0, 0] final 0" in output, output[-20_000:]
    assert "once more on a fresh standalone" in output
    assert output.count("Ran 3 tests") == 2 and (tmp_path / "run" / "rerun" / "data").is_dir()
