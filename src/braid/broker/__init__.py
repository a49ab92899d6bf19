"""The broker: serves the Pulsar binary protocol over Braid's managed ledgers.

Entry point: :class:`braid.broker.service.BrokerService` (server, connections, topic registry).
Around it: ``connection`` (asyncio adapter over the sans-I/O protocol machine), ``registry``
(which command family serves which command: the seam where upper layers add commands),
``handlers`` (the topic commands' per-connection session, owner of the producers and consumers),
``topic``/``producer``/``dedup`` (publishing), ``subscription``/``dispatcher``/``consumer``
(delivery), ``errors`` (refusals and their ``ServerError`` codes), and the shell's ``config`` and
``resources``. See docs/broker.md and docs/decisions/0013-broker.md.
"""
