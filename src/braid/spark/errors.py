"""Errors of the Spark connector, in Braid's error hierarchy (root ``braid.BraidError``).

Option errors are :class:`braid.spark.options.BraidSparkOptionError` (an ``InvalidInputError``);
everything the client raises keeps its own typed error.
"""

from __future__ import annotations

from braid.core.errors import IllegalStateError


class BraidDataLossError(IllegalStateError):
    """Data the query still needed is gone (deleted by retention before it was read).

    Raised with ``failOnDataLoss=true`` (the default); with ``false`` the connector logs a
    warning and continues after the gap.
    """


class DeduplicationDisabledError(IllegalStateError):
    """The sink was asked for exactly-once writes, but broker deduplication is off for the
    topic's namespace."""


__all__ = ["BraidDataLossError", "DeduplicationDisabledError"]
