"""The admin REST API of a :class:`~tests.support.broker_stack.BackgroundBroker`, served on the
broker's own loop on an ephemeral 127.0.0.1 port (what ``braid standalone`` serves on its web
port), for tests that drive a broker through REST while a client talks to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from braid.admin.app import create_app
from braid.admin.server import AdminServer

if TYPE_CHECKING:
    from braid.scalable.service import ScalableTopicService
    from tests.support.broker_stack import BackgroundBroker


@contextmanager
def serve_admin(
    broker: BackgroundBroker, scalable: ScalableTopicService | None = None
) -> Iterator[str]:
    """Serve the admin API for the life of the block; yields its base URL."""
    stack = broker.stack
    app = create_app(
        stack.config,
        stack.resources,
        stack.service,
        scalable,
        authentication=stack.service.authentication,
        authorization=stack.service.authorization,
    )
    server = AdminServer(app, "127.0.0.1", 0)
    broker.call(server.start())
    try:
        yield server.url
    finally:
        broker.call(server.stop())
