"""Scalable topics at runtime (PIP-468): controller, coordinators, DAG watch, service.

:func:`~braid.scalable.install.install_scalable_topics` plugs the layer into a running broker;
see ADR 0020 and ADR 0021 for the design.
"""
