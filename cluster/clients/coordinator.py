"""CoordinatorClient: calls to the group coordinators, by group id or `__consumer_offsets` partition.

A group lives on partition abs(javaHash(group id)) % partitions. A call goes to the actor leading
that partition; the router retries once on a stale map (NOT_COORDINATOR, a dead actor), after
which the client hands Kafka's retriable error back for the Kafka client to retry. Calls naming
several groups are split per partition, sent in parallel and merged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.hashing import group_partition
from coordinator.share.messages import ShareStateInitResult
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
from sharestate import messages as m

from cluster.calls.kinds import ActorKind
from cluster.calls import CoordinatorCall, CoordinatorOp, Endpoint, Failed, Listing, ParkedItem
from cluster.clients.failures import ACTOR_GONE
from cluster.clients.parked_answers import ParkedAnswers
from cluster.metadata import CONSUMER_OFFSETS
from cluster.clients.routing import NoLeader

log = logging.getLogger(__name__)

_REMEMBERED_GROUPS = 100_000  # ids whose partition is kept (a few MB at most)
# A dead actor as a parked answer reports it; not CancelledError, which is the caller's own.
ACTOR_GONE_RAISED = tuple(e for e in ACTOR_GONE if e is not asyncio.CancelledError)


def _not_coordinator(outcome: Any) -> bool:
    return isinstance(outcome, Failed) and outcome.error_code == ErrorCode.not_coordinator


class CoordinatorClient:
    def __init__(self, router: Any, num_partitions: int, persister: Any = None) -> None:
        self.router = router
        self.num_partitions = num_partitions
        self.persister = persister
        self._partitions: dict[str, int] = {}
        self.parked = ParkedAnswers(router)

    def partition_for(self, group_id: str) -> int:
        # Java's string hash is a Python loop over the id's characters, on every request (a
        # heartbeat's whole gateway work is a few times that): each id is hashed once.
        partition = self._partitions.get(group_id)
        if partition is None:
            if len(self._partitions) >= _REMEMBERED_GROUPS:
                self._partitions.clear()
            partition = self._partitions[group_id] = group_partition(group_id, self.num_partitions)
        return partition

    async def call(self, call: CoordinatorCall) -> Any:
        """The outcome of one operation, or Failed."""
        try:
            if call.op.parks:
                outcome = await self._parked(call)
            else:
                outcome = await self.router.call_leader(
                    CONSUMER_OFFSETS, call.partition, Endpoint.COORDINATOR, call.item, _not_coordinator
                )
        except NoLeader as exc:
            return Failed(ErrorCode.coordinator_not_available, str(exc))
        return outcome

    async def _parked(self, call: CoordinatorCall) -> Any:
        """An operation that may park: started with a ticket, answered on the gateway's channel to
        that coordinator (parked_answers.py). Retried once where a batched call is (the router's
        rule): the coordinator died meanwhile, or answers that it no longer leads the partition."""
        for attempt in range(2):
            ticket, answer = self.parked.expect()
            try:
                started = await self.router.call_leader(
                    CONSUMER_OFFSETS, call.partition, Endpoint.COORDINATOR_PARKED,
                    lambda epoch: ParkedItem(self.parked.channel_id, ticket, call.item(epoch)), _not_coordinator,
                )
                if isinstance(started, Failed):
                    return started
                route = self.router.leader(CONSUMER_OFFSETS, call.partition)
                self.parked.started(ticket, started[0], started[1])
                try:
                    outcome = await answer
                except ACTOR_GONE_RAISED:
                    if attempt == 0:
                        await self.router.refresh()
                        continue
                    raise NoLeader(f"coordinator of {CONSUMER_OFFSETS}-{call.partition} is unavailable") from None
            finally:
                self.parked.forget(ticket)
            if _not_coordinator(outcome) and attempt == 0:
                await self.router.refresh()
                if self.router.leader(CONSUMER_OFFSETS, call.partition) != route:
                    continue
            return outcome
        raise NoLeader(f"coordinator of {CONSUMER_OFFSETS}-{call.partition} is unavailable")

    async def group(self, op: CoordinatorOp, group_id: str, request: Any) -> Any:
        """An operation on the coordinator of group_id."""
        return await self.call(CoordinatorCall(op, self.partition_for(group_id), request))

    async def per_group(self, op: CoordinatorOp, group_ids: Iterable[str]) -> dict[str, Any]:
        """op once per partition over the groups it holds (its request: their ids); outcome per group."""
        by_partition: dict[int, list[str]] = {}
        for g in dict.fromkeys(group_ids):
            by_partition.setdefault(self.partition_for(g), []).append(g)
        outcomes = await asyncio.gather(
            *(self.call(CoordinatorCall(op, p, tuple(ids))) for p, ids in by_partition.items())
        )
        per_group: dict[str, Any] = {}
        for ids, outcome in zip(by_partition.values(), outcomes):
            for i, group_id in enumerate(ids):
                per_group[group_id] = outcome if isinstance(outcome, Failed) else outcome[i]
        return per_group

    async def list_groups(self, states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> Listing:
        """ListGroups over every group coordinator. Like Kafka's, an error anywhere (a partition
        loading, a coordinator gone) answers that error and no groups, not a partial list."""
        handles = [
            h for name, h in self.router.leadership.handles.items() if name.startswith(ActorKind.GROUP_COORDINATOR.value)
        ]
        answers = await asyncio.gather(*(h.list_groups.remote(states, types) for h in handles), return_exceptions=True)
        groups: list[Any] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                if not isinstance(answer, ACTOR_GONE):
                    raise answer
                return Listing(ErrorCode.coordinator_not_available)
            actor_error, listed = answer
            if actor_error is not None:
                return Listing(actor_error.error_code)
            groups += listed
        return Listing(ErrorCode.none, tuple(sorted(groups, key=lambda g: g.group_id)))

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """DeleteGroups, share state first (Kafka's GroupCoordinatorService.deleteShareGroups): the
        share state of every Empty share group named is deleted through the persister, and a group
        whose state could not be deleted is kept and answers that error; the others are deleted.
        A share group left with state would refuse a new group of its id (FENCED_STATE_EPOCH)."""
        ids = list(dict.fromkeys(group_ids))
        kept: dict[str, Any] = {}
        if self.persister is not None:
            kept = await self._delete_share_state(ids)
        deleted = await self.per_group(CoordinatorOp.DELETE, [g for g in ids if g not in kept])
        return {g: kept.get(g) or deleted[g] for g in ids}

    async def _delete_share_state(self, group_ids: list[str]) -> dict[str, Failed]:
        """DeleteGroups' first two steps for share groups (coordinator/share/deletion.py): the
        coordinator checks Empty and moves the share partitions to deleting in one operation, then
        their share state is deleted. Returns the groups that must stay, with the error."""
        prepared = await self.per_group(CoordinatorOp.SHARE_DELETE_PREPARE, group_ids)

        async def delete_state(group_id: str, step: Any) -> Failed | None:
            if isinstance(step, Failed):
                return step  # the coordinator cannot be asked now: neither can it delete
            if step.error_code != ErrorCode.none:
                return None  # not Empty: the group delete checks again and answers GROUP_NOT_EMPTY
            answers = await asyncio.gather(
                *(self.persister.delete(m.DeleteShareGroupStateRequest(d.group_id, d.topic_id, d.partition)) for d in step.deletes)
            )
            errors = [a for a in answers if a.error_code != ErrorCode.none]
            if errors:
                log.warning("share state of %s not deleted (%d partitions): %s", group_id, len(errors), errors[0])
                return Failed(errors[0].error_code, errors[0].error_message or "")
            return None

        results = await asyncio.gather(*(delete_state(g, prepared[g]) for g in group_ids))
        return {g: r for g, r in zip(group_ids, results) if r is not None}

    # -- AlterShareGroupOffsets / DeleteShareGroupOffsets (coordinator/share/offsets_admin.py) ---------

    async def alter_share_group_offsets(self, req: AlterShareOffsetsRequest) -> AlterShareOffsetsOutcome | Failed:
        """Kafka's alterShareGroupOffsets then persisterInitialize: the coordinator checks the group
        is Empty and records the partitions initializing; their share state is initialized with the
        new start offsets; the answers are recorded (initialized) and a partition whose
        initialization failed answers that error."""
        outcome = await self.group(CoordinatorOp.SHARE_OFFSETS_ALTER, req.group_id, req)
        if isinstance(outcome, Failed) or outcome.error_code != ErrorCode.none or not outcome.initialize:
            return outcome
        answers = await asyncio.gather(
            *(
                self.persister.initialize(
                    m.InitializeShareGroupStateRequest(i.group_id, i.topic_id, i.partition, i.state_epoch, i.start_offset)
                )
                for i in outcome.initialize
            )
        )
        results = tuple(ShareStateInitResult(i.topic_id, i.partition, a.error_code) for i, a in zip(outcome.initialize, answers))
        recorded = await self.group(
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

    async def delete_share_group_offsets(self, req: DeleteShareOffsetsRequest) -> tuple[DeleteShareOffsetsOutcome | Failed, tuple[DeletedShareTopic, ...]]:
        """Kafka's initiateDeleteShareGroupOffsets, persister deleteState, completeDeleteShareGroupOffsets:
        (the first step's outcome, every topic's answer). A topic whose state could not be deleted
        answers the first error among its partitions and stays `deleting` for a retry."""
        outcome = await self.group(CoordinatorOp.SHARE_OFFSETS_DELETE, req.group_id, req)
        if isinstance(outcome, Failed) or outcome.error_code != ErrorCode.none:
            return outcome, ()

        async def delete_topic(deletes: tuple[Any, ...]) -> Any:
            answers = await asyncio.gather(
                *(self.persister.delete(m.DeleteShareGroupStateRequest(d.group_id, d.topic_id, d.partition)) for d in deletes)
            )
            return next((a for a in answers if a.error_code != ErrorCode.none), None)

        errors = await asyncio.gather(*(delete_topic(deletes) for _, _, deletes in outcome.deletes))
        answered: list[DeletedShareTopic] = []
        gone = []
        for (topic_id, name, _), error in zip(outcome.deletes, errors):
            if error is None:
                gone.append((topic_id, name))
            else:
                answered.append(DeletedShareTopic(name, topic_id, error.error_code, error.error_message))
        if gone:
            completed = await self.group(
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
