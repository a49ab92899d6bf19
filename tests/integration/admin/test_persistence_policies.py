"""Namespace persistence policies (Pulsar's ``PersistencePolicies``): REST, the admin client and
``braid admin namespaces set-persistence|get-persistence|remove-persistence``; loaded topics
take a change for their next ledger."""

from __future__ import annotations

import httpx
import pytest

from braid.admin.client import AdminClient
from braid.admin.client_errors import AdminInvalidInputError
from braid.broker.topic_names import managed_ledger_name
from braid.cli.main import main
from braid.cli.standalone import StandaloneServer
from braid.core.names import TopicName
from tests.support.polling import eventually
from tests.support.standalone import StandaloneProcess

PATH = "/admin/v2/namespaces/public/default/persistence"
POLICY = {
    "bookkeeperEnsemble": 1,
    "bookkeeperWriteQuorum": 1,
    "bookkeeperAckQuorum": 1,
    "managedLedgerMaxMarkDeleteRate": 2.5,
}


async def test_persistence_policies_are_stored_served_and_removed(
    admin: httpx.AsyncClient,
) -> None:
    assert (await admin.get(PATH)).json() is None
    assert (await admin.post(PATH, json=POLICY)).status_code == 204
    assert (await admin.get(PATH)).json() == POLICY
    namespace = (await admin.get("/admin/v2/namespaces/public/default")).json()
    assert namespace["persistence"] == POLICY
    assert (await admin.delete(PATH)).status_code == 204
    assert (await admin.get(PATH)).json() is None


@pytest.mark.parametrize(
    "body",
    [
        {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 3, "bookkeeperAckQuorum": 1},
        {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 3},
        {"bookkeeperEnsemble": 0, "bookkeeperWriteQuorum": 0, "bookkeeperAckQuorum": 0},
        {"bookkeeperEnsemble": "3", "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2},
        {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1},
        [1, 1, 1],
    ],
)
async def test_impossible_quorums_are_refused_with_412_naming_the_keys(
    admin: httpx.AsyncClient, body: object
) -> None:
    response = await admin.post(PATH, json=body)
    assert response.status_code == 412
    assert "bookkeeper" in response.json()["reason"] or "persistence" in response.json()["reason"]
    assert (await admin.get(PATH)).json() is None


async def test_a_loaded_topic_takes_new_persistence_policies_for_its_next_ledger(
    standalone: StandaloneServer, admin: httpx.AsyncClient
) -> None:
    assert standalone.broker is not None and standalone.ml_factory is not None
    topic = "persistent://public/default/quorums"
    await standalone.broker.get_or_create_topic(topic, create=True)
    name = managed_ledger_name(TopicName.parse(topic))
    ml = standalone.ml_factory.opened(name)
    assert ml is not None and ml.config.ensemble == 1
    # Taken for the next ledger (which one standalone bookie could not hold: no rollover here).
    await admin.post(
        PATH,
        json={"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
    )
    await eventually(lambda: ml.config.ensemble == 2, message="the topic to follow the policy")
    assert (ml.config.write_quorum, ml.config.ack_quorum) == (2, 1)


def test_the_admin_cli_sets_shows_and_removes_persistence(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    ns = "public/default"
    base = ["admin", "--url", url, "namespaces"]
    assert main([*base, "set-persistence", ns, "-e", "1", "-w", "1", "-a", "1"]) == 0
    assert "ensemble 1, write quorum 1, ack quorum 1" in capsys.readouterr().out
    assert main([*base, "get-persistence", ns]) == 0
    assert "ensemble 1, write quorum 1, ack quorum 1" in capsys.readouterr().out
    assert main([*base, "set-persistence", ns, "-e", "1", "-w", "2", "-a", "1"]) == 1
    assert "bookkeeperWriteQuorum" in capsys.readouterr().err
    assert main([*base, "remove-persistence", ns]) == 0
    capsys.readouterr()
    assert main([*base, "get-persistence", ns]) == 0
    assert "not set" in capsys.readouterr().out
    with AdminClient(url) as client, pytest.raises(AdminInvalidInputError):
        client.namespaces.set_persistence(ns, 1, 2, 3)
