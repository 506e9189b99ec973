"""The gateway↔actor contract: which operations the clients ask of which actor, and what comes back.

- kinds.py       the actor kinds, which kind leads a topic, the Ray options every actor runs with
- operations.py  per actor kind the operations as enums whose members carry the shard function,
                 the request type and the traits the actors act on; Endpoint, the actor methods
- items.py       the items a batch holds, `@message` values
- outcomes.py    Failed (the one failure type), and the answers gathered over several actors
- packing.py     a batch as one pickle, for the endpoints that are packed

Handlers speak in these terms and never name an actor method; the clients (cluster/clients/)
turn a call into a batched Ray call and an outcome back into one of these types. This package
exports the names other modules use.
"""

from cluster.calls.items import (
    CoordinatorCall, CoordinatorItem, FetchItem, FetchPartition, ListOffsetsItem, ParkedItem, ProduceItem,
    SharePartitionCall, ShareFetchSpec,
)
from cluster.calls.kinds import ActorKind
from cluster.calls.operations import CoordinatorOp, Endpoint, ShareStateOp
from cluster.calls.outcomes import Deferred, Failed, Listing, LogEnd
from cluster.calls.packing import pack, unpack

__all__ = [
    "ActorKind",
    "CoordinatorCall",
    "CoordinatorItem",
    "CoordinatorOp",
    "Deferred",
    "Endpoint",
    "Failed",
    "FetchItem",
    "FetchPartition",
    "ListOffsetsItem",
    "ProduceItem",
    "Listing",
    "LogEnd",
    "ParkedItem",
    "ShareFetchSpec",
    "SharePartitionCall",
    "ShareStateOp",
    "pack",
    "unpack",
]
