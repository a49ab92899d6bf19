"""Issue 26, TLS inside the cluster (ADR 0066): ``braid broker`` processes whose internal listener
serves HTTPS with mutual TLS, over ``braid bookie`` processes serving TLS with mutual TLS, on a
real ZooKeeper; every key is Pulsar's (``brokerClientTls*``, ``bookkeeperTLS*``) or BookKeeper's
(``tls*`` in bookkeeper.conf). Certificates are made at run time by a test CA.

* Keyed load on a scalable topic whose segments three brokers own (the controller creates them,
  and a split's children, on their owners over the internal listener; every ledger on the TLS
  bookies):
  nothing acknowledged is lost, no key goes backwards. The registry announces ``https://``
  internal addresses and HTTPS admin addresses (``webServiceUrlTls``); a plain-HTTP request, and a
  TLS request without a client certificate, to the internal port get no answer; a plain bookie
  client gets no answer from a bookie port, one with the brokers' certificate does. The split is
  sent to a non-leader's HTTPS admin port and forwarded to the leader's; a namespace unload sent
  to one broker unloads the bundles the others own through their HTTPS admin ports.
* A broker whose trust file names another CA cannot reach the other broker's internal listener,
  its admin API (a forwarded controller call, a namespace unload: no plain fallback to its
  ``webServiceUrl``) nor the bookies: its log names the TLS failure once per peer, however often
  it retries.
* The load manager's leader splits a bundle another broker owns through that broker's HTTPS
  admin port.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.admin import AdminClient, AdminError
from braid.core.layout_codec import layout_from_metadata
from braid.security.credentials import ClientCredentials
from braid.security.tls import client_context
from braid.storage.api import BookieUnavailable, StorageError
from braid.storage.bookie_net_client import NetBookieClient
from tests.cluster.brokers.conftest import MakeCluster
from tests.cluster.brokers.test_load_manager import FAST
from tests.cluster.brokers.test_scalable_across_brokers import (
    check,
    finish,
    get_layout,
    more,
    segment_owners,
)
from tests.support.bookie_process import BookieProcess
from tests.support.broker_cluster import (
    CLUSTER,
    Cluster,
    broker_settings,
    bundle_of,
    http_lookup,
)
from tests.support.broker_process import BrokerProcess, initialize_cluster
from tests.support.certificates import CertPair, TestCertificateAuthority
from tests.support.keyed_load import BraidKeyedLoad
from tests.support.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

STEP = 150
FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"


@dataclass(frozen=True)
class Pki:
    ca: Path
    other_ca: Path
    server: CertPair  # brokers' internal listeners and bookies (SANs localhost, 127.0.0.1)
    broker_client: CertPair  # what a broker presents to the others and to the bookies


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = TestCertificateAuthority(tmp_path / "pki")
    other = TestCertificateAuthority(tmp_path / "pki-other", name="another-ca")
    return Pki(ca.cert, other.cert, ca.issue("server", server=True), ca.issue("broker"))


def bookie_tls(pki: Pki) -> dict[str, str]:
    """bookkeeper.conf: TLS on the bookie port, client certificates required (BookKeeper's keys)."""
    return {
        "tlsProviderFactoryClass": FACTORY,
        "tlsProvider": "OpenSSL",
        "tlsCertificatePath": str(pki.server.cert),
        "tlsKeyStoreType": "PEM",
        "tlsKeyStore": str(pki.server.key),
        "tlsTrustStoreType": "PEM",
        "tlsTrustStore": str(pki.ca),
        "tlsClientAuthentication": "true",
    }


def broker_tls(pki: Pki, trust: Path | None = None) -> dict[str, str]:
    """broker.conf: HTTPS internal listener with mutual TLS, TLS to other brokers and to bookies
    (Pulsar's keys); ``trust``: the CA file the broker trusts (default: the right one)."""
    trusted = str(trust or pki.ca)
    return {
        "tlsCertificateFilePath": str(pki.server.cert),
        "tlsKeyFilePath": str(pki.server.key),
        "tlsTrustCertsFilePath": str(pki.ca),
        "tlsRequireTrustedClientCertOnConnect": "true",
        "webServicePortTls": "0",  # the HTTPS admin port the other brokers call
        "brokerClientTlsEnabled": "true",
        "brokerClientTrustCertsFilePath": trusted,
        "brokerClientCertificateFilePath": str(pki.broker_client.cert),
        "brokerClientKeyFilePath": str(pki.broker_client.key),
        "bookkeeperTLSClientAuthentication": "true",
        "bookkeeperTLSKeyFileType": "PEM",
        "bookkeeperTLSTrustCertTypes": "PEM",
        "bookkeeperTLSTrustCertsFilePath": trusted,
        "bookkeeperTLSCertificateFilePath": str(pki.broker_client.cert),
        "bookkeeperTLSKeyFilePath": str(pki.broker_client.key),
    }


@pytest.fixture
def tls_bookies(
    bookies: Callable[..., BookieProcess], pki: Pki
) -> Callable[[int], list[BookieProcess]]:
    def make(count: int) -> list[BookieProcess]:
        return [bookies(f"bk-{i}", **bookie_tls(pki)) for i in range(count)]

    return make


async def _read_lac(bookie: BookieProcess, tls: ssl.SSLContext | None) -> str:
    """``answered`` when the bookie answers a LAC read (of a ledger it does not have), else the
    type of the error the client raised."""
    client = NetBookieClient(
        bookie.bookie_id, ("127.0.0.1", bookie.port), ssl_context=tls, read_timeout_s=20
    )
    try:
        await client.read_lac(424242)
    except StorageError as exc:
        return type(exc).__name__
    finally:
        await client.close()
    return "answered"


def read_lac(bookie: BookieProcess, tls: ssl.SSLContext | None) -> str:
    return asyncio.run(_read_lac(bookie, tls))


def https_admin_client(url: str | None, pki: Pki) -> AdminClient:
    """An admin client on a broker's HTTPS admin port (from its ``webServiceUrlTls``), with the
    brokers' certificate (the port asks for a trusted one, like the internal listener)."""
    assert url is not None and url.startswith("https://"), url
    cert = ClientCredentials(
        method="tls", cert_file=pki.broker_client.cert, key_file=pki.broker_client.key
    )
    return AdminClient(url, credentials=cert, tls_trust_certs_file=pki.ca)


def test_brokers_and_bookies_speak_tls_inside_the_cluster(
    make_cluster: MakeCluster, pki: Pki, tls_bookies: Callable[[int], list[BookieProcess]]
) -> None:
    cluster = make_cluster(extra=broker_tls(pki))
    cluster.bookies = tls_bookies(3)
    cluster.start()

    # Every broker announces an https internal listener that refuses plain HTTP and TLS
    # callers without a trusted certificate, and the HTTPS admin URL the others call. A broker
    # answers /health a moment before it registers: wait for the three entries.
    wait_for(lambda: len(cluster.registry()) == 3, within=30, message="three registered brokers")
    registry = cluster.registry()
    internal = {b: e["internalUrl"] for b, e in registry.items()}
    assert len(internal) == 3
    assert all(url.startswith("https://") for url in internal.values()), internal
    https_admin = {e["pulsarServiceUrl"]: e.get("webServiceUrlTls") for e in registry.values()}
    assert all(str(url).startswith("https://") for url in https_admin.values()), registry
    url = next(iter(internal.values()))
    with httpx.Client(timeout=20) as http, pytest.raises(httpx.HTTPError):
        http.get(url.replace("https://", "http://", 1) + "/internal/v1/lookup?topic=x")
    anonymous = client_context(trust_certs_file=pki.ca)
    with httpx.Client(timeout=20, verify=anonymous) as http, pytest.raises(httpx.HTTPError):
        http.get(url + "/internal/v1/lookup?topic=x")
    # With the brokers' certificate the TLS handshake passes (the broker secret is still asked).
    trusted = client_context(
        trust_certs_file=pki.ca,
        certificate_file=pki.broker_client.cert,
        key_file=pki.broker_client.key,
    )
    with httpx.Client(timeout=20, verify=trusted) as http:
        assert http.get(url + "/internal/v1/lookup?topic=x").status_code == 403

    # A bookie port: no answer in plain TCP, an answer over TLS with the brokers' certificate.
    bookie = cluster.bookies[0]
    assert read_lac(bookie, None) == BookieUnavailable.__name__
    assert read_lac(bookie, trusted) == "answered"

    # A scalable topic over the three brokers; a split sent to a non-leader's HTTPS admin port,
    # forwarded to the leader's HTTPS admin port, under load.
    topic = "topic://public/default/tls-spread"
    with AdminClient(cluster.brokers[0].web_url) as admin:
        admin.scalable_topics.create(topic, segments=6)
    layout = get_layout(cluster.brokers[1], topic)
    owners = segment_owners(cluster, topic, layout)
    assert None not in owners.values(), owners
    assert len(set(owners.values())) >= 2, owners
    load = BraidKeyedLoad(cluster.service_url, topic).start()
    try:
        more(load, STEP, 120, "receipts before the split")
        leader = cluster.controller_leader(topic)
        follower = next(b for b in cluster.brokers if b.service_url != leader)
        widest = max(layout.active_segments, key=lambda s: s.hash_range.end - s.hash_range.start)
        with https_admin_client(https_admin[follower.service_url], pki) as admin:
            layout = layout_from_metadata(admin.scalable_topics.split(topic, widest.segment_id))
        assert len([s for s in layout.active_segments if widest.segment_id in s.parent_ids]) == 2
        more(load, STEP, 120, "receipts after the split")
        report = finish(load)
    finally:
        load.close()
    check(report)

    # A namespace unload sent to one broker: the bundles the others own are unloaded by them,
    # asked over their HTTPS admin ports (each moves to another broker).
    caller = cluster.brokers[0]
    remote = {
        name: owner.native_url
        for name, owner in cluster.ownership_nodes().items()
        if owner.native_url != caller.service_url
    }
    assert remote, "every bundle is owned by the caller"
    with https_admin_client(https_admin[caller.service_url], pki) as admin:
        admin.namespaces.unload("public/default")

    def moved() -> bool:
        nodes = cluster.ownership_nodes()
        return all(
            name not in nodes or nodes[name].native_url != was or nodes[name].disabled
            for name, was in remote.items()
        )

    wait_for(moved, within=60, message=f"the other brokers to unload {sorted(remote)}")

    # A client that came in over HTTPS is sent to the owner's HTTPS port, never downgraded.
    path = "persistent/public/default/tls-redirect"
    with httpx.Client(timeout=20, verify=trusted, follow_redirects=True) as http:
        found = http.get(f"{https_admin[caller.service_url]}/lookup/v2/topic/{path}")
        assert found.status_code == 200, found.text
        owner_url = found.json()["brokerUrl"]
        assert owner_url in https_admin, (owner_url, https_admin)
        other = next(url for svc, url in https_admin.items() if svc != owner_url)
        answer = http.get(f"{other}/admin/v2/{path}/stats", follow_redirects=False)
        assert answer.status_code == 307, answer.text
        assert answer.headers["location"].startswith(f"{https_admin[owner_url]}/admin/v2/"), (
            answer.headers
        )
        looked_up = http.get(f"{other}/lookup/v2/topic/{path}", follow_redirects=False).json()
        assert looked_up["httpUrlTls"] == https_admin[owner_url], looked_up

    for broker in cluster.brokers:
        assert "unloading " not in broker.output(), broker.output()[-3000:]
        assert "TLS to broker" not in broker.output(), broker.output()[-3000:]
        assert "TLS handshake" not in broker.output(), broker.output()[-3000:]


def test_the_leader_splits_a_bundle_of_another_broker_over_its_https_admin_port(
    make_cluster: MakeCluster, pki: Pki, tls_bookies: Callable[[int], list[BookieProcess]]
) -> None:
    """The load manager's split of a bundle another broker owns (``PUT .../split`` on the
    owner's admin API) reaches the owner's HTTPS admin port, with the brokers' certificate."""
    split_fast = {
        **FAST,
        "loadBalancerSheddingEnabled": "false",
        "loadBalancerNamespaceBundleMaxTopics": "2",
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": "1",
    }
    cluster = make_cluster(extra={**broker_tls(pki), **split_fast})
    cluster.bookies = tls_bookies(3)
    cluster.start()
    with AdminClient(cluster.brokers[0].web_url) as admin:
        leader = admin.leader_broker()["brokerId"]
        before = len(admin.namespaces.bundles("public/default")["boundaries"])
    # Three topics of one bundle (over the two-topic limit) that a non-leader owns.
    names = (f"persistent://public/default/tls-split-{i}" for i in itertools.count())
    first = next(
        n
        for n in itertools.islice(names, 300)
        if not http_lookup(cluster.brokers[0], n).endswith(leader)
    )
    topics = [first, *itertools.islice((n for n in names if bundle_of(n) == bundle_of(first)), 2)]
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        for topic in topics:
            client.create_producer(topic).send(b"load")

        def split() -> bool:
            with AdminClient(cluster.brokers[0].web_url) as admin:
                return len(admin.namespaces.bundles("public/default")["boundaries"]) > before

        wait_for(split, within=120, message=f"the leader to split {bundle_of(first)}")
    finally:
        client.close()

    # The leader's HTTP client logs each request once answered: to an https:// admin URL.
    def logs() -> str:
        return "".join(broker.output() for broker in cluster.brokers)

    wait_for(lambda: "/split?unload=true" in logs(), within=60, message="the split's request log")
    assert "PUT https://" in logs(), logs()[-3000:]
    assert "PUT http://" not in logs()
    assert "TLS to broker" not in logs()


@pytest.fixture
def two_brokers(
    tmp_path: Path, zk_url: str, pki: Pki, tls_bookies: Callable[[int], list[BookieProcess]]
) -> Iterator[tuple[Cluster, BrokerProcess, BrokerProcess]]:
    """Bookies and two brokers: ``good`` trusts the CA, ``wrong`` trusts another one."""
    cluster = Cluster(tmp_path, zk_url, tls_bookies(3))
    base = broker_settings(zk_url)
    good = BrokerProcess(tmp_path / "good", {**base, **broker_tls(pki)})
    wrong = BrokerProcess(tmp_path / "wrong", {**base, **broker_tls(pki, trust=pki.other_ca)})
    cluster.brokers = [good, wrong]
    try:
        for bookie in cluster.bookies:
            bookie.start()
        initialize_cluster(CLUSTER, zk_url, good.web_url, good.service_url)
        good.start(timeout=90)
        wrong.start(timeout=90)
        yield cluster, good, wrong
    finally:
        cluster.stop()


#: The official client sends one message; a send that never completes is its process's end.
_PRODUCE = """
import sys, pulsar
client = pulsar.Client(sys.argv[1], operation_timeout_seconds=10)
producer = client.create_producer(sys.argv[2], send_timeout_millis=5000)
try:
    producer.send(b"never stored")
    print("stored", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
"""


def try_to_produce(broker: BrokerProcess, topic: str) -> str:
    """``stored``, the official client's error, or ``hung`` (its process is killed after 45 s:
    a client that waits on a broker retrying its bookies must not hold the test)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PRODUCE, broker.service_url, topic],
            capture_output=True,
            text=True,
            timeout=45,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "hung"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def _count(text: str, needle: str) -> int:
    return sum(1 for line in text.splitlines() if needle in line)


def test_a_broker_trusting_another_ca_cannot_reach_the_other_broker_nor_the_bookies(
    two_brokers: tuple[Cluster, BrokerProcess, BrokerProcess],
) -> None:
    cluster, good, wrong = two_brokers
    with AdminClient(good.web_url) as admin:
        assert admin.leader_broker()["serviceUrl"].endswith(good.web_url.split("//")[1])

    # The wrong broker leads a new scalable topic's controller: placing its segments goes
    # through the load manager's leader (the good broker) over the internal listener - refused.
    topic = "topic://public/default/tls-wrong-ca"
    for _ in range(2):  # tried again: still named once
        with AdminClient(wrong.web_url) as admin, pytest.raises(Exception):  # noqa: B017
            admin.scalable_topics.create(topic, segments=2)
    peer = f"TLS to broker {good.service_url} failed"
    wait_for(lambda: _count(wrong.output(), peer) == 1, within=60, message=peer)
    assert "CERTIFICATE_VERIFY_FAILED" in wrong.output()

    # Its admin API neither: a subscription asked of the wrong broker is forwarded to the
    # controller leader (the good broker) at its HTTPS admin URL - refused, no plain fallback to
    # its webServiceUrl - and a namespace unload leaves the good broker's bundles where they are.
    led = "topic://public/default/tls-wrong-ca-led"
    with AdminClient(good.web_url) as admin:
        admin.scalable_topics.create(led, segments=1)
        admin.scalable_topics.create_subscription(led, "first")  # its controller leads it
    wait_for(lambda: cluster.controller_leader(led) == good.service_url, within=60)
    with AdminClient(wrong.web_url) as admin, pytest.raises(AdminError) as refused:
        admin.scalable_topics.create_subscription(led, "never")
    assert "https://" in str(refused.value), refused.value
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value), refused.value
    names = (f"persistent://public/default/tls-good-{i}" for i in itertools.count())
    mine = next(n for n in itertools.islice(names, 200) if http_lookup(good, n) == good.service_url)
    held = {
        name
        for name, owner in cluster.ownership_nodes().items()
        if owner.native_url == good.service_url
    }
    assert bundle_of(mine) in held
    with AdminClient(wrong.web_url) as admin:
        admin.namespaces.unload("public/default")
    nodes = cluster.ownership_nodes()
    assert all(
        n in nodes and nodes[n].native_url == good.service_url and not nodes[n].disabled
        for n in held
    ), nodes
    assert _count(wrong.output(), peer) == 1

    # A topic the wrong broker owns: its ledger cannot be written, its bookie client is refused.
    names = (f"persistent://public/default/tls-wrong-{i}" for i in itertools.count())
    owned = (n for n in itertools.islice(names, 200) if http_lookup(good, n) == wrong.service_url)
    topic = next(owned)
    # The broker's ledger writer retries the bookies many times a second: still named once.
    assert try_to_produce(wrong, topic) != "stored"
    handshake = ": TLS handshake with 127.0.0.1:"
    wait_for(lambda: _count(wrong.output(), handshake) >= 1, within=60, message=handshake)
    for bookie in cluster.bookies:
        assert _count(wrong.output(), f"bookie {bookie.bookie_id}{handshake}") <= 1
    # The good broker writes to the same bookies and reaches the wrong one's internal listener.
    assert "TLS handshake" not in good.output()
