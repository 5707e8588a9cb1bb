"""Streams (SPEC section 5, zync): Kafka topics synced into pools and back, exactly once.

An interface layer like :mod:`limno.cli` and :mod:`limno.server`: it reaches a lake
only through the one lake interface (:mod:`limno.api`), so ``limno kafka from``
works the same on a lake path and on a ``limno serve`` URL. The pool, not Kafka's
consumer group, is the source of truth of what was synced: each batch is one
commit whose meta records the offsets it holds (:mod:`.kafka_offsets`). Going back
(:mod:`.kafka_to`), the topic is the source of truth: each message names its
record's source offset.

Nothing here is imported at CLI start: the Kafka client (confluent-kafka) loads
when a ``kafka`` command runs.
"""
