"""SharePartitionManager: the share partitions one partition leader hosts (Kafka's name), the
entry point of ShareFetch, ShareAcknowledge, releases and evictions on the actor.

For every (share group, partition) it leads and that a share consumer fetched, it keeps a
SharePartitionHost and talks to the share coordinator through the Persister:
- the first fetch reads the durable state and resolves `share.auto.offset.reset` against the log;
- acknowledgements are applied first, written to the share coordinator, and answered only once
  the write is durable; a failed write rolls them back (write before success);
- then records are acquired at the share partitions' next fetch offsets; with nothing to
  acquire the call long-polls (cluster/delayed_fetch.py), woken early by new records, by
  records becoming available again, or by the gateway (`wake`);
- an expired acquisition lock releases its records and writes that too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate.offset_reset import OffsetReset
from sharestate.partition import SharePartitionConfig, SharePartitionState

from cluster.config import Config
from cluster.group_configs import parse
from cluster.delayed_fetch import FetchWakers, delayed_fetch
from cluster.partition import UserPartition
from cluster.share import fetch_policy
from cluster.share.host import SharePartitionHost, ShareKey
from cluster.share.requests import ShareFetchCall, ShareItem, ShareOutcome

Fetching = list[tuple[ShareItem, SharePartitionHost, ShareOutcome]]


class SharePartitionManager:
    def __init__(
        self,
        config: Config,
        persister: Any,
        clock: Any,
        wakeups: Any,
        leading: Callable[[str, int, int], UserPartition | None],
    ) -> None:
        self.persister = persister
        self.clock = clock
        self.wakeups = wakeups
        self._leading = leading
        self.reset: OffsetReset = config["share.auto.offset.reset"]
        self.partition_config = SharePartitionConfig(
            record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            delivery_count_limit=config["group.share.delivery.count.limit"],
            max_inflight_records=config["group.share.partition.max.record.locks"],
        )
        self.group_configs: dict[str, dict[str, str]] = {}  # group id -> overrides (cluster/group_configs.py)
        self.hosts: dict[ShareKey, SharePartitionHost] = {}
        self.wakers = FetchWakers()
        self.bytes_per_record: weakref.WeakKeyDictionary[SharePartitionHost, float] = weakref.WeakKeyDictionary()

    # -- per-group settings ------------------------------------------------------------------------

    def set_group_configs(self, group_configs: Mapping[str, Mapping[str, str]]) -> None:
        """The groups' overrides changed (the controller's push): share partitions here take the
        new lock duration and delivery count limit for what they acquire from now on (locks held
        keep their expiry); share.auto.offset.reset applies when a share partition initializes."""
        old, self.group_configs = self.group_configs, {g: dict(c) for g, c in group_configs.items()}
        for host in self.hosts.values():
            group_id = host.key[0]
            if old.get(group_id) != self.group_configs.get(group_id):
                host.share.config = self.partition_config_of(group_id)

    def partition_config_of(self, group_id: str) -> SharePartitionConfig:
        overrides = self.group_configs.get(group_id)
        if not overrides:
            return self.partition_config
        changes: dict[str, int] = {}
        if "share.record.lock.duration.ms" in overrides:
            changes["record_lock_duration_ms"] = parse("share.record.lock.duration.ms", overrides["share.record.lock.duration.ms"])
        if "share.delivery.count.limit" in overrides:
            changes["delivery_count_limit"] = parse("share.delivery.count.limit", overrides["share.delivery.count.limit"])
        return dataclasses.replace(self.partition_config, **changes)

    def reset_of(self, group_id: str) -> OffsetReset:
        text = self.group_configs.get(group_id, {}).get("share.auto.offset.reset")
        return parse("share.auto.offset.reset", text) if text is not None else self.reset

    # -- ShareFetch and ShareAcknowledge -------------------------------------------------------

    async def share_fetch(self, call: ShareFetchCall) -> list[ShareOutcome]:
        """Acknowledge, then acquire (waiting up to max_wait_ms for something to acquire)."""
        outcomes = [ShareOutcome() for _ in call.items]
        hosts: list[SharePartitionHost | None] = [None] * len(call.items)
        for i, item in enumerate(call.items):
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None:
                outcomes[i].fail(ErrorCode.not_leader_or_follower, None, bool(item.acknowledgements))
                continue
            host = hosts[i] = self._host(call.group_id, item, partition)
            host.gateways.add(call.gateway)
        readiness = await asyncio.gather(*(asyncio.shield(h.ready) if h else _nothing() for h in hosts))
        for i, ready in enumerate(readiness):
            if ready is not None and ready[0] != ErrorCode.none:
                outcomes[i].fail(ready[0], ready[1], bool(call.items[i].acknowledgements))
                hosts[i] = None
        # Acknowledgements change the in-memory state at once (their records pending until the
        # write is answered); the fetch then runs while the writes are on their way.
        writes = [
            host.acknowledge(call.member_id, item.acknowledgements, out)
            for item, host, out in zip(call.items, hosts, outcomes)
            if host is not None and item.acknowledgements
        ]
        fetching = [(i, h, o) for i, h, o in zip(call.items, hosts, outcomes) if h is not None and i.fetch]
        if fetching:
            try:
                await self._fetch(call, fetching)
            except BaseException:
                # The request failed (or was cancelled): its writes go on, nobody reads their answers.
                for write in writes:
                    write.close()
                raise
        await asyncio.gather(*writes)
        return outcomes

    async def _fetch(self, call: ShareFetchCall, fetching: Fetching) -> None:
        def watched() -> list[asyncio.Event]:
            events = []
            for item, host, _ in fetching:
                partition = self._leading(item.topic, item.partition, item.epoch)
                if partition is None or not host.active:
                    return []  # moved away meanwhile: the last round reports it
                events += (partition.data_appended, host.available)
            return events

        woken = self.wakers.register(call.wake_key)
        try:
            await delayed_fetch(call.max_wait_ms, lambda: self._acquire_all(call, fetching), watched, woken)
        finally:
            self.wakers.unregister(call.wake_key)
            self._acquire_all(call, fetching, report_only=True)

    def _acquire_all(self, call: ShareFetchCall, fetching: Fetching, report_only: bool = False) -> bool:
        """One round over the partitions, sharing max_records and max_bytes; True once any
        record was acquired (Kafka's DelayedShareFetch completes with what it acquired)."""
        records_left, bytes_left = fetch_policy.left_over(call.max_records, call.max_bytes, (o for _, _, o in fetching))
        acquired_any = any(o.acquired for _, _, o in fetching)
        for item, host, out in fetching:
            if out.error_code != ErrorCode.none or (report_only and out.acquired):
                continue
            partition = self._leading(item.topic, item.partition, item.epoch)
            if partition is None or not host.active:
                out.fail(ErrorCode.not_leader_or_follower, None, False)
                continue
            if report_only or out.acquired or records_left <= 0 or (acquired_any and bytes_left <= 0):
                continue
            per_record = self.bytes_per_record.get(host, fetch_policy.FIRST_BYTES_PER_RECORD)
            read_cap = fetch_policy.read_cap(records_left, bytes_left, per_record)
            records, acquired = host.acquire(partition, call.member_id, records_left, read_cap, call.record_limit)
            if acquired:
                count = fetch_policy.acquired_count(acquired)
                self.bytes_per_record[host] = len(records) / count
                out.records, out.acquired = records, tuple(acquired)
                records_left -= count
                bytes_left -= len(records)
                acquired_any = True
        return acquired_any

    # -- members and groups leaving -----------------------------------------------------------------

    def release(self, group_id: str, member_id: str, items: Sequence[tuple[str, int]]) -> int:
        """A member's share session closed (or its connection dropped): what it holds on these
        partitions is available again at once. Returns how many partitions had something."""
        hosts = [self.hosts.get((group_id, topic, partition)) for topic, partition in items]
        return sum(1 for host in hosts if host is not None and host.release(member_id))

    def wake(self, keys: Sequence[str]) -> None:
        """End these long polls now (the gateway has data from another leader to answer with)."""
        self.wakers.wake(keys)

    def evict(self, group_id: str, items: Sequence[tuple[str, int]], gateway: int = 0) -> None:
        """`gateway` has no share session of the group left: once no gateway has (Kafka's
        onGroupEmpty), forget the group's share partitions here, so that the next fetch reads the
        durable state afresh. Members on other gateways may still hold records meanwhile."""
        for topic, partition in items:
            host = self.hosts.get((group_id, topic, partition))
            if host is not None:
                host.gateways.discard(gateway)
                if not host.gateways:
                    self._drop(host)

    # -- leadership --------------------------------------------------------------------------------

    def drop_partition(self, topic: str, partition: int) -> None:
        """The partition moved away or is reloaded: forget its share partitions. Their locks die
        with them; the next leader reads the durable state, where acquisitions do not exist."""
        for key in [k for k in self.hosts if k[1] == topic and k[2] == partition]:
            self._drop(self.hosts[key])

    def _drop(self, host: SharePartitionHost) -> None:
        host.end(SharePartitionState.DROPPED)
        self._forget(host)

    def _forget(self, host: SharePartitionHost) -> None:
        if self.hosts.get(host.key) is host:
            del self.hosts[host.key]

    # -- initialization ------------------------------------------------------------------------------

    def _host(self, group_id: str, item: ShareItem, partition: UserPartition) -> SharePartitionHost:
        key = (group_id, item.topic, item.partition)
        host = self.hosts.get(key)
        if host is not None and host.leader_epoch == partition.epoch:
            return host
        if host is not None:
            self.drop_partition(item.topic, item.partition)
        host = SharePartitionHost.create(
            key, item.topic_id, partition.epoch, self.persister, self.clock, self.wakeups,
            self.partition_config_of(group_id), self._forget,
        )
        self.hosts[key] = host
        asyncio.ensure_future(self._initialize(host, partition))
        return host

    async def _initialize(self, host: SharePartitionHost, partition: UserPartition) -> None:
        await host.initialize(self.persister, lambda: self._reset_offset(partition, self.reset_of(host.key[0])))
        if host.state.final:
            self._forget(host)

    def _reset_offset(self, partition: UserPartition, reset: OffsetReset) -> int:
        log_ = partition.log
        if reset.strategy == "earliest":
            return log_.log_start_offset
        if reset.strategy == "by_duration":
            offset, _ = partition.offset_for(self.clock.now_ms() - reset.duration_ms)
            return partition.latest_offset() if offset < 0 else offset
        return partition.latest_offset()

    # -- views ---------------------------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        return [host.describe() for _, host in sorted(self.hosts.items()) if host.active]


async def _nothing() -> None:
    return None
