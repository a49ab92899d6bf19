"""``braid standalone`` with TLS on both ports and token + basic authentication, driven by Braid's
own client and an HTTPS admin client.

Certificates are made at run time by a test CA. The scalable topic checks that the DAG names the
owners' ``pulsar+ssl://`` URLs and that the client follows them.
"""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import bcrypt
import httpx
import pytest

import braid
from braid.cli.standalone import StandaloneServer
from braid.security import basic, tokens
from tests.support.certificates import TestCertificateAuthority
from tests.support.standalone import standalone_config

pytestmark = pytest.mark.timeout(120)

SECRET = b"an HS256 secret of 32 bytes....!"


def _token(subject: str, expires_at: float | None = None) -> str:
    return tokens.create_token(subject, secret_key=SECRET, expires_at=expires_at)


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[StandaloneServer, Path]]:
    ca = TestCertificateAuthority(tmp_path / "pki")
    server_cert = ca.issue("localhost", server=True)
    htpasswd = tmp_path / "htpasswd"
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    htpasswd.write_text(f"ops:{hashed}\n")
    config = standalone_config(
        tmp_path / "data",
        broker_service_port_tls=0,
        web_service_port_tls=0,
        advertised_address="localhost",
        tls_certificate_file_path=server_cert.cert,
        tls_key_file_path=server_cert.key,
        tls_trust_certs_file_path=ca.cert,
        authentication_enabled=True,
        authentication_providers=(tokens.CLASS_NAME, basic.CLASS_NAME),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        basic_auth_conf=str(htpasswd),
    )
    server = StandaloneServer(config)
    await server.start()
    try:
        yield server, ca.cert
    finally:
        await server.close()


async def test_braid_client_produces_and_consumes_a_scalable_topic_over_tls_with_a_token(
    secured: tuple[StandaloneServer, Path],
) -> None:
    server, ca = secured
    assert server.service_url_tls is not None
    client = braid.AsyncClient(
        server.service_url_tls,
        authentication=braid.AuthenticationToken(_token("app")),
        tls_trust_certs_file=ca,
        operation_timeout=10,
    )
    try:
        topic = "topic://public/default/secured"
        consumer = await client.subscribe_stream(topic, "s", initial_position="earliest")
        producer = await client.create_producer(topic)
        await producer.send(b"over tls", key="k")
        message = await consumer.receive(timeout=10)
        assert message is not None and message.value == b"over tls"
        # Every connection the client opened is TLS, segment owners and controller included.
        urls = set(client._context()[0].pool._connections)
        assert urls and all(url.startswith("pulsar+ssl://") for url in urls)
    finally:
        await client.close()


@pytest.mark.parametrize(
    "token",
    [_token("app", expires_at=time.time() - 1), "garbage", _token("app") + "x"],
    ids=["expired", "garbage", "bad-signature"],
)
async def test_braid_client_with_bad_credentials_gets_authentication_error(
    secured: tuple[StandaloneServer, Path], token: str
) -> None:
    server, ca = secured
    for url in (server.service_url, server.service_url_tls):
        assert url is not None
        client = braid.AsyncClient(
            url,
            authentication=braid.AuthenticationToken(token),
            tls_trust_certs_file=ca,
            operation_timeout=5,
        )
        try:
            with pytest.raises(braid.AuthenticationError):
                await client.create_producer("persistent://public/default/refused")
        finally:
            await client.close()


async def test_braid_client_checks_the_broker_host_name(
    secured: tuple[StandaloneServer, Path],
) -> None:
    server, ca = secured
    assert server.broker is not None and server.broker.tls_port is not None
    # The certificate names localhost and 127.0.0.1, not this alias.
    url = f"pulsar+ssl://127.0.0.2:{server.broker.tls_port}"
    client = braid.AsyncClient(
        url,
        authentication=braid.AuthenticationToken(_token("app")),
        tls_trust_certs_file=ca,
        operation_timeout=3,
        connection_timeout=2,
    )
    try:
        with pytest.raises((braid.ConnectError, braid.TimeoutError)):
            await client.create_producer("persistent://public/default/wrong-host")
    finally:
        await client.close()


async def test_admin_api_over_https_requires_credentials(
    secured: tuple[StandaloneServer, Path],
) -> None:
    server, ca = secured
    assert server.web_service_url_tls is not None
    context = ssl.create_default_context(cafile=str(ca))
    async with httpx.AsyncClient(base_url=server.web_service_url_tls, verify=context) as http:
        assert (await http.get("/health")).status_code == 200
        refused = await http.get("/admin/v2/tenants")
        assert refused.status_code == 401
        assert refused.json() == {"reason": "Authentication required"}
        assert refused.headers["www-authenticate"].startswith("Basic")
        bearer = {"Authorization": f"Bearer {_token('admin')}"}
        assert (await http.get("/admin/v2/tenants", headers=bearer)).json() == ["public"]
        assert (await http.get("/admin/v2/tenants", auth=("ops", "s3cret"))).status_code == 200
        for headers in (
            {"Authorization": "Bearer not.a.jwt"},
            {"Authorization": f"Bearer {_token('admin', expires_at=time.time() - 5)}"},
            {"Authorization": "Basic !!!"},
            {"Authorization": "Digest abc"},
            {"Authorization": "Bearer " + "A" * 30_000},
        ):
            assert (await http.get("/admin/v2/tenants", headers=headers)).status_code == 401
        assert (await http.get("/admin/v2/tenants", auth=("ops", "wrong"))).status_code == 401
    # The plain port asks for the same credentials.
    async with httpx.AsyncClient(base_url=server.web_service_url) as http:
        assert (await http.get("/admin/v2/tenants")).status_code == 401


async def test_braid_admin_cli_over_https_with_pulsar_admin_credentials(
    secured: tuple[StandaloneServer, Path], tmp_path: Path
) -> None:
    import asyncio
    import io
    import json

    from braid.cli.admin import run_admin
    from braid.cli.main import build_parser

    server, ca = secured
    token_file = tmp_path / "admin.jwt"
    token_file.write_text(_token("admin"))
    common = ["admin", "--url", str(server.web_service_url_tls), "--tls-trust-cert-path", str(ca)]

    def run(*extra: str) -> tuple[int, str]:
        out = io.StringIO()
        args = build_parser().parse_args([*common, *extra])
        return run_admin(args, out), out.getvalue()

    plugin = "org.apache.pulsar.client.impl.auth."
    code, out = await asyncio.to_thread(
        run,
        "--auth-plugin",
        plugin + "AuthenticationToken",
        "--auth-params",
        f"file://{token_file}",
        "-o",
        "json",
        "tenants",
        "list",
    )
    assert (code, json.loads(out)) == (0, ["public"])
    basic_params = json.dumps({"userId": "ops", "password": "s3cret"})
    code, _ = await asyncio.to_thread(
        run, "--auth-plugin", plugin + "AuthenticationBasic", "--auth-params", basic_params,
        "tenants", "list",
    )  # fmt: skip
    assert code == 0
    code, _ = await asyncio.to_thread(run, "--token", _token("admin"), "tenants", "list")
    assert code == 0
    code, _ = await asyncio.to_thread(run, "tenants", "list")  # no credentials
    assert code == 1


async def test_admin_auth_fuzz_never_answers_5xx(secured: tuple[StandaloneServer, Path]) -> None:
    import random

    server, ca = secured
    rng = random.Random(26)
    good = _token("admin")
    header, payload, _sig = good.split(".")
    candidates = [
        "Bearer " + good[:-1],
        f"Bearer {header}.{payload}.",
        f"Bearer {header}..",
        "Bearer ....",
        "Bearer \u00e9\u00e8",
        "Basic " + base64.b64encode(b"ops").decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:\x00").decode(),
        "Basic " + base64.b64encode(b"ops:" + b"x" * 5000).decode(),
        "Bearer " + "x" * 200_000,
        "NTLM TlRMTVNTUAABAAAA",
    ]
    alphabet = "AZaz09+/=._- :\t"
    candidates += [
        "Bearer " + "".join(rng.choices(alphabet, k=rng.randint(0, 300))) for _ in range(60)
    ]
    candidates += [
        "Basic " + "".join(rng.choices(alphabet, k=rng.randint(0, 100))) for _ in range(40)
    ]
    context = ssl.create_default_context(cafile=str(ca))
    async with httpx.AsyncClient(base_url=server.web_service_url_tls or "", verify=context) as http:
        statuses = set()
        for value in candidates:
            try:
                response = await http.get("/admin/v2/tenants", headers={"Authorization": value})
            except (httpx.LocalProtocolError, UnicodeEncodeError):
                continue  # not sendable as a header at all
            statuses.add(response.status_code)
        # 401 for every credential; 400/431 from the HTTP layer for a header too large to parse.
        assert 401 in statuses and statuses <= {400, 401, 431}
        # Other clients are served all along.
        bearer = {"Authorization": f"Bearer {good}"}
        assert (await http.get("/admin/v2/tenants", headers=bearer)).status_code == 200


async def test_official_client_over_https_lookup_follows_the_tls_broker_url(
    secured: tuple[StandaloneServer, Path],
) -> None:
    import asyncio
    import logging

    import pulsar

    server, ca = secured
    quiet = logging.getLogger("official-client")
    quiet.setLevel(logging.CRITICAL)

    def round_trip() -> bytes:
        client = pulsar.Client(
            str(server.web_service_url_tls),
            authentication=pulsar.AuthenticationToken(_token("app")),
            tls_trust_certs_file_path=str(ca),
            tls_validate_hostname=True,
            operation_timeout_seconds=10,
            logger=quiet,
        )
        try:
            topic = "persistent://public/default/https-lookup"
            consumer = client.subscribe(topic, "s")
            client.create_producer(topic).send(b"via https lookup")
            return bytes(consumer.receive(timeout_millis=10_000).data())
        finally:
            client.close()

    assert await asyncio.to_thread(round_trip) == b"via https lookup"
