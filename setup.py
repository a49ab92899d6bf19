"""Builds Braid's compiled modules; everything else about the package is in pyproject.toml.

``braid.protocol._batch_walk`` is the broker's batch walk in C (ADR 0032);
``braid.client._entry_columns`` decodes batch payloads into column lists for the client's
columnar read path (ADR 0041). Both are optional: where they cannot be compiled (no C compiler
or Python headers) the install still succeeds and the pure-Python code does the same work, with
the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "braid.protocol._batch_walk",
            sources=["src/braid/protocol/_batch_walk.c"],
            optional=True,
        ),
        Extension(
            "braid.client._entry_columns",
            sources=["src/braid/client/_entry_columns.c"],
            optional=True,
        ),
    ]
)
