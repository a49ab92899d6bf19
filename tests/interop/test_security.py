"""The official ``pulsar-client`` against a broker with TLS and authentication on.

One broker per module listens on ``pulsar://`` and ``pulsar+ssl://`` (certificates made at run
time by a test CA), with the token (HS256 secret), basic (htpasswd with bcrypt, apr1 and crypt
lines) and TLS (certificate CN) providers configured under Pulsar's class names. Every refusal
must reach the client as Pulsar's ``AuthenticationError``, and the connections that did
authenticate carry their role.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pulsar
import pytest
from passlib.hash import apr_md5_crypt, des_crypt

from braid.security import basic, tls_auth, tokens
from tests.support.broker_stack import BackgroundBroker
from tests.support.certificates import TestCertificateAuthority
from tests.support.polling import wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

SECRET = b"0123456789abcdef0123456789abcdef"


class Pki:
    def __init__(self, directory: Path) -> None:
        self.ca = TestCertificateAuthority(directory / "ca")
        self.server = self.ca.issue("broker.test", server=True)
        self.alice = self.ca.issue("alice-cert")
        self.stranger_ca = TestCertificateAuthority(directory / "other", name="other-ca")
        self.stranger = self.stranger_ca.issue("mallory")
        self.wrong_host = self.ca.issue("other.test", server=True, hosts=("other.test",))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def _htpasswd(path: Path) -> Path:
    bcrypt_hash = bcrypt.hashpw(b"bcrypt-pass", bcrypt.gensalt(rounds=4)).decode()
    lines = [
        "# users of the test broker",
        "bob:$2y$" + bcrypt_hash[4:],
        f"carol:{apr_md5_crypt.hash('apr1-pass')}",
        f"dave:{des_crypt.hash('cryptpw')}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def secured_broker(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[BackgroundBroker]:
    data_dir = tmp_path_factory.mktemp("braid-secured")
    background = BackgroundBroker(
        data_dir,
        broker_service_port_tls=0,
        tls_certificate_file_path=pki.server.cert,
        tls_key_file_path=pki.server.key,
        tls_trust_certs_file_path=pki.ca.cert,
        authentication_enabled=True,
        authentication_providers=(tokens.CLASS_NAME, basic.CLASS_NAME, tls_auth.CLASS_NAME),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        basic_auth_conf=str(_htpasswd(data_dir / "htpasswd")),
        authentication_refresh_check_seconds=1,
    ).start()
    try:
        yield background
    finally:
        background.stop()


def _quiet() -> logging.Logger:
    logger = logging.getLogger("pulsar-security-test")
    logger.setLevel(logging.CRITICAL)
    return logger


def _tls_url(broker: BackgroundBroker, host: str = "localhost") -> str:
    return f"pulsar+ssl://{host}:{broker.service.tls_port}"


def _client(url: str, pki: Pki, **kwargs: object) -> pulsar.Client:
    options: dict[str, object] = {
        "operation_timeout_seconds": 5,
        "connection_timeout_ms": 3000,
        "logger": _quiet(),
    }
    if url.startswith("pulsar+ssl"):
        options["tls_trust_certs_file_path"] = str(pki.ca.cert)
        options["tls_validate_hostname"] = True
    options.update(kwargs)
    return pulsar.Client(url, **options)  # type: ignore[arg-type]


def _round_trip(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"secret hello")
    message = consumer.receive(timeout_millis=5000)
    assert message.data() == b"secret hello"
    consumer.acknowledge(message)


def _roles(broker: BackgroundBroker) -> set[str | None]:
    return broker.run(lambda: {c.auth_role for c in broker.service._connections})


#: What the official client raises when the broker refuses its CONNECT (see the docstring).
REFUSED = (pulsar.Timeout, pulsar.ConnectError, pulsar.AuthenticationError)


def _refused(url: str, pki: Pki, auth: pulsar.Authentication | None, topic: str) -> None:
    client = _client(url, pki, authentication=auth, operation_timeout_seconds=2)
    try:
        with pytest.raises(REFUSED):
            client.create_producer(topic)
    finally:
        client.close()


def _token(subject: str, **kwargs: object) -> str:
    return tokens.create_token(subject, secret_key=SECRET, **kwargs)  # type: ignore[arg-type]


def test_token_over_tls_with_hostname_verification_produces_and_consumes(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    client = _client(
        _tls_url(secured_broker), pki, authentication=pulsar.AuthenticationToken(_token("alice"))
    )
    try:
        _round_trip(client, "persistent://public/default/tls-token")
        assert "alice" in _roles(secured_broker)
    finally:
        client.close()


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.b.c",
        tokens.create_token("eve", secret_key=b"another secret, not the broker's one!"),
        tokens.create_token("eve", secret_key=SECRET, expires_at=time.time() - 10),
        "x" * (tokens.MAX_TOKEN_BYTES + 1),
    ],
    ids=["garbage", "three-dots", "wrong-secret", "expired", "oversize"],
)
def test_bad_tokens_are_refused(secured_broker: BackgroundBroker, pki: Pki, token: str) -> None:
    auth = pulsar.AuthenticationToken(token)
    _refused(secured_broker.service_url, pki, auth, "persistent://public/default/bad-token")
    assert not {"eve"} & _roles(secured_broker)


def test_no_credentials_are_refused_the_same_whether_or_not_the_topic_exists(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    good = _client(
        secured_broker.service_url, pki, authentication=pulsar.AuthenticationToken(_token("a"))
    )
    try:
        good.create_producer("persistent://public/default/exists").close()
    finally:
        good.close()
    for topic in ("persistent://public/default/exists", "persistent://public/default/never"):
        _refused(secured_broker.service_url, pki, None, topic)


@pytest.mark.parametrize(
    ("user", "password"), [("bob", "bcrypt-pass"), ("carol", "apr1-pass"), ("dave", "cryptpw")]
)
def test_basic_auth_accepts_every_htpasswd_hash_form(
    secured_broker: BackgroundBroker, pki: Pki, user: str, password: str
) -> None:
    client = _client(
        _tls_url(secured_broker), pki, authentication=pulsar.AuthenticationBasic(user, password)
    )
    try:
        _round_trip(client, f"persistent://public/default/basic-{user}")
        assert user in _roles(secured_broker)
    finally:
        client.close()


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bcrypt-pass")])
def test_basic_auth_with_a_bad_password_or_user_is_refused(
    secured_broker: BackgroundBroker, pki: Pki, user: str, password: str
) -> None:
    auth = pulsar.AuthenticationBasic(user, password)
    _refused(secured_broker.service_url, pki, auth, "persistent://public/default/basic-bad")


def test_mutual_tls_role_is_the_client_certificate_common_name(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    auth = pulsar.AuthenticationTLS(str(pki.alice.cert), str(pki.alice.key))
    client = _client(_tls_url(secured_broker), pki, authentication=auth)
    try:
        _round_trip(client, "persistent://public/default/mtls")
        assert "alice-cert" in _roles(secured_broker)
    finally:
        client.close()


def test_tls_auth_without_tls_is_refused(secured_broker: BackgroundBroker, pki: Pki) -> None:
    # The tls method on a plain connection: no certificate, so no role.
    auth = pulsar.AuthenticationTLS(str(pki.alice.cert), str(pki.alice.key))
    _refused(secured_broker.service_url, pki, auth, "persistent://public/default/mtls-plain")


def _cannot_connect(client: pulsar.Client) -> None:
    try:
        with pytest.raises(REFUSED):
            client.create_producer("persistent://public/default/untrusted")
    finally:
        client.close()


def test_a_client_that_does_not_trust_the_broker_ca_cannot_connect(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    auth = pulsar.AuthenticationToken(_token("alice"))
    _cannot_connect(
        _client(
            _tls_url(secured_broker),
            pki,
            authentication=auth,
            tls_trust_certs_file_path=str(pki.stranger_ca.cert),
            operation_timeout_seconds=2,
        )
    )


def test_a_client_certificate_from_an_unknown_ca_is_refused(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    auth = pulsar.AuthenticationTLS(str(pki.stranger.cert), str(pki.stranger.key))
    _cannot_connect(
        _client(_tls_url(secured_broker), pki, authentication=auth, operation_timeout_seconds=2)
    )


def test_expiring_token_is_refreshed_over_auth_challenge_and_the_connection_stays(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    # The official client re-reads the token from its supplier at each AUTH_CHALLENGE.
    issued: list[str] = []

    def supplier() -> str:
        issued.append(_token("refresher", expires_at=time.time() + 2))
        return issued[-1]

    client = _client(
        _tls_url(secured_broker), pki, authentication=pulsar.AuthenticationToken(supplier)
    )
    topic = "persistent://public/default/refresh"
    try:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "sub")
        first = len(issued)
        wait_for(lambda: len(issued) >= first + 2, within=15, message="two refreshes")
        producer.send(b"after refresh")
        assert consumer.receive(timeout_millis=5000).data() == b"after refresh"
        assert "refresher" in _roles(secured_broker)
    finally:
        client.close()


def test_hostname_verification_refuses_a_certificate_for_another_host(
    tmp_path: Path, pki: Pki
) -> None:
    broker = BackgroundBroker(
        tmp_path / "data",
        broker_service_port_tls=0,
        tls_certificate_file_path=pki.wrong_host.cert,
        tls_key_file_path=pki.wrong_host.key,
    ).start()
    try:
        _cannot_connect(_client(_tls_url(broker), pki, operation_timeout_seconds=2))
        # The same broker, hostname verification off: the chain is trusted, so it works.
        client = _client(_tls_url(broker), pki, tls_validate_hostname=False)
        try:
            _round_trip(client, "persistent://public/default/no-hostname-check")
        finally:
            client.close()
    finally:
        broker.stop()


def test_refused_connect_gets_pulsars_authentication_error_on_the_wire(
    secured_broker: BackgroundBroker,
) -> None:
    import socket

    from braid.protocol import FrameDecoder, commands, encode_command, pb

    port = int(secured_broker.service_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            encode_command(
                commands.connect("raw", 21, auth_method_name="token", auth_data=b"x.y.z")
            )
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk  # until the broker closes the connection
    [reply] = [frame.command for frame in FrameDecoder(1 << 20).feed(data)]
    assert reply.type == pb.BaseCommand.ERROR
    assert reply.error.error == pb.AuthenticationError
    assert reply.error.message == "Unable to authenticate"


def _hostile(port: int, payload: bytes, *, tls: bool, pki: Pki) -> None:
    """Send ``payload`` (over TLS when asked) and read until the broker closes or goes quiet."""
    import socket
    import ssl

    raw = socket.create_connection(("127.0.0.1", port), timeout=1)
    sock: socket.socket = raw
    try:
        if tls:
            context = ssl.create_default_context(cafile=str(pki.ca.cert))
            sock = context.wrap_socket(raw, server_hostname="localhost")
        sock.sendall(payload)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, OSError):
            pass
    except OSError:
        pass  # the broker may close before reading all of it
    finally:
        sock.close()


def test_auth_fuzz_leaves_authenticated_connections_unharmed(
    secured_broker: BackgroundBroker, pki: Pki
) -> None:
    import random

    from braid.protocol import commands, encode_command

    rng = random.Random(26)
    plain_port = int(secured_broker.service_url.rsplit(":", 1)[1])
    tls_port = secured_broker.service.tls_port
    assert tls_port is not None
    client = _client(
        _tls_url(secured_broker), pki, authentication=pulsar.AuthenticationToken(_token("steady"))
    )
    topic = "persistent://public/default/fuzz-bystander"
    try:
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)

        def connect(method: str, data: bytes) -> bytes:
            return encode_command(
                commands.connect("fuzz", 21, auth_method_name=method, auth_data=data)
            )

        payloads = [
            rng.randbytes(rng.randint(1, 4096)),  # not TLS at all on the TLS port
            b"\x16\x03\x01\x02\x00" + rng.randbytes(512),  # a broken ClientHello
            connect("token", rng.randbytes(100)),
            connect("token", b"eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0."),  # alg none
            connect("token", b"a" * 60_000),  # oversize token
            connect("basic", b"\xff\xfe:\x00"),
            connect("tls", b""),
            connect("\x00" * 200, b"x"),
            connect("token", _token("x").encode())[:-3],  # truncated frame
        ]
        for round_ in range(3):
            for i, payload in enumerate(payloads):
                _hostile(tls_port, payload, tls=i >= 2, pki=pki)
                _hostile(plain_port, payload, tls=False, pki=pki)
            producer.send(f"still here {round_}".encode())
            message = consumer.receive(timeout_millis=5000)
            assert message.data() == f"still here {round_}".encode()
            consumer.acknowledge(message)
        assert "steady" in _roles(secured_broker)
    finally:
        client.close()
