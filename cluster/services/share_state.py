"""The Persister choreography, once: share state initialized or deleted for many share partitions
at a time, each through the persister (which finds its share coordinator and retries while it
moves), answered per partition. Kafka's GroupCoordinatorService.persisterInitialize and the
deleteShareGroups / deleteShareGroupOffsets state deletions use these same two calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.share.messages import ShareStateDelete, ShareStateInit, ShareStateInitResult
from sharestate import messages as m


async def initialize(persister: Any, inits: Iterable[ShareStateInit]) -> list[m.InitializeShareGroupStateResponse]:
    """InitializeShareGroupState for each partition, at its state epoch and start offset: the
    persister's answer per partition, in order."""
    return await asyncio.gather(
        *(
            persister.initialize(
                m.InitializeShareGroupStateRequest(i.group_id, i.topic_id, i.partition, i.state_epoch, i.start_offset)
            )
            for i in inits
        )
    )


def init_results(inits: Iterable[ShareStateInit], answers: Iterable[Any]) -> tuple[ShareStateInitResult, ...]:
    """The answers as the shard's `share_state_initialized` takes them."""
    return tuple(ShareStateInitResult(i.topic_id, i.partition, a.error_code) for i, a in zip(inits, answers))


async def delete(persister: Any, deletes: Iterable[ShareStateDelete]) -> list[Any]:
    """DeleteShareGroupState for each partition: the answers that failed, in order (none: all went)."""
    answers = await asyncio.gather(
        *(persister.delete(m.DeleteShareGroupStateRequest(d.group_id, d.topic_id, d.partition)) for d in deletes)
    )
    return [a for a in answers if a.error_code != ErrorCode.none]
