"""What some clients cannot take, told apart by the version string of their CONNECT.

The official C++ client (which the PyPI ``pulsar-client`` wraps) reacts to two commands by
closing its whole connection, which would lose the receipts in flight of its other producers and
consumers. The broker asks here before sending them, and takes the gentler path Pulsar's own
clients cope with. Every answer is a pure function of the version string.
"""

from __future__ import annotations

import re

_CPP_CLIENT_VERSION = re.compile(r"Pulsar-CPP-v(\d+)\.(\d+)")


def client_handles_end_of_topic(client_version: str) -> bool:
    """Whether REACHED_END_OF_TOPIC may be sent to this client.

    The official C++ client up to 4.2 closes the whole connection when it receives the command,
    so it is withheld from those versions.
    """
    match = _CPP_CLIENT_VERSION.search(client_version)
    if match is None:
        return True
    return (int(match.group(1)), int(match.group(2))) > (4, 2)


def client_drops_connection_on_send_error(client_version: str) -> bool:
    """Whether the client closes its whole connection on a SEND_ERROR other than a checksum one:
    the official C++ client does (every version, ``Pulsar-CPP-v...``), losing the receipts in
    flight of its other producers. Its producer is closed instead (:mod:`braid.broker.producer`)."""
    return "Pulsar-CPP-v" in client_version


__all__ = ["client_drops_connection_on_send_error", "client_handles_end_of_topic"]
