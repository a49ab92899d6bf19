"""``AuthenticationProviderTls``: the role is the common name of the client's certificate.

The certificate was verified by the TLS handshake against ``tlsTrustCertsFilePath`` (the broker
requests one whenever this provider is configured); this provider only reads who it names. A
connection without a verified client certificate does not authenticate by this method.
"""

from __future__ import annotations

from braid.security.api import AuthenticationFailed, Credentials, Identity

CLASS_NAME = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"


class TlsAuthenticationProvider:
    """The ``tls`` method: role = the verified client certificate's CN."""

    class_name = CLASS_NAME
    method = "tls"

    def authenticate(self, credentials: Credentials, now: float) -> Identity:
        if not credentials.peer_common_name:
            raise AuthenticationFailed("no verified client certificate with a common name")
        return Identity(credentials.peer_common_name, self.method)


__all__ = ["CLASS_NAME", "TlsAuthenticationProvider"]
