"""Fuzz every operation of ``/openapi.json`` on a real ``braid standalone``: no request, valid or
not, may get a 5xx.

Schemathesis generates requests from the OpenAPI document, both conforming (positive) and
violating it (negative). Purely random names would almost always stop at "tenant does not
exist", so path parameters are drawn half the time from names that exist (a seeded tenant,
namespaces, scalable topics with subscriptions, segment ids and descriptors of their DAGs) and the
fuzzer reaches the controller: splits at random hashes, merges of random id lists, seeks,
subscription types, segment creation and termination, deletes.

Bounded: a fixed number of examples per operation (~170 operations take about two minutes on a
quiet machine, more on a loaded one: the test has its own timeout, well above the suite's default
- pytest-timeout's alarm raised inside a Hypothesis example surfaces as a FlakyFailure or
FlakyStrategyDefinition on whichever operation was running, not as a timeout), no
shrinking (the first failing request is reported as is, with its curl command), and
``numInitialSegments`` of generated creates is kept small — creating thousands of segment topics
is slow, not wrong, and the REST layer's limits on it are pinned by
``test_create_rejects_out_of_range_segment_counts``.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode

from braid.admin.client import AdminClient, AdminInvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.names import format_descriptor
from tests.support.standalone import StandaloneProcess

POSITIVE_EXAMPLES = 30
NEGATIVE_EXAMPLES = 10
MAX_GENERATED_SEGMENTS = 16

_SEEDED_NAMESPACES = ("public/default", "acme/fuzz")
_SEEDED_TOPICS = {"fz-a": 1, "fz-b": 3, "fz-c": 8}
#: Existing (tenant, namespace) pairs, and (tenant, namespace, topic) triples.
_NAMESPACES = [tuple(ns.split("/")) for ns in (*_SEEDED_NAMESPACES, "public/fuzz", "acme/default")]
_TOPICS = [
    (*ns.split("/"), topic) for ns in _SEEDED_NAMESPACES for topic in [*_SEEDED_TOPICS, "events"]
]
_SEGMENT_IDS = st.integers(0, 9)
#: Known values of the other path parameters.
_KNOWN: dict[str, st.SearchStrategy[Any]] = {
    "tenant": st.sampled_from(["public", "acme"]),
    "subscription": st.sampled_from(["billing", "audit", "ckpt"]),
    "segment_id": _SEGMENT_IDS,
    "segment_id1": _SEGMENT_IDS,
    "segment_id2": _SEGMENT_IDS,
    # The seeded layouts' segments (and their first split's children).
    "descriptor": st.sampled_from(
        sorted(
            {
                format_descriptor(segment.hash_range, segment.segment_id)
                for count in (*_SEEDED_TOPICS.values(), 2)
                for segment in SegmentLayout.initial(count).segments.values()
            }
        )
    ),
}
#: Ids of hash-adjacent segments in the seeded layouts: runs of consecutive ids.
_ADJACENT_IDS = st.integers(0, 6).flatmap(
    lambda first: st.integers(2, 4).map(lambda n: list(range(first, first + n)))
)


@pytest.fixture(scope="module")
def standalone_subprocess(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StandaloneProcess]:
    """The module's ``braid standalone``, with ``transactionCoordinatorEnabled=true`` so the
    ``/admin/v3/transactions`` routes are fuzzed past their 503 "not enabled" answer."""
    root = tmp_path_factory.mktemp("standalone")
    process = StandaloneProcess.start_on_free_ports(
        root / "data",
        log_path=root / "standalone.log",
        env={**os.environ, "BRAID_transactionCoordinatorEnabled": "true"},
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


@pytest.fixture(scope="module")
def seeded(standalone_subprocess: StandaloneProcess) -> Iterator[str]:
    """The standalone with things to find: a tenant, namespaces, topics, subscriptions."""
    with AdminClient(standalone_subprocess.web_url) as admin:
        admin.tenants.create("acme")
        for namespace in ("acme/fuzz", "public/fuzz", "acme/default"):
            admin.namespaces.create(namespace)
        for namespace in _SEEDED_NAMESPACES:
            for name, segments in _SEEDED_TOPICS.items():
                topic = f"topic://{namespace}/{name}"
                admin.scalable_topics.create(topic, segments=segments)
                admin.scalable_topics.create_subscription(topic, "billing")
                admin.scalable_topics.create_subscription(
                    topic, "audit", subscription_type="QUEUE", initial_position="Earliest"
                )
            admin.topics.create(f"persistent://{namespace}/events")
    yield standalone_subprocess.web_url


def _path_parameters(params: dict[str, Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """Three times in four, names that exist (a whole existing tenant/namespace/topic, known
    subscriptions, segment ids — adjacent pairs for a merge — and descriptors); otherwise what
    schemathesis generated."""
    if not params:
        return st.just(params or {})
    known = st.fixed_dictionaries(
        {k: _KNOWN[k] if k in _KNOWN else st.just(v) for k, v in params.items()}
    )
    if "topic" in params and "namespace" in params:
        places = st.sampled_from(_TOPICS).map(
            lambda t: {"tenant": t[0], "namespace": t[1], "topic": t[2]}
        )
    elif "namespace" in params:
        places = st.sampled_from(_NAMESPACES).map(lambda t: {"tenant": t[0], "namespace": t[1]})
    else:
        places = st.just({})
    if "segment_id2" in params:
        places = st.tuples(places, _ADJACENT_IDS).map(
            lambda pair: {**pair[0], "segment_id1": pair[1][0], "segment_id2": pair[1][1]}
        )
    realistic = st.tuples(known, places).map(lambda pair: {**pair[0], **pair[1]})
    # Hypothesis favours the first branch of one_of: put the realistic one there.
    return st.one_of(realistic, realistic, realistic, st.just(params))


def _realistic(case: Case, params: dict[str, Any], segment_ids: list[int] | None) -> Case:
    if params:
        case.path_parameters = params
    body = case.body
    path = case.operation.path
    if not isinstance(body, dict):
        return case
    if path.endswith("/{topic}") and path.startswith("/admin/v2/scalable/"):
        count = body.get("numInitialSegments")
        if isinstance(count, int) and count > MAX_GENERATED_SEGMENTS:
            case.body = {**body, "numInitialSegments": count % MAX_GENERATED_SEGMENTS + 1}
    elif path.endswith("/merge") and segment_ids is not None:
        case.body = {**body, "segmentIds": segment_ids}
    return case


def _cases(operation: Any, mode: GenerationMode) -> st.SearchStrategy[Case]:
    strategy: st.SearchStrategy[Case] = operation.as_strategy(generation_mode=mode)
    # Merges of adjacent ids that exist (two to four of them), three times in four.
    segment_ids = st.one_of(_ADJACENT_IDS, _ADJACENT_IDS, _ADJACENT_IDS, st.none())
    return strategy.flatmap(
        lambda case: st.tuples(_path_parameters(case.path_parameters), segment_ids).map(
            lambda drawn: _realistic(case, *drawn)
        )
    )


def _describe(exc: BaseException) -> str:
    """The exception with what it wraps: a FlakyFailure (a 5xx on the first call only) is an
    exception group whose members carry the response and the curl command."""
    text = f"{type(exc).__name__}: {exc}"
    for inner in getattr(exc, "exceptions", ()):
        text += f"\n    {_describe(inner)}"
    if exc.__cause__ is not None:
        text += "\n    caused by " + "".join(traceback.format_exception(exc.__cause__))
    return text


def _can_violate_its_schema(operation: Any) -> bool:
    """Whether a negative case exists: a body, or a parameter that is not a plain string."""
    raw = operation.definition.raw
    if "requestBody" in raw:
        return True
    return any(p.get("schema", {}).get("type") != "string" for p in raw.get("parameters", []))


@pytest.mark.timeout(900)
def test_no_request_gets_a_server_error(seeded: str) -> None:
    schema = schemathesis.openapi.from_url(f"{seeded}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    # Deletes last, so the other operations find the seeded topics.
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")
    assert len(operations) >= 30  # every router is mounted
    failures: list[str] = []
    #: Every failing request as it happened: a replay that behaves differently (Hypothesis's
    #: FlakyFailure) would otherwise hide what the server answered the first time.
    first_seen: list[str] = []
    counts = {"requests": 0}

    for operation in operations:
        modes = [(GenerationMode.POSITIVE, POSITIVE_EXAMPLES)]
        if _can_violate_its_schema(operation):
            modes.append((GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES))
        for mode, examples in modes:

            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=_cases(operation, mode))
            def fuzz(case: Case) -> None:
                try:
                    response = case.call(base_url=seeded, timeout=30)
                except Exception as exc:
                    first_seen.append(f"{case.as_curl_command()}: {type(exc).__name__}: {exc}")
                    raise
                counts["requests"] += 1
                if response.status_code >= 500:
                    first_seen.append(
                        f"{case.operation.method.upper()} {case.operation.path} -> "
                        f"{response.status_code}: {response.text[:500]}\n"
                        f"  reproduce: {case.as_curl_command()}"
                    )
                    raise AssertionError(first_seen[-1])

            try:
                fuzz()
            except AssertionError as exc:
                failures.append(str(exc))
            except Unsatisfiable:
                # The body's schema accepts anything (e.g. deduplication's true/false, checked
                # by the handler): no negative case exists.
                if mode is not GenerationMode.NEGATIVE:
                    raise
            except Exception as exc:  # a generation problem is a failure too, not a skip
                failures.append(f"{operation.label} ({mode.value}): {_describe(exc)}")

    assert not failures, (
        f"{len(failures)} operation(s) answered 5xx:\n\n"
        + "\n\n".join(failures)
        + "\n\nas first seen:\n"
        + "\n".join(first_seen)
    )
    assert counts["requests"] >= len(operations) * 5, counts


def test_create_rejects_out_of_range_segment_counts(seeded: str) -> None:
    with AdminClient(seeded) as admin:
        for bad in (0, 65537):
            with pytest.raises(AdminInvalidInputError, match="numInitialSegments"):
                admin._http.call(
                    "PUT",
                    "/admin/v2/scalable/public/default/too-many",
                    body={"numInitialSegments": bad},
                )
