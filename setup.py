"""Builds Braid's one compiled module; everything else about the package is in pyproject.toml.

``braid.protocol._batch_walk`` is the broker's batch walk in C (ADR 0032). It is optional: where
it cannot be compiled (no C compiler or Python headers) the install still succeeds and
``braid.protocol.batch.check_batch`` walks in pure Python, with the same result.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "braid.protocol._batch_walk",
            sources=["src/braid/protocol/_batch_walk.c"],
            optional=True,
        )
    ]
)
