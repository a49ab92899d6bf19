"""The admin API's name path parameters, typed with the one naming rule of :mod:`braid.core.names`.

Every route takes ``{tenant}``, ``{namespace}`` and ``{topic}`` as :data:`Tenant`,
:data:`Namespace` and :data:`LocalTopicName`, so the OpenAPI document states the rule (``pattern``
and ``maxLength``, from the same constants the code checks with) and a name breaking it is refused
before any handler runs. The refusal is Pulsar's 412 with the rule's own message
(:func:`name_refusal`), the same answer as a name the handler itself refuses: the schema pattern
is the rule's character class, while ``.``/``..`` and the Unicode categories a local name may not
contain are checked by :mod:`braid.core.names` (a pattern cannot say them without look-arounds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from fastapi import Path

from braid.core.names import (
    LOCAL_NAME_PATTERN,
    MAX_LOCAL_NAME_LENGTH,
    MAX_NAMESPACE_LENGTH,
    MAX_TENANT_LENGTH,
    NAMESPACE_PART_PATTERN,
    InvalidTopicName,
    check_local_name,
    check_namespace,
    check_tenant,
)

Tenant = Annotated[
    str,
    Path(
        pattern=NAMESPACE_PART_PATTERN,
        max_length=MAX_TENANT_LENGTH,
        description="Tenant name: ASCII letters, digits and _ - = : . (not '.' or '..').",
    ),
]
Namespace = Annotated[
    str,
    Path(
        pattern=NAMESPACE_PART_PATTERN,
        max_length=MAX_NAMESPACE_LENGTH,
        description="Namespace name: ASCII letters, digits and _ - = : . (not '.' or '..').",
    ),
]
LocalTopicName = Annotated[
    str,
    Path(
        pattern=LOCAL_NAME_PATTERN,
        max_length=MAX_LOCAL_NAME_LENGTH,
        description="Topic name within its namespace: no '/', whitespace or control characters "
        "(not '.' or '..').",
    ),
]

#: The checks behind each name parameter, by parameter name.
NAME_CHECKS: Mapping[str, Callable[[object], str]] = {
    "tenant": check_tenant,
    "namespace": check_namespace,
    "topic": check_local_name,
}


def name_refusal(errors: Sequence[Mapping[str, Any]]) -> str | None:
    """The rule's message when every validation error is a name path parameter breaking it, else
    ``None`` (the errors are about something else: a body, a query parameter)."""
    reasons: list[str] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if len(loc) != 2 or loc[0] != "path" or loc[1] not in NAME_CHECKS:
            return None
        try:
            NAME_CHECKS[loc[1]](error.get("input"))
        except InvalidTopicName as exc:
            reasons.append(str(exc))
        else:  # only the schema refused it: say what the schema says
            reasons.append(f"{loc[1]}: {error.get('msg', 'invalid')}")
    return "; ".join(reasons) or None


__all__ = ["NAME_CHECKS", "LocalTopicName", "Namespace", "Tenant", "name_refusal"]
