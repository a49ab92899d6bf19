"""``braid.__all__`` is exactly the public surface (as httpx checks its own), and the names the
client issue fixes as a contract exist with their documented shapes."""

from __future__ import annotations

import dataclasses
import inspect
import types

import braid

CONTRACT = {
    "Client",
    "AsyncClient",
    "Message",
    "MessageId",
    "Checkpoint",
    "BraidError",
    "NotFoundError",
    "AuthorizationError",
    "TimeoutError",
    "AlreadyClosedError",
    "ProducerBusyError",
    "ConsumerBusyError",
    "IncompatibleSchemaError",
    "TopicTerminatedError",
}


def test_all_is_the_public_surface() -> None:
    # dir(), not vars(): the public names load on first use (PEP 562, braid/__init__.py)
    public = {
        name
        for name in dir(braid)
        if not name.startswith("_") and not isinstance(getattr(braid, name), types.ModuleType)
    }
    assert public == set(braid.__all__) - {"__version__"}
    assert len(set(braid.__all__)) == len(braid.__all__)


def test_contract_names_exist() -> None:
    assert set(braid.__all__) >= CONTRACT


def test_every_error_derives_from_the_root_and_has_a_retriable_flag() -> None:
    errors = [getattr(braid, n) for n in braid.__all__ if n.endswith("Error")]
    assert errors
    for error in errors:
        assert issubclass(error, braid.BraidError), error
        assert isinstance(error.retriable, bool)
    assert braid.TimeoutError.retriable and not braid.NotFoundError.retriable
    assert issubclass(braid.TimeoutError, TimeoutError)  # also the builtin category
    assert issubclass(braid.ProducerFencedError, braid.ProducerBusyError)


def test_documented_signatures() -> None:
    create = inspect.signature(braid.AsyncClient.create_producer).parameters
    assert list(create)[:7] == [
        "self",
        "topic",
        "producer_name",
        "access_mode",
        "batching",
        "compression",
        "send_timeout",
    ]
    assert create["access_mode"].default == "shared" and create["send_timeout"].default == 30.0
    send = inspect.signature(braid.Producer.send).parameters
    assert list(send) == [
        "self",
        "value",
        "key",
        "properties",
        "event_time",
        "sequence_id",
        "deliver_after",  # keyword-only: delayed delivery
        "deliver_at",
        "txn",  # keyword-only: a transaction
    ]
    assert send["deliver_after"].kind is inspect.Parameter.KEYWORD_ONLY
    assert send["txn"].kind is inspect.Parameter.KEYWORD_ONLY and send["txn"].default is None
    for client in (braid.Client, braid.AsyncClient):
        assert inspect.signature(client.new_transaction).parameters["timeout"].default == 60.0
    for cls, ack in (
        (braid.StreamConsumer, "acknowledge_cumulative"),
        (braid.AsyncStreamConsumer, "acknowledge_cumulative"),
        (braid.QueueConsumer, "acknowledge"),
        (braid.AsyncQueueConsumer, "acknowledge"),
    ):
        assert inspect.signature(getattr(cls, ack)).parameters["txn"].default is None
    for cls in (braid.Transaction, braid.AsyncTransaction):
        assert {"commit", "abort", "state"} <= set(dir(cls))
    queue = inspect.signature(braid.AsyncClient.subscribe_queue).parameters
    assert {"ack_timeout", "dead_letter_policy", "retry_enable"} <= set(queue)
    assert "reconsume_later" in dir(braid.QueueConsumer)
    assert [f.name for f in dataclasses.fields(braid.DeadLetterPolicy)] == [
        "max_redeliver_count",
        "dead_letter_topic",
        "initial_subscription_name",
        "retry_letter_topic",
    ]
    for name in ("subscribe_stream", "subscribe_queue"):
        params = inspect.signature(getattr(braid.AsyncClient, name)).parameters
        assert list(params)[1:5] == ["topic", "subscription", "consumer_name", "initial_position"]
        assert params["initial_position"].default == "latest"
    ckpt = inspect.signature(braid.AsyncClient.create_checkpoint_consumer).parameters
    assert list(ckpt)[1:4] == ["topic", "start", "group"]
    receive = inspect.signature(braid.StreamConsumer.receive).parameters
    assert receive["timeout"].default is None
    assert "receive_many" in dir(braid.QueueConsumer) and "send_many" in dir(braid.Producer)
    for cls in (braid.StreamConsumer, braid.AsyncStreamConsumer):
        assert hasattr(cls, "acknowledge_cumulative") and not hasattr(cls, "acknowledge")
    for cls in (braid.QueueConsumer, braid.AsyncQueueConsumer):
        assert hasattr(cls, "acknowledge") and hasattr(cls, "negative_acknowledge")
    for cls in (braid.CheckpointConsumer, braid.AsyncCheckpointConsumer):
        assert hasattr(cls, "checkpoint")
    for name in (
        "create_producer",
        "subscribe_stream",
        "subscribe_queue",
        "create_checkpoint_consumer",
    ):
        schema = inspect.signature(getattr(braid.AsyncClient, name)).parameters["schema"]
        assert schema.default is None and schema.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert isinstance(braid.Schema.STRING, braid.Schema)


def test_message_exposes_the_data_model_fields() -> None:
    fields = {
        "value",
        "data",
        "key",
        "properties",
        "message_id",
        "publish_time",
        "event_time",
        "sequence_id",
        "producer_name",
        "topic",
        "redelivery_count",
        "size",
        "schema_version",
    }
    assert fields <= {n for n, v in vars(braid.Message).items() if isinstance(v, property)}


def test_the_client_imports_only_core_protocol_and_support_modules() -> None:
    # braid.security is a support package (ADR 0049): TLS contexts shared with the broker;
    # braid.event_loop a support module (ADR 0078): the loop the blocking client runs.
    import ast
    import pathlib

    root = pathlib.Path(braid.__file__).parent / "client"
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("braid"):
                top = node.module.split(".")[1] if "." in node.module else ""
                allowed = {"client", "core", "protocol", "security", "event_loop"}
                assert top in allowed, f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("braid.") or alias.name.split(".")[1] in {
                        "client",
                        "core",
                        "protocol",
                        "security",
                        "event_loop",
                    }, f"{path.name} imports {alias.name}"
