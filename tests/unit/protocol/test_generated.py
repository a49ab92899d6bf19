"""The checked-in generated code is what `make proto` produces from the checked-in schema."""

from __future__ import annotations

import pytest

from braid.protocol import pb
from tools import regenerate_protocol as regenerate


def test_generated_module_is_importable_from_the_package() -> None:
    from braid.protocol.generated import PulsarApi_pb2

    assert PulsarApi_pb2 is pb
    assert pb.DESCRIPTOR.package == "pulsar.proto"


def test_checked_in_generated_files_are_up_to_date() -> None:
    try:
        fresh = regenerate.generate()
    except regenerate.RegenerationError as exc:  # pragma: no cover - dev extra missing
        pytest.skip(str(exc))
    assert {path.name for path in fresh} == {
        "PulsarApi_pb2.py",
        "PulsarApi_pb2.pyi",
        "BookieProtocol_pb2.py",
        "BookieProtocol_pb2.pyi",
    }
    for path, content in fresh.items():
        checked_in = path.read_bytes()
        assert checked_in == content, f"{path} is stale: run `make proto`"
