"""Structured logging for the ``braid`` command: one line per event, ``key=value`` (logfmt).

Example::

    ts=2026-11-25T22:19:21.123Z level=INFO logger=braid.cli.standalone msg="broker ready" url=...

Values with spaces or quotes are quoted; a traceback is folded into one ``exc=`` field so a log
line is always one event (greppable, and parseable by logfmt tools). Fields passed through
``extra={"fields": {...}}`` are appended as ``key=value``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _quote(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\n\t\\'):
        return text
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    )
    return '"' + escaped + '"'


class LogfmtFormatter(logging.Formatter):
    """Formats a record as one logfmt line."""

    def format(self, record: logging.LogRecord) -> str:
        millis = int(record.msecs)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [
            f"ts={stamp}.{millis:03d}Z",
            f"level={record.levelname}",
            f"logger={record.name}",
            f"msg={_quote(record.getMessage())}",
        ]
        fields: Any = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            parts.extend(f"{k}={_quote(v)}" for k, v in fields.items())
        if record.exc_info:
            parts.append(f"exc={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) as logfmt at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's per-request chatter is noise next to the broker's own events.
    logging.getLogger("uvicorn.error").setLevel(max(logging.WARNING, root.level))
