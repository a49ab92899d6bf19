"""Braid's pure core: the scalable-topic model and decisions, with no I/O and no clock reads.

One concept per module, named as the PIPs name it so the code reads beside them:

* ``errors`` — the error root ``BraidError`` and its typed categories
  (``docs/protocol.md#errors-on-the-wire``).
* ``hashing`` — ``hash16(key)``, the key -> ring position function
  (``docs/protocol.md#routing-a-key``).
* ``ranges`` — ``HashRange`` on the 16-bit ring ``0x0000-0xFFFF``, midpoint split and merge.
* ``names`` — ``TopicName``, ``SegmentTopicName``, ``NamespaceName`` and the tenant/namespace
  validators.
* ``segment_info`` — PIP-468 ``SegmentInfo``: one segment of the DAG.
* ``layout`` — PIP-468 ``SegmentLayout``: the immutable, versioned DAG; split, merge, prune.
* ``layout_invariants`` — the checks every layout passes (tiling, edges, epochs, acyclicity).
* ``layout_codec`` — PIP-468 ``ScalableTopicMetadata``: the layout's JSON document.
* ``drain`` — drain gating, Pulsar's ``SegmentDrainChecker``: which segments an ordered
  subscription may read now.
* ``assignment`` — PIP-468 ``ConsumerAssignment``: the round-robin segment -> consumer deal.
* ``autoscale_policy`` — PIP-483 ``AutoScaleConfig``: the knobs, ``AutoScalePolicy``,
  ``AutoScalePolicyOverride`` and ``resolve_policy``.
* ``segment_load`` — PIP-483 ``SegmentLoadStats`` (``SegmentLoad``) and the
  ``SegmentLoadReporter``'s material-change rule.
* ``autoscale_evaluator`` — PIP-483 ``AutoScalePolicyEvaluator``: ``decide`` returns at most one
  split or merge, or the guard that held.
* ``units`` — ``broker.conf`` unit parsing (``1m``, ``50MB``, ``25%``).

Imports point down: ``segment_info`` <- ``layout_invariants`` <- ``layout`` <- ``layout_codec``;
``layout`` <- ``drain`` <- ``assignment``; ``autoscale_policy`` <- ``segment_load`` <-
``autoscale_evaluator``. The I/O shells that gather snapshots and carry out decisions live in the
packages above ``core``.
"""
