"""GroupCoordinatorService's APIs that take several steps, as Kafka orders them (the gateway's
handlers call these; single-call APIs go straight to the CoordinatorClient).

DeleteGroups deletes the share state of the share groups named before the groups
(deleteShareGroups); AlterShareGroupOffsets records the new start offsets, initializes the share
state with them and records that (alterShareGroupOffsets, persisterInitialize);
DeleteShareGroupOffsets marks the topics deleting, deletes their share state and completes
(initiateDeleteShareGroupOffsets, deleteState, completeDeleteShareGroupOffsets).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.share.offsets_admin import (
    AlteredPartition,
    AlteredTopic,
    AlterShareOffsetsOutcome,
    AlterShareOffsetsRequest,
    CompleteShareOffsetsDelete,
    DeletedShareTopic,
    DeleteShareOffsetsOutcome,
    DeleteShareOffsetsRequest,
    ShareOffsetsInitialized,
)

from cluster.calls import CoordinatorOp, Failed
from cluster.clients.coordinator import CoordinatorClient
from cluster.clients.persister import Persister
from cluster.services import share_state

log = logging.getLogger(__name__)


class GroupCoordinatorService:
    def __init__(self, coordinators: CoordinatorClient, persister: Persister) -> None:
        self.coordinators = coordinators
        self.persister = persister

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """DeleteGroups, share state first (Kafka's GroupCoordinatorService.deleteShareGroups): the
        share state of every Empty share group named is deleted through the persister, and a group
        whose state could not be deleted is kept and answers that error; the others are deleted.
        A share group left with state would refuse a new group of its id (FENCED_STATE_EPOCH)."""
        ids = list(dict.fromkeys(group_ids))
        kept = await self._delete_share_state(ids)
        deleted = await self.coordinators.per_group(CoordinatorOp.DELETE, [g for g in ids if g not in kept])
        return {g: kept.get(g) or deleted[g] for g in ids}

    async def _delete_share_state(self, group_ids: list[str]) -> dict[str, Failed]:
        """DeleteGroups' first two steps for share groups (coordinator/share/deletion.py): the
        coordinator checks Empty and moves the share partitions to deleting in one operation, then
        their share state is deleted. Returns the groups that must stay, with the error."""
        prepared = await self.coordinators.per_group(CoordinatorOp.SHARE_DELETE_PREPARE, group_ids)

        async def delete_state(group_id: str, step: Any) -> Failed | None:
            if isinstance(step, Failed):
                return step  # the coordinator cannot be asked now: neither can it delete
            if step.error_code != ErrorCode.none:
                return None  # not Empty: the group delete checks again and answers GROUP_NOT_EMPTY
            errors = await share_state.delete(self.persister, step.deletes)
            if errors:
                log.warning("share state of %s not deleted (%d partitions): %s", group_id, len(errors), errors[0])
                return Failed(errors[0].error_code, errors[0].error_message or "")
            return None

        results = await asyncio.gather(*(delete_state(g, prepared[g]) for g in group_ids))
        return {g: r for g, r in zip(group_ids, results) if r is not None}

    async def alter_share_group_offsets(self, req: AlterShareOffsetsRequest) -> AlterShareOffsetsOutcome | Failed:
        """Kafka's alterShareGroupOffsets then persisterInitialize: the coordinator checks the group
        is Empty and records the partitions initializing; their share state is initialized with the
        new start offsets; the answers are recorded (initialized) and a partition whose
        initialization failed answers that error."""
        outcome = await self.coordinators.group(CoordinatorOp.SHARE_OFFSETS_ALTER, req.group_id, req)
        if isinstance(outcome, Failed) or outcome.error_code != ErrorCode.none or not outcome.initialize:
            return outcome
        answers = await share_state.initialize(self.persister, outcome.initialize)
        results = share_state.init_results(outcome.initialize, answers)
        recorded = await self.coordinators.group(
            CoordinatorOp.SHARE_OFFSETS_INITIALIZED, req.group_id, ShareOffsetsInitialized(req.group_id, results)
        )
        if isinstance(recorded, Failed):
            # The state is initialized; the group still lists the partitions initializing, and its
            # retry (a later heartbeat) initializes them again. Say so rather than claim success.
            log.warning("altered share state of %s not recorded: %s", req.group_id, recorded)
        failed = {(i.topic_id, i.partition): a for i, a in zip(outcome.initialize, answers) if a.error_code != ErrorCode.none}
        if not failed:
            return outcome
        return dataclasses.replace(outcome, topics=tuple(_with_failures(t, failed) for t in outcome.topics))

    async def delete_share_group_offsets(
        self, req: DeleteShareOffsetsRequest
    ) -> tuple[DeleteShareOffsetsOutcome | Failed, tuple[DeletedShareTopic, ...]]:
        """Kafka's initiateDeleteShareGroupOffsets, persister deleteState, completeDeleteShareGroupOffsets:
        (the first step's outcome, every topic's answer). A topic whose state could not be deleted
        answers the first error among its partitions and stays `deleting` for a retry."""
        outcome = await self.coordinators.group(CoordinatorOp.SHARE_OFFSETS_DELETE, req.group_id, req)
        if isinstance(outcome, Failed) or outcome.error_code != ErrorCode.none:
            return outcome, ()
        errors = await asyncio.gather(*(share_state.delete(self.persister, deletes) for _, _, deletes in outcome.deletes))
        answered: list[DeletedShareTopic] = []
        gone = []
        for (topic_id, name, _), failed in zip(outcome.deletes, errors):
            if not failed:
                gone.append((topic_id, name))
            else:
                answered.append(DeletedShareTopic(name, topic_id, failed[0].error_code, failed[0].error_message))
        if gone:
            completed = await self.coordinators.group(
                CoordinatorOp.SHARE_OFFSETS_DELETE_COMPLETE, req.group_id, CompleteShareOffsetsDelete(req.group_id, tuple(gone))
            )
            if isinstance(completed, Failed):
                answered += [DeletedShareTopic(name, tid, completed.error_code, completed.message or None) for tid, name in gone]
            else:
                answered += list(completed)
        return outcome, tuple(answered) + outcome.failed


def _with_failures(topic: AlteredTopic, failed: dict[tuple[Any, int], Any]) -> AlteredTopic:
    parts = []
    for p in topic.partitions:
        answer = failed.get((topic.topic_id, p.partition))
        parts.append(p if answer is None else AlteredPartition(p.partition, answer.error_code, answer.error_message))
    return dataclasses.replace(topic, partitions=tuple(parts))
