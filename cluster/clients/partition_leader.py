"""PartitionLeaderClient: the calls to the actors leading user partitions.

Produce and ListOffsets go one partition at a time through the router's batchers (one Ray call
per actor and loop tick); a leader that says it no longer leads at the routed epoch, or a dead
actor, refreshes the map and is retried once, after which the client answers
NOT_LEADER_OR_FOLLOWER for the Kafka client to retry.

Fetch and ShareFetch name partitions on several actors and long-poll: each actor gets one call
carrying its partitions and the request's limits, and the first answer with data ends the
others' waits (Fetch asks them again without waiting; ShareFetch wakes them, see share_fetch).
A partition without a live leader answers NOT_LEADER_OR_FOLLOWER and the map is pulled again
for the client's retry.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import ray
from kio.schema.errors import ErrorCode

from cluster.calls import FetchPartition, LogEnd, PartitionOp, ShareFetchSpec, SharePartitionCall
from cluster.clients.failures import answer_or_none
from cluster.partition import FetchOutcome, ProduceOutcome
from cluster.routing import NoLeader
from cluster.share.requests import ShareFetchCall, ShareOutcome

LATEST = -1
NO_EPOCH = -1

_wake_keys = itertools.count(1)


class PartitionLeaderClient:
    def __init__(self, router: Any) -> None:
        self.router = router

    # -- one partition, batched --------------------------------------------------------------------

    async def produce(self, topic: str, partition: int, records: bytes) -> ProduceOutcome:
        try:
            return await self.router.call_leader(
                topic,
                partition,
                PartitionOp.PRODUCE.value,
                lambda epoch: (topic, partition, epoch, records),
                lambda outcome: outcome.error_code == ErrorCode.not_leader_or_follower,
            )
        except NoLeader as exc:
            return ProduceOutcome(ErrorCode.not_leader_or_follower, message=str(exc))

    async def list_offsets(
        self, topic: str, partition: int, timestamp: int = LATEST, client_epoch: int = NO_EPOCH
    ) -> LogEnd:
        try:
            error, offset, ts, epoch = await self.router.call_leader(
                topic,
                partition,
                PartitionOp.LIST_OFFSETS.value,
                lambda routed: (topic, partition, routed, client_epoch, timestamp),
                lambda r: r[0] == ErrorCode.not_leader_or_follower.value,
            )
        except NoLeader:
            return LogEnd(ErrorCode.not_leader_or_follower)
        return LogEnd(ErrorCode(error), offset, ts, epoch)

    # -- Fetch: fan-out and long poll ----------------------------------------------------------------

    async def fetch(
        self, parts: Sequence[FetchPartition], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchOutcome]:
        """One outcome per part, in order. Every leader concerned is asked at once with max_wait_ms;
        once min_bytes have arrived from some, the others are asked again without waiting and their
        long polls cancelled, so data on one actor is never held back by an idle partition on another."""
        outcomes: list[FetchOutcome | None] = [None] * len(parts)
        per_actor: dict[str, list[tuple[int, tuple]]] = {}
        for i, part in enumerate(parts):
            route = self.router.leader(part.topic, part.partition)
            if route is None:
                outcomes[i] = FetchOutcome(ErrorCode.not_leader_or_follower)
                continue
            actor, epoch = route
            per_actor.setdefault(actor, []).append((i, part.item(epoch)))
        if not per_actor:
            return outcomes  # type: ignore[return-value]

        def call(actor: str, wait: int) -> Any:
            handle = self.router.handle(actor)
            if handle is None:
                return None
            return handle.fetch.remote([item for _, item in per_actor[actor]], wait, min_bytes, max_bytes)

        refs = {actor: call(actor, max_wait_ms) for actor in per_actor}
        pending = {asyncio.ensure_future(answer_or_none(ref)): actor for actor, ref in refs.items() if ref is not None}
        answered: dict[str, list[FetchOutcome] | None] = {actor: None for actor, ref in refs.items() if ref is None}
        got_bytes = 0
        while pending:
            done, _ = await asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                actor = pending.pop(task)
                answered[actor] = task.result()
                got_bytes += sum(len(o.records) for o in answered[actor] or [])
            if pending and got_bytes > 0 and got_bytes >= min_bytes:
                # Data arrived: collect the other leaders' state now instead of waiting out their polls.
                for task, actor in list(pending.items()):
                    _cancel(refs[actor])
                    task.cancel()
                    answered[actor] = await answer_or_none(call(actor, 0))
                pending.clear()

        stale = False
        for actor, outs in answered.items():
            indexes = [i for i, _ in per_actor[actor]]
            if outs is None:
                stale = True
                outs = [FetchOutcome(ErrorCode.not_leader_or_follower)] * len(indexes)
            for i, o in zip(indexes, outs):
                stale = stale or o.error_code == ErrorCode.not_leader_or_follower
                outcomes[i] = o
        if stale:
            asyncio.ensure_future(self.router.refresh())
        return outcomes  # type: ignore[return-value]

    # -- ShareFetch and ShareAcknowledge: fan-out, long poll, wake -----------------------------------

    async def share_fetch(
        self,
        spec: ShareFetchSpec,
        parts: Sequence[SharePartitionCall],
        in_flight: dict[Any, tuple[str, str]] | None = None,
    ) -> dict[int, tuple[ShareOutcome, int]]:
        """Acknowledge and fetch on every leader concerned: part index -> (outcome, routed leader
        epoch, -1 when the partition had no leader), leaderless parts first, then per leader.

        When one leader answers with records while others still long-poll, the others are woken,
        not cancelled: an actor may be acquiring records at that very moment, and acquired records
        must reach the client. Each call is entered in `in_flight` (call -> (actor, wake key)) until
        it is back, so a session that ends can wake it (share_wake) and wait for it; and the wait
        here is shielded, so calls whose client went away still finish and are accounted for.
        """
        results: dict[int, tuple[ShareOutcome, int]] = {}
        per_actor: dict[str, list[tuple[int, Any]]] = {}
        for i, part in enumerate(parts):
            route = self.router.leader(part.topic, part.partition)
            if route is None:
                out = ShareOutcome()
                out.fail(ErrorCode.not_leader_or_follower, None, bool(part.acknowledgements))
                results[i] = (out, -1)
                continue
            actor, epoch = route
            per_actor.setdefault(actor, []).append((i, part.item(epoch)))
        if not per_actor:
            return results

        calls: dict[str, tuple[Any, str, asyncio.Future]] = {}
        for actor, entries in per_actor.items():
            handle = self.router.handle(actor)
            wake_key = f"{spec.gateway}:{next(_wake_keys)}"
            call = ShareFetchCall(
                spec.group_id,
                spec.member_id,
                tuple(item for _, item in entries),
                max_wait_ms=spec.max_wait_ms,
                min_bytes=spec.min_bytes,
                max_bytes=spec.max_bytes,
                max_records=spec.max_records,
                wake_key=wake_key,
                gateway=spec.gateway,
            )
            task = asyncio.ensure_future(answer_or_none(handle.share_fetch.remote(call) if handle is not None else None))
            calls[actor] = (handle, wake_key, task)
            if in_flight is not None:
                in_flight[task] = (actor, wake_key)
                task.add_done_callback(lambda t: in_flight.pop(t, None))

        pending = {task: actor for actor, (_, _, task) in calls.items()}
        woken = False
        while pending:
            done, _ = await asyncio.shield(asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED))
            for task in done:
                pending.pop(task)
            if pending and not woken and any(o and any(x.acquired for x in o) for o in (t.result() for t in done)):
                woken = True
                for actor in pending.values():
                    handle, wake_key, _ = calls[actor]
                    if handle is not None:
                        handle.share_wake.remote([wake_key])

        stale = False
        for actor, entries in per_actor.items():
            answered = calls[actor][2].result()
            for j, (i, item) in enumerate(entries):
                if answered is None:
                    out = ShareOutcome()
                    out.fail(ErrorCode.not_leader_or_follower, "the partition's leader is gone", bool(item.acknowledgements))
                else:
                    out = answered[j]
                stale = stale or out.error_code == ErrorCode.not_leader_or_follower
                results[i] = (out, item.epoch)
        if stale:
            asyncio.ensure_future(self.router.refresh())
        return results

    def share_wake(self, actor: str, wake_keys: list[str]) -> None:
        """End these long polls on `actor` now (fire and forget: a dead actor has nothing to end)."""
        handle = self.router.handle(actor)
        if handle is not None:
            handle.share_wake.remote(wake_keys)

    async def share_release(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Release what the member holds on these partitions, on each leader in parallel."""
        await self._on_leaders(
            partitions, lambda handle, items: handle.share_release.remote(group_id, member_id, items)
        )

    async def share_evict(self, group_id: str, partitions: Iterable[tuple[str, int]], gateway: int) -> None:
        """Tell the leaders that `gateway` has no session of the group left on these partitions."""
        await self._on_leaders(
            partitions, lambda handle, items: handle.share_evict.remote(group_id, items, gateway=gateway)
        )

    async def _on_leaders(self, partitions: Iterable[tuple[str, int]], send: Any) -> None:
        per_actor: dict[str, list[tuple[str, int]]] = {}
        for topic, p in partitions:
            route = self.router.leader(topic, p)
            if route is not None:
                per_actor.setdefault(route[0], []).append((topic, p))
        refs = []
        for actor, items in per_actor.items():
            handle = self.router.handle(actor)
            if handle is not None:
                refs.append(answer_or_none(send(handle, items)))
        await asyncio.gather(*refs)


def _cancel(ref: Any) -> None:
    """Stop a long poll at the actor too, not just our wait for it (only a Ray ref can be)."""
    if isinstance(ref, ray.ObjectRef):
        ray.cancel(ref)
