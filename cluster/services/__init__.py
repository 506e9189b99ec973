"""Kafka's GroupCoordinatorService: the flows that take more than one call, each written once.

The coordinator shards stay pure and answer what must happen next (share partitions to
initialize, share state to delete); these flows carry it out through the clients, in Kafka's
order, and report back to the shard where Kafka does.

- share_state.py        the Persister choreography: initialize and delete share state, per partition
- group_service.py      GroupCoordinatorService's multi-step APIs, called by the gateway's handlers:
                        DeleteGroups (deleteShareGroups first), AlterShareGroupOffsets
                        (then persisterInitialize), DeleteShareGroupOffsets (initiate, delete, complete)
- share_group_state.py  what a group coordinator does after its own operations: the share-state
                        initialize a share heartbeat asks for (CoordinatorOp.initializes_share_state),
                        the deletes DeleteGroups and topic deletions leave
"""
