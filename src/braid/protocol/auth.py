"""The authentication exchange after CONNECT: ``AUTH_CHALLENGE`` and ``AUTH_RESPONSE``.

A broker sends ``AUTH_CHALLENGE`` to ask a connected client for fresh credentials of its method
(Pulsar sends the marker :data:`REFRESH_AUTH_DATA` when a token expires); the client answers
``AUTH_RESPONSE`` with them. The CONNECT's own credentials are in
:func:`braid.protocol.commands.connect`.
"""

from __future__ import annotations

from braid.protocol.commands import wrap
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The challenge data a broker sends to ask for fresh credentials (Pulsar's
#: ``AuthData.REFRESH_AUTH_DATA``).
REFRESH_AUTH_DATA = b"PulsarAuthRefresh"


def auth_challenge(
    server_version: str, protocol_version: int, method: str, data: bytes = REFRESH_AUTH_DATA
) -> pb.BaseCommand:
    """AUTH_CHALLENGE: the broker asks for (fresh) credentials of ``method``."""
    return wrap(
        pb.CommandAuthChallenge(
            server_version=server_version,
            protocol_version=protocol_version,
            challenge=pb.AuthData(auth_method_name=method, auth_data=data),
        )
    )


def auth_response(
    client_version: str, protocol_version: int, method: str, data: bytes
) -> pb.BaseCommand:
    """AUTH_RESPONSE: the client's answer to AUTH_CHALLENGE."""
    return wrap(
        pb.CommandAuthResponse(
            client_version=client_version,
            protocol_version=protocol_version,
            response=pb.AuthData(auth_method_name=method, auth_data=data),
        )
    )


__all__ = ["REFRESH_AUTH_DATA", "auth_challenge", "auth_response"]
