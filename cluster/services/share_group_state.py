"""What a group coordinator asks of the share coordinators after its own operations, carried out
on that actor (Kafka's GroupCoordinatorService.persisterInitialize after shareGroupHeartbeat, and
the share-state deletions of DeleteGroups and of topic deletions).

The group coordinator shard stays pure: a share heartbeat answers which share partitions need
their state initialized, DeleteGroups and topic deletions answer whose state must go. The
operation's traits (CoordinatorOp.initializes_share_state, deletes_share_state) say which
outcomes to look at; this object sends those through the Persister (share_state.py) after the
records are durable, and reports initializations back to the shard (`share_state_initialized`),
whose retry timer covers an answer that never comes. It also hands the shard the cluster's
topics (`update_topics`) when a partition loads and whenever the topics change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.messages import DeletedGroup
from coordinator.share.messages import ShareHeartbeatOutcome, ShareStateDelete, ShareStateInit, TopicImage

from cluster.leadership import Leadership
from cluster.metadata import CONSUMER_OFFSETS
from cluster.runtime import RUNTIME_ERRORS, CoordinatorRuntime
from cluster.services import share_state

log = logging.getLogger(__name__)

_GONE = RUNTIME_ERRORS


def topics_image(leadership: Leadership) -> tuple[TopicImage, ...]:
    return tuple(
        sorted(
            (TopicImage(t.name, t.topic_id, t.partitions) for t in leadership.topics.values() if not t.internal),
            key=lambda t: t.name,
        )
    )


class ShareGroupState:
    def __init__(self, runtime: CoordinatorRuntime, persister: Any) -> None:
        self.runtime = runtime
        self.persister = persister
        self.image: tuple[TopicImage, ...] | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- after operations ----------------------------------------------------------------------------

    def after(self, item: Any, outcome: Any) -> None:
        """Act on what an operation answered (a CoordinatorItem; its op's traits say which may leave
        share state to initialize or delete), in the background: the client has its answer."""
        op = item.op
        if op.initializes_share_state and isinstance(outcome, ShareHeartbeatOutcome) and outcome.initialize:
            self._spawn(self.initialize(item.partition, item.epoch, outcome.initialize))
        elif op.deletes_share_state and isinstance(outcome, list):
            # After DeleteGroups' first step (coordinator/share/deletion.py) a deleted share group
            # answers nothing here: its state went before it. A delete without that step answers
            # the partitions still initialized or initializing, whose state may exist.
            deletes = [d for g in outcome if isinstance(g, DeletedGroup) for d in g.share_state_deletes]
            if deletes:
                self._spawn(self.delete(deletes))

    async def initialize(self, partition: int, epoch: int, inits: Iterable[ShareStateInit]) -> None:
        by_group: dict[str, list[ShareStateInit]] = {}
        for init in inits:
            by_group.setdefault(init.group_id, []).append(init)
        for group_id, items in by_group.items():
            results = share_state.init_results(items, await share_state.initialize(self.persister, items))
            failed = [r for r in results if r.error_code != ErrorCode.none]
            if failed:
                log.warning("share state of %d partitions of %s not initialized: %s", len(failed), group_id, failed[0])
            tp = (CONSUMER_OFFSETS, partition)
            try:
                await self.runtime.write(
                    tp, epoch, lambda token: self.runtime.shard(tp).share_state_initialized(group_id, results, token)
                )
            except _GONE as exc:  # moved or failed: the new leader's retry timer asks again
                log.info("share state initialization of %s not recorded: %s", group_id, exc)

    async def delete(self, deletes: Iterable[ShareStateDelete]) -> None:
        failed = await share_state.delete(self.persister, deletes)
        if failed:
            log.warning("%d share-state deletions failed: %s", len(failed), failed[0])

    # -- topics --------------------------------------------------------------------------------------

    def leadership_changed(self, leadership: Leadership) -> None:
        image = topics_image(leadership)
        if image == self.image:
            return
        self.image = image
        self._spawn(self.update_topics(list(self.runtime.partitions)))

    async def update_topics(self, tps: Iterable[tuple[str, int]]) -> None:
        """Give the shards of these partitions the current topics; delete what they answer."""
        image = self.image
        if image is None:
            return

        async def one(tp: tuple[str, int]) -> tuple[ShareStateDelete, ...]:
            try:
                return await self.runtime.write(tp, None, lambda token: self.runtime.shard(tp).update_topics(image, token))
            except _GONE:
                return ()

        deletes = [d for answer in await asyncio.gather(*(one(tp) for tp in tps)) for d in answer]
        if deletes:
            await self.delete(deletes)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("share-state task failed", exc_info=task.exception())
