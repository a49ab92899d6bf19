"""Avro record schemas shared by the schema tests (unit, integration, conformance)."""

from __future__ import annotations

from typing import Any

READING: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "int"}],
}
#: READING plus an optional field: a reader of both versions (BACKWARD/FULL compatible).
READING_V2: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [
        *READING["fields"],
        {"name": "unit", "type": ["null", "string"], "default": None},
    ],
}
