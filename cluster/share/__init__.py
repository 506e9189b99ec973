"""Share partitions on a partition leader, along Kafka's seams (kafka.server.share):

- requests.py: what gateways send (ShareFetchCall) and get back (ShareOutcome);
- budget.py: one ShareFetch's MaxRecords split over the partition leaders it reaches (used by the
  gateway's PartitionLeaderClient);
- manager.py: SharePartitionManager, the actor's entry point for ShareFetch, ShareAcknowledge,
  releases, wakes and evictions;
- host.py: SharePartitionHost, one share partition on this leader with its lifecycle
  (sharestate/partition_state.py), its initialization from the durable state and its reads;
- write_queue.py: ShareStateWriteQueue, the ordered writes of one share partition's state;
- the long poll is cluster/delayed_fetch.py, shared with Fetch.
"""
