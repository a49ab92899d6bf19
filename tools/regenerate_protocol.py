"""Regenerate the protobuf code of Braid's wire protocols (``make proto``).

Two schemas, each with its generated package beside it:

* ``protocol/proto/PulsarApi.proto`` -> ``braid.protocol.generated`` (the Pulsar binary protocol);
* ``storage/bookie/proto/BookieProtocol.proto`` -> ``braid.storage.bookie.generated`` (the bookie
  wire protocol, ADR 0033).

A build tool, kept out of the pure, I/O-free protocol packages: it runs ``protoc`` (bundled with
the ``grpcio-tools`` dev dependency) with the Python generator and mypy-protobuf's
``protoc-gen-mypy`` plugin, then writes ``<Name>_pb2.py`` and ``<Name>_pb2.pyi`` into the schema's
``generated/`` directory. The output depends only on the ``.proto`` and the tool versions, so
re-running it leaves the files byte-identical; a unit test regenerates into a temporary directory
and compares, so a stale checked-in file is caught.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SRC_DIR = Path(__file__).resolve().parent.parent / "src" / "braid"


@dataclass(frozen=True)
class Schema:
    """One ``.proto`` file and the package its generated code goes to."""

    package_dir: Path
    name: str  # without ``.proto``

    @property
    def proto_dir(self) -> Path:
        return self.package_dir / "proto"

    @property
    def generated_dir(self) -> Path:
        return self.package_dir / "generated"

    @property
    def output_names(self) -> tuple[str, str]:
        return (f"{self.name}_pb2.py", f"{self.name}_pb2.pyi")


SCHEMAS = (
    Schema(SRC_DIR / "protocol", "PulsarApi"),
    Schema(SRC_DIR / "storage" / "bookie", "BookieProtocol"),
)


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


def generate() -> dict[Path, bytes]:
    """Run protoc on every schema and return the generated files by their checked-in path.

    Raises:
        RegenerationError: grpcio-tools or mypy-protobuf is missing, or protoc rejected the schema.
    """
    try:
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - only without the dev extra
        raise RegenerationError("grpcio-tools is not installed: install the dev extra") from exc
    plugin = _mypy_plugin()
    out: dict[Path, bytes] = {}
    for schema in SCHEMAS:
        with tempfile.TemporaryDirectory() as tmp:
            args = [
                "protoc",
                f"--proto_path={schema.proto_dir}",
                f"--plugin=protoc-gen-mypy={plugin}",
                f"--python_out={tmp}",
                f"--mypy_out={tmp}",
                str(schema.proto_dir / f"{schema.name}.proto"),
            ]
            status = protoc.main(args)
            if status != 0:
                raise RegenerationError(f"protoc failed on {schema.name} with status {status}")
            for name in schema.output_names:
                out[schema.generated_dir / name] = (Path(tmp) / name).read_bytes()
    return out


def main() -> int:
    """Write the generated files into ``generated/`` and report which changed."""
    outputs = generate()
    for target, content in outputs.items():
        target.parent.mkdir(exist_ok=True)
        changed = not target.exists() or target.read_bytes() != content
        target.write_bytes(content)
        print(f"{'updated' if changed else 'unchanged'}: {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
