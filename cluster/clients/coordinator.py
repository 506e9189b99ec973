"""CoordinatorClient: calls to the group coordinators, by group id or `__consumer_offsets` partition.

A group lives on partition abs(javaHash(group id)) % partitions. A call goes to the actor leading
that partition; the router retries once on a stale map (NOT_COORDINATOR, a dead actor), after
which the client hands Kafka's retriable error back for the Kafka client to retry. Calls naming
several groups are split per partition, sent in parallel and merged. The flows that take several
calls (DeleteGroups with share state, the share offsets APIs) are cluster/services/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.hashing import group_partition

from cluster.calls.kinds import ActorKind
from cluster.calls import CoordinatorCall, CoordinatorOp, Deferred, Endpoint, Failed, Listing, ParkedItem
from cluster.clients.failures import ACTOR_GONE, ACTOR_LOST
from cluster.clients.parked_answers import ParkedAnswers
from cluster.metadata import CONSUMER_OFFSETS
from cluster.clients.routing import NoLeader


_REMEMBERED_GROUPS = 100_000  # ids whose partition is kept (a few MB at most)


def _not_coordinator(outcome: Any) -> bool:
    return isinstance(outcome, Failed) and outcome.error_code == ErrorCode.not_coordinator


class CoordinatorClient:
    def __init__(self, router: Any, num_partitions: int) -> None:
        self.router = router
        self.num_partitions = num_partitions
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
                if isinstance(outcome, Deferred):
                    outcome = await self._collect(outcome)
        except NoLeader as exc:
            return Failed(ErrorCode.coordinator_not_available, str(exc))
        return outcome

    async def _collect(self, deferred: Deferred) -> Any:
        """The outcome of an operation the coordinator answered Deferred (it waited for its commit
        past its call), on a call of its own. Never run again: a coordinator lost meanwhile may
        have run it, so the client is told to retry, as for any call lost under way."""
        link = self.router.link(deferred.actor)
        if link is None:
            return Failed(ErrorCode.coordinator_not_available, f"{deferred.actor} was lost before it answered")
        try:
            outcome = await link.call(Endpoint.COORDINATOR_DEFERRED, deferred.incarnation, deferred.ticket)
        except ACTOR_LOST:
            await self.router.refresh()
            return Failed(ErrorCode.coordinator_not_available, f"{deferred.actor} was lost before it answered")
        if _not_coordinator(outcome):
            # The partition moved while the operation waited (it may have run): not sent again,
            # but the map is brought up to date for the client's retry, as call_leader does.
            await self.router.refresh()
        return outcome

    async def _parked(self, call: CoordinatorCall) -> Any:
        """An operation that may park: started with a ticket, answered on the gateway's channel to
        that coordinator (parked_answers.py). Retried once where a batched call is (the router's
        rule): a coordinator that answers that it no longer leads the partition (the operation did
        not run). One that died while the operation was parked is not asked again here: the
        operation may have run, and the client joins again as it chooses, as with Kafka."""
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
                except ACTOR_LOST:
                    await self.router.refresh()
                    raise NoLeader(f"coordinator of {CONSUMER_OFFSETS}-{call.partition} was lost during the call") from None
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
