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
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.calls import (
    Endpoint, FetchItem, FetchPartition, ListOffsetsItem, LogEnd, ProduceItem, ShareFetchSpec, SharePartitionCall,
)
from cluster.clients.failures import answer_or_none
from cluster.partition import FetchOutcome, ProduceOutcome
from cluster.clients.routing import NoLeader
from cluster.share import fetch_policy
from cluster.share.requests import ShareFetchCall, ShareItem, ShareOutcome

LATEST = -1
NO_EPOCH = -1

_wake_keys = itertools.count(1)


class PartitionLeaderClient:
    def __init__(self, router: Any) -> None:
        self.router = router

    # -- one partition, batched --------------------------------------------------------------------

    async def produce(
        self, topic: str, partition: int, records: bytes, acks_all: bool = True, timeout_ms: int = 30_000
    ) -> ProduceOutcome:
        try:
            return await self.router.call_leader(
                topic,
                partition,
                Endpoint.PRODUCE,
                lambda epoch: ProduceItem(topic, partition, epoch, records, acks_all, timeout_ms),
                lambda outcome: outcome.error_code == ErrorCode.not_leader_or_follower,
            )
        except NoLeader as exc:
            return ProduceOutcome(ErrorCode.not_leader_or_follower, message=str(exc))

    async def list_offsets(
        self, topic: str, partition: int, timestamp: int = LATEST, client_epoch: int = NO_EPOCH
    ) -> LogEnd:
        try:
            return await self.router.call_leader(
                topic,
                partition,
                Endpoint.LIST_OFFSETS,
                lambda routed: ListOffsetsItem(topic, partition, routed, client_epoch, timestamp),
                lambda r: r.error_code == ErrorCode.not_leader_or_follower,
            )
        except NoLeader:
            return LogEnd(ErrorCode.not_leader_or_follower)

    # -- Fetch: fan-out and long poll ----------------------------------------------------------------

    async def fetch(
        self, parts: Sequence[FetchPartition], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> list[FetchOutcome]:
        """One outcome per part, in order. Every leader concerned is first asked what it has now, as
        Kafka reads before it parks a DelayedFetch; only if that is short of min_bytes and no read
        failed (an error is answered at once, as in Kafka) is every leader asked again with
        max_wait_ms. Once min_bytes have arrived from some, the others are asked again without
        waiting and their long polls cancelled, so data on one actor is never held back by an idle
        partition on another. (Long-polling first cancelled and re-read, on
        one fetch in three of a consumer catching up, a leader whose data was already on its way.)"""
        outcomes: list[FetchOutcome | None] = [None] * len(parts)
        per_actor: dict[str, list[tuple[int, FetchItem]]] = {}
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
            link = self.router.link(actor)
            if link is None:
                return None
            return link.call(Endpoint.FETCH, [item for _, item in per_actor[actor]], wait, min_bytes, max_bytes)

        answered: dict[str, list[FetchOutcome] | None] = dict(zip(per_actor, await asyncio.gather(
            *(answer_or_none(call(actor, 0)) for actor in per_actor))))
        got_bytes = sum(len(o.records) for outs in answered.values() for o in outs or [])
        if max_wait_ms > 0 and got_bytes < min_bytes and not any(map(_failed, answered.values())):
            answered.update(await self._long_poll(call, [a for a, outs in answered.items() if outs is not None],
                                                  max_wait_ms, min_bytes))

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

    async def _long_poll(
        self, call: Callable[[str, int], Any], actors: list[str], max_wait_ms: int, min_bytes: int
    ) -> dict[str, list[FetchOutcome] | None]:
        refs = {actor: call(actor, max_wait_ms) for actor in actors}
        pending = {asyncio.ensure_future(answer_or_none(ref)): actor for actor, ref in refs.items() if ref is not None}
        answered: dict[str, list[FetchOutcome] | None] = {actor: None for actor, ref in refs.items() if ref is None}
        got_bytes = 0
        while pending:
            done, _ = await asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
            failed = False
            for task in done:
                actor = pending.pop(task)
                answered[actor] = task.result()
                got_bytes += sum(len(o.records) for o in answered[actor] or [])
                failed = failed or _failed(answered[actor])
            if pending and (failed or (got_bytes > 0 and got_bytes >= min_bytes)):
                # Data or an error arrived: collect the other leaders' state now instead of waiting
                # out their polls (Kafka answers a fetch at once when reading hit an error).
                for task, actor in list(pending.items()):
                    refs[actor].cancel()  # stops the long poll at the actor too
                    task.cancel()
                    answered[actor] = await answer_or_none(call(actor, 0))
                pending.clear()
        return answered

    # -- ShareFetch and ShareAcknowledge: fan-out, long poll, wake -----------------------------------

    async def share_fetch(
        self,
        spec: ShareFetchSpec,
        parts: Sequence[SharePartitionCall],
        in_flight: dict[Any, tuple[str, str]] | None = None,
        closed: Callable[[], bool] | None = None,
    ) -> dict[int, tuple[ShareOutcome, int]]:
        """Acknowledge and fetch on every leader concerned: part index -> (outcome, routed leader
        epoch, -1 when the partition had no leader), leaderless parts first, then per leader.

        When one leader answers with records while others still long-poll, the others are woken,
        not cancelled: an actor may be acquiring records at that very moment, and acquired records
        must reach the client. Each call is entered in `in_flight` (call -> (actor, wake key)) until
        it is back, so a session that ends can wake it (share_wake) and wait for it; and the wait
        here is shielded, so calls whose client went away still finish and are accounted for.
        Once `closed()` (the session ended meanwhile) no further call acquires for it.
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

        # One MaxRecords over all the leaders (cluster/share/fetch_policy.py).
        budgets = dict(zip(per_actor, fetch_policy.split_budget(
            spec.max_records, [sum(1 for _, item in entries if item.fetch) for entries in per_actor.values()])))
        calls: dict[str, tuple[Any, str, asyncio.Future]] = {}
        for actor, entries in per_actor.items():
            calls[actor] = self._share_call(
                actor, spec, tuple(item for _, item in entries), budgets[actor],
                fetch_policy.poll_wait(budgets[actor], spec.max_wait_ms), in_flight,
            )

        pending = {task: actor for actor, (_, _, task) in calls.items()}
        woken = False
        while pending:
            done, _ = await asyncio.shield(asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED))
            for task in done:
                pending.pop(task)
            if pending and not woken and any(o and any(x.acquired for x in o) for o in (t.result() for t in done)):
                woken = True
                for actor in pending.values():
                    link, wake_key, _ = calls[actor]
                    if link is not None:
                        _fire(link.call(Endpoint.SHARE_WAKE, [wake_key]))
        answers = {actor: calls[actor][2].result() for actor in per_actor}
        if closed is None or not closed():
            await self._hand_on(spec, per_actor, budgets, answers, in_flight)

        stale = False
        for actor, entries in per_actor.items():
            answered = answers[actor]
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

    def _share_call(
        self, actor: str, spec: ShareFetchSpec, items: tuple[ShareItem, ...], max_records: int, max_wait_ms: int,
        in_flight: dict[Any, tuple[str, str]] | None,
    ) -> tuple[Any, str, asyncio.Future]:
        link = self.router.link(actor)
        wake_key = f"{spec.gateway}:{next(_wake_keys)}"
        call = ShareFetchCall(
            spec.group_id,
            spec.member_id,
            items,
            max_wait_ms=max_wait_ms,
            min_bytes=spec.min_bytes,
            max_bytes=spec.max_bytes,
            max_records=max_records,
            wake_key=wake_key,
            gateway=spec.gateway,
            record_limit=spec.record_limit,
        )
        task = asyncio.ensure_future(answer_or_none(link.call(Endpoint.SHARE_FETCH, call) if link is not None else None))
        if in_flight is not None:
            in_flight[task] = (actor, wake_key)
            task.add_done_callback(lambda t: in_flight.pop(t, None))
        return link, wake_key, task

    async def _hand_on(
        self,
        spec: ShareFetchSpec,
        per_actor: dict[str, list[tuple[int, ShareItem]]],
        budgets: dict[str, int],
        answers: dict[str, list[ShareOutcome] | None],
        in_flight: dict[Any, tuple[str, str]] | None,
    ) -> None:
        """What the leaders left of MaxRecords (and MaxBytes) goes to the partitions that a leader
        whose share ran out did not reach, in one more call per such leader that does not wait
        (fetch_policy.hand_on decides which, with how much)."""
        bytes_left, again = fetch_policy.hand_on(spec.max_records, spec.max_bytes, {
            actor: fetch_policy.LeaderAnswer(budgets[actor], [item.fetch for _, item in per_actor[actor]], answers[actor])
            for actor in per_actor
        })
        if not again:
            return
        calls, spec = {}, dataclasses.replace(spec, max_bytes=bytes_left)
        for actor, (positions, budget) in again.items():
            items = tuple(dataclasses.replace(per_actor[actor][j][1], acknowledgements=()) for j in positions)
            calls[actor] = self._share_call(actor, spec, items, budget, 0, in_flight)[2]
        await asyncio.shield(asyncio.wait(list(calls.values())))
        for actor, task in calls.items():
            outs, more = answers[actor], task.result()
            if more is None or outs is None:
                continue  # the next fetch finds the leader gone
            for j, out in zip(again[actor][0], more):
                target = outs[j]
                target.records, target.acquired = out.records, out.acquired
                if out.error_code != ErrorCode.none:
                    target.error_code, target.error_message = out.error_code, out.error_message

    def share_wake(self, actor: str, wake_keys: list[str]) -> None:
        """End these long polls on `actor` now (fire and forget: a dead actor has nothing to end)."""
        link = self.router.link(actor)
        if link is not None:
            _fire(link.call(Endpoint.SHARE_WAKE, wake_keys))

    async def share_release(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Release what the member holds on these partitions, on each leader in parallel."""
        await self._on_leaders(
            partitions, lambda link, items: link.call(Endpoint.SHARE_RELEASE, group_id, member_id, items)
        )

    async def share_evict(self, group_id: str, partitions: Iterable[tuple[str, int]], gateway: int) -> None:
        """Tell the leaders that `gateway` has no session of the group left on these partitions."""
        await self._on_leaders(
            partitions, lambda link, items: link.call(Endpoint.SHARE_EVICT, group_id, items, gateway=gateway)
        )

    async def _on_leaders(self, partitions: Iterable[tuple[str, int]], send: Any) -> None:
        per_actor: dict[str, list[tuple[str, int]]] = {}
        for topic, p in partitions:
            route = self.router.leader(topic, p)
            if route is not None:
                per_actor.setdefault(route[0], []).append((topic, p))
        refs = []
        for actor, items in per_actor.items():
            link = self.router.link(actor)
            if link is not None:
                refs.append(answer_or_none(send(link, items)))
        await asyncio.gather(*refs)


def _failed(outs: list[FetchOutcome] | None) -> bool:
    """A leader's fetch answer that ends the wait: its actor was gone, or a read hit an error."""
    return outs is None or any(o.error_code != ErrorCode.none for o in outs)


def _fire(call: Any) -> None:
    """A call whose answer nobody waits for (a wake): a dead actor has nothing to end."""
    asyncio.ensure_future(answer_or_none(call))
