"""Braid's admin REST API (FastAPI): tenants, namespaces, topics, health; served in the broker's
event loop by :class:`~braid.admin.server.AdminServer`."""

from braid.admin.app import TopicAdmin, create_app
from braid.admin.server import AdminServer, AdminServerError

__all__ = ["AdminServer", "AdminServerError", "TopicAdmin", "create_app"]
