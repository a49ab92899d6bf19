"""The ``braid`` command: ``braid standalone`` (a whole Braid in one process) and ``braid demo``."""
