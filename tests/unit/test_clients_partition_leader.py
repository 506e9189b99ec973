"""PartitionLeaderClient's long polls without Ray: Fetch and ShareFetch fanned out over actors,
a dead actor, min bytes, waking the other leaders, and the share release/evict calls."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kio.schema.errors import ErrorCode
from ray.exceptions import RayActorError

from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords

from cluster.calls import FetchItem, FetchPartition, ShareFetchSpec, SharePartitionCall
from cluster.clients.links import ActorLink
from cluster.clients.partition_leader import PartitionLeaderClient
from cluster.partition import FetchOutcome
from cluster.share.requests import ShareOutcome


class Method:
    """An actor method as Ray shows it: `.remote(...)` gives what `answer` gives (a coroutine to await)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list[tuple] = []

    def remote(self, *args, **kwargs):
        self.calls.append(args + tuple(kwargs.values()))
        return self.answer(*args, **kwargs)


class FakeRouter:
    def __init__(self, leaders: dict, handles: dict) -> None:
        self.leaders, self.handles = leaders, handles
        self.refreshes = 0

    def leader(self, topic, partition):
        return self.leaders.get((topic, partition))

    def handle(self, actor):
        return self.handles.get(actor)

    def link(self, actor):
        """Through the handle, as outside Ray (no node: no channel)."""
        handle = self.handles.get(actor)
        return None if handle is None else ActorLink(handle, None)

    async def refresh(self):
        self.refreshes += 1



# -- Fetch ---------------------------------------------------------------------------------------------------


def fetch_actor(records: dict[int, bytes], poll: asyncio.Event | None = None):
    """Answers each item with `records[partition]`; a call with a wait and nothing to give
    long-polls until `poll` is set (or it is cancelled)."""

    async def fetch(items, wait, min_bytes, max_bytes):
        if wait and poll is not None and not any(records.get(item.partition) for item in items):
            await poll.wait()
        return [FetchOutcome(ErrorCode.none, 100, 0, records.get(item.partition, b"")) for item in items]

    return SimpleNamespace(fetch=Method(fetch))


def parts(*partitions):
    return [FetchPartition("t", p, 10 * p, 1000) for p in partitions]


def test_fetch_fans_out_one_call_per_actor_and_answers_in_the_callers_order():
    a, b = fetch_actor({0: b"aa", 2: b"cc"}), fetch_actor({1: b"bb"})
    router = FakeRouter({("t", 0): ("a", 3), ("t", 1): ("b", 4), ("t", 2): ("a", 3)}, {"a": a, "b": b})
    outcomes = asyncio.run(PartitionLeaderClient(router).fetch(parts(0, 1, 2), 500, 1, 10_000))
    assert [o.records for o in outcomes] == [b"aa", b"bb", b"cc"]
    # The data is there: one call each, without a wait (and so nothing to cancel and read again).
    assert a.fetch.calls == [([FetchItem("t", 0, 3, -1, 0, 1000), FetchItem("t", 2, 3, -1, 20, 1000)], 0, 1, 10_000)]
    assert b.fetch.calls == [([FetchItem("t", 1, 4, -1, 10, 1000)], 0, 1, 10_000)]


def test_data_on_one_actor_is_answered_without_waiting_for_the_idle_one():
    idle = asyncio.Event()  # never set: b never answers a call that waits
    a, b = fetch_actor({0: b"data"}), fetch_actor({}, idle)
    router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1)}, {"a": a, "b": b})
    outcomes = asyncio.run(PartitionLeaderClient(router).fetch(parts(0, 1), 30_000, 1, 10_000))
    assert [o.records for o in outcomes] == [b"data", b""]
    assert [call[1] for call in b.fetch.calls] == [0]


def test_with_nothing_anywhere_every_leader_long_polls_and_data_on_one_asks_the_other_again():
    async def main():
        arrived, idle = asyncio.Event(), asyncio.Event()  # idle is never set
        records: dict[int, bytes] = {}
        a, b = fetch_actor(records, arrived), fetch_actor({}, idle)
        router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1)}, {"a": a, "b": b})
        task = asyncio.ensure_future(PartitionLeaderClient(router).fetch(parts(0, 1), 30_000, 1, 10_000))
        while len(a.fetch.calls) < 2 or len(b.fetch.calls) < 2:
            await asyncio.sleep(0)
        records[0] = b"data"
        arrived.set()
        return await task, a, b

    outcomes, a, b = asyncio.run(main())
    assert [o.records for o in outcomes] == [b"data", b""]
    assert [call[1] for call in a.fetch.calls] == [0, 30_000]
    assert [call[1] for call in b.fetch.calls] == [0, 30_000, 0]


def test_less_than_min_bytes_from_one_actor_leaves_the_other_polling():
    async def main():
        polled = asyncio.Event()
        a, b = fetch_actor({0: b"abc"}), fetch_actor({}, polled)
        router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1)}, {"a": a, "b": b})
        task = asyncio.ensure_future(PartitionLeaderClient(router).fetch(parts(0, 1), 30_000, 10, 10_000))
        while len(a.fetch.calls) < 2 or len(b.fetch.calls) < 2:  # 3 bytes of the 10 asked: both long-poll
            await asyncio.sleep(0)
        for _ in range(5):  # let a's answer (3 bytes of the 10 asked) reach the client
            await asyncio.sleep(0)
        assert not task.done() and len(b.fetch.calls) == 2
        polled.set()
        return await task, b

    outcomes, b = asyncio.run(main())
    assert [o.records for o in outcomes] == [b"abc", b""] and [call[1] for call in b.fetch.calls] == [0, 30_000]


def failing_actor(error: ErrorCode):
    async def fetch(items, wait, min_bytes, max_bytes):
        return [FetchOutcome(error, -1, -1, b"") for _ in items]

    return SimpleNamespace(fetch=Method(fetch))


def test_an_error_on_one_leader_is_answered_at_once_without_long_polling_the_idle_one():
    # Kafka answers a fetch at once when reading hit an error (ReplicaManager.fetchMessages).
    idle = asyncio.Event()  # never set: b never answers a call that waits
    a, b = failing_actor(ErrorCode.offset_out_of_range), fetch_actor({}, idle)
    router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1)}, {"a": a, "b": b})
    outcomes = asyncio.run(asyncio.wait_for(PartitionLeaderClient(router).fetch(parts(0, 1), 30_000, 1, 10_000), 10))
    assert [o.error_code for o in outcomes] == [ErrorCode.offset_out_of_range, ErrorCode.none]
    assert [call[1] for call in a.fetch.calls] == [0] and [call[1] for call in b.fetch.calls] == [0]


def test_an_error_arriving_during_the_long_poll_ends_the_wait_of_the_others():
    async def main():
        became_fenced, idle = asyncio.Event(), asyncio.Event()  # idle is never set
        fenced = {"now": False}

        async def fetch(items, wait, min_bytes, max_bytes):
            if wait:
                await became_fenced.wait()
            error = ErrorCode.fenced_leader_epoch if fenced["now"] else ErrorCode.none
            return [FetchOutcome(error, -1, -1, b"") for _ in items]

        a, b = SimpleNamespace(fetch=Method(fetch)), fetch_actor({}, idle)
        router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1)}, {"a": a, "b": b})
        task = asyncio.ensure_future(PartitionLeaderClient(router).fetch(parts(0, 1), 30_000, 1, 10_000))
        while len(a.fetch.calls) < 2 or len(b.fetch.calls) < 2:
            await asyncio.sleep(0)
        fenced["now"] = True
        became_fenced.set()
        return await asyncio.wait_for(task, 10), b

    outcomes, b = asyncio.run(main())
    assert [o.error_code for o in outcomes] == [ErrorCode.fenced_leader_epoch, ErrorCode.none]
    assert [call[1] for call in b.fetch.calls] == [0, 30_000, 0]


def test_a_dead_actor_answers_not_leader_for_its_partitions_and_refreshes_the_map():
    async def dead(*_):
        raise RayActorError()

    a, gone = fetch_actor({0: b"x"}), SimpleNamespace(fetch=Method(dead))
    router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("gone", 1)}, {"a": a, "gone": gone})

    async def main():
        outcomes = await PartitionLeaderClient(router).fetch(parts(0, 1, 2), 0, 1, 10_000)
        await asyncio.sleep(0)  # the refresh runs in the background
        return outcomes

    outcomes = asyncio.run(main())
    assert [o.error_code for o in outcomes] == [ErrorCode.none] + [ErrorCode.not_leader_or_follower] * 2
    assert router.refreshes == 1


# -- ShareFetch ------------------------------------------------------------------------------------------------


class ShareActor:
    """share_fetch answers `acquired[partition]` records at once, or long-polls until woken by key."""

    def __init__(self, acquired: dict[int, int]) -> None:
        self.acquired = acquired
        self.polls: dict[str, asyncio.Event] = {}
        self.share_fetch = Method(self._fetch)
        self.share_wake = Method(self._wake)
        self.share_release = Method(self._done)
        self.share_evict = Method(self._done)

    async def _fetch(self, call):
        if call.max_wait_ms and not any(self.acquired.get(i.partition) for i in call.items):
            await self.polls.setdefault(call.wake_key, asyncio.Event()).wait()
        return [
            ShareOutcome(acquired=(AcquiredRecords(0, n - 1, 1),) if (n := self.acquired.get(i.partition)) else ())
            for i in call.items
        ]

    def _wake(self, keys):  # at once: the client does not await its wakes, as with Ray's fire and forget
        for key in keys:
            self.polls.setdefault(key, asyncio.Event()).set()

    async def _done(self, *_args, **_kwargs):
        return 0


TOPIC_ID = uuid.uuid4()
SPEC = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=30_000)


def share_parts(*partitions, acks=()):
    return [SharePartitionCall("t", p, TOPIC_ID, acks) for p in partitions]


def test_share_fetch_wakes_the_other_leaders_once_one_answers_with_records():
    a, b = ShareActor({0: 5}), ShareActor({})
    router = FakeRouter({("t", 0): ("a", 2), ("t", 1): ("b", 3)}, {"a": a, "b": b})
    in_flight: dict = {}

    async def main():
        task = asyncio.ensure_future(PartitionLeaderClient(router).share_fetch(SPEC, share_parts(0, 1), in_flight))
        while len(in_flight) < 2:
            await asyncio.sleep(0)
        assert sorted(actor for actor, _ in in_flight.values()) == ["a", "b"]
        return await task

    answers = asyncio.run(main())
    assert [(i, out.acquired, epoch) for i, (out, epoch) in answers.items()] == [
        (0, (AcquiredRecords(0, 4, 1),), 2), (1, (), 3)]
    (call,) = b.share_fetch.calls[0]
    assert b.share_wake.calls == [([call.wake_key],)] and call.wake_key.startswith("7:")
    assert (call.group_id, call.member_id, call.gateway, call.items[0].epoch) == ("g", "m", 7, 3)
    assert in_flight == {}


def test_share_fetch_at_a_dead_or_missing_leader_fails_the_partition_and_its_acknowledgements():
    async def dead(_call):
        raise RayActorError()

    acks = (AcknowledgementBatch(0, 0, (1,)),)
    router = FakeRouter({("t", 0): ("gone", 4)}, {"gone": SimpleNamespace(share_fetch=Method(dead))})

    async def main():
        answers = await PartitionLeaderClient(router).share_fetch(SPEC, share_parts(0, 1, acks=acks))
        await asyncio.sleep(0)
        return answers

    answers = asyncio.run(main())
    (unrouted, no_epoch), (gone, epoch) = answers[1], answers[0]
    assert list(answers) == [1, 0]  # leaderless parts first, then per leader
    assert (unrouted.error_code, unrouted.acknowledge_error_code, no_epoch) == (
        ErrorCode.not_leader_or_follower, ErrorCode.not_leader_or_follower, -1)
    assert (gone.error_code, gone.error_message, gone.acknowledge_error_code, epoch) == (
        ErrorCode.not_leader_or_follower, "the partition's leader is gone", ErrorCode.not_leader_or_follower, 4)
    assert router.refreshes == 1


def test_release_and_evict_go_once_to_each_leader_and_skip_partitions_without_one():
    a, b = ShareActor({}), ShareActor({})
    router = FakeRouter({("t", 0): ("a", 1), ("t", 1): ("b", 1), ("t", 2): ("a", 1)}, {"a": a, "b": b})
    client = PartitionLeaderClient(router)
    asyncio.run(client.share_release("g", "m", [("t", 0), ("t", 1), ("t", 2), ("t", 9)]))
    asyncio.run(client.share_evict("g", [("t", 1)], gateway=7))
    assert a.share_release.calls == [("g", "m", [("t", 0), ("t", 2)])]
    assert b.share_release.calls == [("g", "m", [("t", 1)])]
    assert b.share_evict.calls == [("g", [("t", 1)], 7)] and a.share_evict.calls == []

    async def wake():
        client.share_wake("b", ["7:1"])
        client.share_wake("gone", ["7:2"])  # no actor: nothing to wake
        await asyncio.sleep(0)

    asyncio.run(wake())
    assert b.share_wake.calls == [(["7:1"],)]


# -- ShareFetch: one MaxRecords budget over the leaders ------------------------------------------------------


class BudgetActor:
    """Acquires from `available[partition]` in item order, up to the call's max_records in all
    (record by record, so the cap is exact here), as SharePartitionManager does."""

    def __init__(self, available: dict[int, int]) -> None:
        self.available = dict(available)
        self.share_fetch = Method(self._fetch)
        self.share_wake = Method(lambda keys: None)

    async def _fetch(self, call):
        left, outs = call.max_records, []
        for item in call.items:
            n = min(self.available.get(item.partition, 0), left) if item.fetch else 0
            self.available[item.partition] = self.available.get(item.partition, 0) - n
            left -= n
            outs.append(ShareOutcome(records=b"r" * n, acquired=(AcquiredRecords(0, n - 1, 1),) if n else ()))
        return outs


def acquired_of(answers) -> dict[int, int]:
    return {i: sum(a.last_offset - a.first_offset + 1 for a in out.acquired) for i, (out, _) in answers.items()}


def test_share_fetch_shares_one_max_records_budget_over_the_leaders():
    a, b = BudgetActor({0: 1000, 2: 1000}), BudgetActor({1: 1000, 3: 1000})
    router = FakeRouter({("t", p): ("ab"[p % 2], 1) for p in range(4)}, {"a": a, "b": b})
    spec = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=0, max_records=101)
    answers = asyncio.run(PartitionLeaderClient(router).share_fetch(spec, share_parts(0, 1, 2, 3)))
    assert sum(acquired_of(answers).values()) == 101
    # Split by the partitions each leader fetches, the odd record to the leader named first.
    assert [c[0].max_records for c in a.share_fetch.calls] == [51]
    assert [c[0].max_records for c in b.share_fetch.calls] == [50]


def test_what_one_leader_leaves_of_its_share_goes_to_the_partitions_another_did_not_reach():
    acks = (AcknowledgementBatch(0, 0, (1,)),)
    a, b = BudgetActor({0: 1000, 2: 1000}), BudgetActor({3: 10})
    router = FakeRouter({("t", p): ("ab"[p % 2], 1) for p in range(4)}, {"a": a, "b": b})
    spec = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=0, max_records=100)
    answers = asyncio.run(PartitionLeaderClient(router).share_fetch(spec, share_parts(0, 1, 2, 3, acks=acks)))
    assert acquired_of(answers) == {0: 50, 1: 0, 2: 40, 3: 10}
    first, second = (c[0] for c in a.share_fetch.calls)
    assert (first.max_records, [i.partition for i in first.items]) == (50, [0, 2])
    # Only the partition the first call did not reach, without the acknowledgements already sent, at once.
    assert (second.max_records, second.max_wait_ms, second.max_bytes) == (40, 0, spec.max_bytes - 60)
    assert [(i.partition, i.acknowledgements, i.fetch) for i in second.items] == [(2, (), True)]
    assert len(b.share_fetch.calls) == 1


def test_a_leader_left_without_a_share_of_a_small_budget_does_not_long_poll():
    a, b = BudgetActor({0: 5}), BudgetActor({1: 5})
    router = FakeRouter({("t", p): ("ab"[p % 2], 1) for p in range(2)}, {"a": a, "b": b})
    spec = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=30_000, max_records=1)
    answers = asyncio.run(PartitionLeaderClient(router).share_fetch(spec, share_parts(0, 1)))
    assert acquired_of(answers) == {0: 1, 1: 0}
    (call,) = b.share_fetch.calls[0]
    assert (call.max_records, call.max_wait_ms) == (0, 0)


def test_no_budget_is_handed_on_once_the_session_has_ended():
    a, b = BudgetActor({0: 1000, 2: 1000}), BudgetActor({3: 10})
    router = FakeRouter({("t", p): ("ab"[p % 2], 1) for p in range(4)}, {"a": a, "b": b})
    spec = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=0, max_records=100)
    answers = asyncio.run(PartitionLeaderClient(router).share_fetch(spec, share_parts(0, 1, 2, 3), closed=lambda: True))
    assert acquired_of(answers) == {0: 50, 1: 0, 2: 0, 3: 10}
    assert len(a.share_fetch.calls) == 1  # its release may have run at the leader already


def test_no_budget_is_handed_on_once_the_answers_fill_max_bytes():
    a, b = BudgetActor({0: 1000, 2: 1000}), BudgetActor({3: 10})
    router = FakeRouter({("t", p): ("ab"[p % 2], 1) for p in range(4)}, {"a": a, "b": b})
    spec = ShareFetchSpec("g", "m", gateway=7, max_wait_ms=0, max_records=100, max_bytes=60)
    answers = asyncio.run(PartitionLeaderClient(router).share_fetch(spec, share_parts(0, 1, 2, 3)))
    assert acquired_of(answers) == {0: 50, 1: 0, 2: 0, 3: 10} and len(a.share_fetch.calls) == 1
