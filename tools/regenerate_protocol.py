"""Regenerate ``braid.protocol.generated`` from ``protocol/proto/PulsarApi.proto`` (``make proto``).

A build tool, kept out of the pure, I/O-free ``braid.protocol`` package: it runs ``protoc`` (bundled
with the ``grpcio-tools`` dev dependency) with the Python generator and mypy-protobuf's
``protoc-gen-mypy`` plugin, then writes ``PulsarApi_pb2.py`` and ``PulsarApi_pb2.pyi`` into
``src/braid/protocol/generated/``. The output depends only on the ``.proto`` and the tool versions,
so re-running it leaves the files byte-identical; a unit test regenerates into a temporary directory
and compares, so a stale checked-in file is caught.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "src" / "braid" / "protocol"
PROTO_DIR = PACKAGE_DIR / "proto"
PROTO_NAME = "PulsarApi.proto"
GENERATED_DIR = PACKAGE_DIR / "generated"
OUTPUT_NAMES = ("PulsarApi_pb2.py", "PulsarApi_pb2.pyi")


class RegenerationError(RuntimeError):
    """protoc or its mypy plugin is missing or failed."""


def _mypy_plugin() -> Path:
    """Locate ``protoc-gen-mypy``: next to the running interpreter first (a venv), then PATH."""
    beside = Path(sys.executable).parent / "protoc-gen-mypy"
    if beside.exists():
        return beside
    found = shutil.which("protoc-gen-mypy")
    if found is None:
        raise RegenerationError("protoc-gen-mypy not found: install the dev extra (mypy-protobuf)")
    return Path(found)


def generate() -> dict[str, bytes]:
    """Run protoc on the schema and return the generated files by name.

    Raises:
        RegenerationError: grpcio-tools or mypy-protobuf is missing, or protoc rejected the schema.
    """
    try:
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - only without the dev extra
        raise RegenerationError("grpcio-tools is not installed: install the dev extra") from exc
    plugin = _mypy_plugin()
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"--proto_path={PROTO_DIR}",
            f"--plugin=protoc-gen-mypy={plugin}",
            f"--python_out={tmp}",
            f"--mypy_out={tmp}",
            str(PROTO_DIR / PROTO_NAME),
        ]
        status = protoc.main(args)
        if status != 0:
            raise RegenerationError(f"protoc failed with status {status}")
        return {name: (Path(tmp) / name).read_bytes() for name in OUTPUT_NAMES}


def main() -> int:
    """Write the generated files into ``generated/`` and report which changed."""
    outputs = generate()
    GENERATED_DIR.mkdir(exist_ok=True)
    for name, content in outputs.items():
        target = GENERATED_DIR / name
        changed = not target.exists() or target.read_bytes() != content
        target.write_bytes(content)
        print(f"{'updated' if changed else 'unchanged'}: {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
