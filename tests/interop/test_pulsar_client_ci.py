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

from tests.support.netns import missing_requirement

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
