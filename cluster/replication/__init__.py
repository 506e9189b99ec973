"""Replicated partitions (issue 25; docs/scale-out.md, design A): Kafka's leader and followers.

The state machines here are plain and deterministic, as the shards are: no I/O, no clock (every
call is given `now_ms`), no Ray. The actors that hold replicas feed them fetches and answers and
carry out what they decide (append, truncate, answer, propose an ISR change); the deterministic
simulation (tests/sim/replication_world.py) composes them with a controller under crashes, pauses
and a network that reorders and drops.

- epochs.py: the leader-epoch cache (Kafka's LeaderEpochFileCache, KIP-101/KIP-279), rebuilt
  from the epochs every batch already carries.
- registration.py: the controller's record of a partition (replicas, ISR, leader, epochs) and the
  changes it makes: elections from the ISR, fencing, AlterPartition (KIP-497), reassignment
  (KIP-455: a partition moves by copying its log to new replicas).
- placement.py: where replicas go: one per node (data directory), leaders and replicas spread
  evenly, the default replication factor, the replacements for a node lost for good.
- leader.py: the leader's side: follower progress, the ISR and its pending change, the high
  watermark, acks=all (Kafka's Partition).
- follower.py: the follower's side: where to fetch from, truncation on a diverging epoch
  (KIP-320), its high watermark (Kafka's AbstractFetcherThread / ReplicaFetcherThread).
- log_replica.py: one replica over its PartitionLog, the state machines joined to the bytes;
- manager.py: the replicas one process holds, in asyncio: fetchers, acks=all waits, ISR changes
  sent to the controller (Kafka's ReplicaManager). These two do I/O; the rest is pure.
"""
