"""The schema registry: topic-level schemas stored in ledgers, with compatibility checks.

* :mod:`~braid.broker.schemas.model` - schema types, data, versions, strategies, schema ids;
* :mod:`~braid.broker.schemas.compatibility` - the strategies' rules (Avro field by field);
* :mod:`~braid.broker.schemas.storage` - one ledger per version, a locator node per schema id;
* :mod:`~braid.broker.schemas.registry` - versions per schema id, adds and deletes;
* :mod:`~braid.broker.schemas.topic_schemas` - what PRODUCER/SUBSCRIBE do with a schema;
* :mod:`~braid.broker.schemas.commands` - the GET_SCHEMA / GET_OR_CREATE_SCHEMA command family.

Design: ``docs/decisions/0015-schema-registry.md``.
"""
