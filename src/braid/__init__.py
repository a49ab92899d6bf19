"""Braid: elastic, key-ordered messaging over the Apache Pulsar binary protocol.

A Braid topic is a *scalable topic*: a DAG of hash-range segments that split when hot and merge when
cold without breaking per-key order. See README.md and docs/ for the tour; the package map and the
layering rules are in docs/decisions/0003-package-layering.md.
"""

__version__ = "0.1.0"
