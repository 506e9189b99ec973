"""The experiment's monitor: how the groups look from outside, about once a second.

One DescribeGroups for every classic group, one ConsumerGroupDescribe for every group of the
KIP-848 consumer protocol (DescribeGroups answers GROUP_ID_NOT_FOUND for those, as Kafka's does)
and one ShareGroupDescribe for every share group per round (any gateway routes them to the
coordinators), each answer a `group_state` row. At the end, `progress` reads where each group has
got to: committed offsets (OffsetFetch) for classic and consumer groups, the durable start offsets
(DescribeShareGroupOffsets) for share groups.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.drivers.aio import AsyncioDriver
from loadtest.members.errors import error_name
from loadtest.members.machine import Broker

TP = tuple[str, int]


class Monitor:
    def __init__(self, driver: AsyncioDriver, brokers: list[Broker], classic: list[str], share: list[str],
                 emit: Any, interval_s: float = 0.5, consumer: list[str] = ()) -> None:
        self.driver = driver
        self.brokers = brokers
        self.classic = classic
        self.consumer = list(consumer)
        self.share = share
        self.emit = emit
        self.interval_s = interval_s
        self.latest: dict[str, str] = {}  # group -> last state seen
        self._turn = 0

    def _broker(self) -> Broker:
        self._turn += 1
        return self.brokers[self._turn % len(self.brokers)]

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.gather(self.poll_once(), asyncio.sleep(self.interval_s))

    async def poll_once(self) -> None:
        calls = []
        if self.classic:
            calls.append(self._describe(ApiKey.DESCRIBE_GROUPS, 5, {"groups": self.classic,
                                        "include_authorized_operations": False}, "classic"))
        if self.consumer:
            calls.append(self._describe(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": self.consumer,
                                        "include_authorized_operations": False}, "consumer"))
        if self.share:
            calls.append(self._describe(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": self.share,
                                        "include_authorized_operations": False}, "share"))
        await asyncio.gather(*calls)

    async def _describe(self, api: int, version: int, body: dict[str, Any], role: str) -> None:
        sent = self.driver.now()
        response = await self.driver.call(self._broker(), api, version, body, timeout_ms=5_000)
        now = self.driver.now()
        names = body.get("groups") or body.get("group_ids")
        if response is None:
            for group in names:
                self.emit({"time": now, "kind": "group_state", "role": role, "group": group, "request_time": sent,
                           "error": "NETWORK_EXCEPTION"})
            return
        for g in response.groups:
            row = {"time": now, "kind": "group_state", "role": role, "group": g.group_id, "request_time": sent,
                   "error": error_name(g.error_code), "detail": {"members": len(g.members)}}
            if g.error_code == ErrorCode.none:
                row["state"] = g.group_state
                if role != "classic":
                    row["generation"] = g.group_epoch
                self.latest[g.group_id] = g.group_state
            self.emit(row)

    async def committed(self, group: str, topics: dict[str, int]) -> dict[TP, int] | None:
        body = {"groups": [{"group_id": group, "topics": [{"name": t, "partition_indexes": list(range(n))}
                                                          for t, n in sorted(topics.items())]}],
                "require_stable": False}
        response = await self.driver.call(self._broker(), ApiKey.OFFSET_FETCH, 8, body, timeout_ms=5_000)
        if response is None or response.groups[0].error_code != ErrorCode.none:
            return None
        return {(t.name, p.partition_index): p.committed_offset for t in response.groups[0].topics for p in t.partitions
                if p.error_code == ErrorCode.none}

    async def share_start_offsets(self, group: str, topics: dict[str, int]) -> dict[TP, int] | None:
        body = {"groups": [{"group_id": group, "topics": [{"topic_name": t, "partitions": list(range(n))}
                                                          for t, n in sorted(topics.items())]}]}
        response = await self.driver.call(self._broker(), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body, timeout_ms=5_000)
        if response is None or response.groups[0].error_code != ErrorCode.none:
            return None
        return {(t.topic_name, p.partition_index): p.start_offset for t in response.groups[0].topics for p in t.partitions
                if p.error_code == ErrorCode.none}

    async def end_offsets(self, topics: dict[str, int]) -> dict[TP, int] | None:
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                                      for p in range(n)]} for t, n in sorted(topics.items())]}
        response = await self.driver.call(self._broker(), ApiKey.LIST_OFFSETS, 7, body, timeout_ms=10_000)
        if response is None:
            return None
        out = {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions
               if p.error_code == ErrorCode.none}
        return out if len(out) == sum(topics.values()) else None
