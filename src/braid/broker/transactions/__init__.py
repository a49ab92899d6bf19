"""Pulsar's transactions on the broker (ADRs 0064, 0065, 0070).

* :mod:`.ids` - the transaction id (``mostBits`` = coordinator id, ``leastBits`` = its sequence).
* :mod:`.coordinator` - the transaction coordinator (TC): one per partition of
  ``persistent://pulsar/system/transaction_coordinator_assign``, its transactions CAS'd in the
  metadata store, timeouts on the injected clock, recovery after a restart.
* :mod:`.buffer` - a persistent topic's transaction buffer: transactional entries are stored in the
  topic's ledger like any other, commit/abort markers after them; consumers read only up to the
  *max read position* (just before the first entry of the oldest open transaction) and never see
  an aborted transaction's entries or a marker.
* :mod:`.pending_ack` - a subscription's pending acknowledgements: an ack inside a transaction is
  held (persisted, never redelivered, refused to other transactions) until the transaction ends.
* :mod:`.commands` - the binary-protocol commands (TC_CLIENT_CONNECT, NEW_TXN, ADD_*, END_TXN*,
  WATCH_TC_ASSIGNMENTS*).
* :mod:`.placement` - on a cluster, coordinator *n* served by the owner of assign partition *n*'s
  bundle; the keeper that loads gained coordinators and fences lost ones (ADR 0070).
* :mod:`.peers` - the broker's binary-protocol connections to other brokers (END_TXN_ON_* at a
  topic's owner).
* :mod:`.assignments` - the coordinator-assignment watch of scalable-topic clients.

Everything here is off unless ``transactionCoordinatorEnabled=true`` (Pulsar's default is off).
"""
