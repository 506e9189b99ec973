"""What many light members share: bootstrap, metadata and coordinator lookups over one connection."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.client.connection import Connection

RETRIABLE_COORDINATOR_ERRORS = (
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
)


@dataclass(frozen=True)
class TopicMetadata:
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    leaders: dict[Any, dict[int, int]]  # topic id -> partition -> leader node id
    names: dict[Any, str]  # topic id -> name


class ClusterClient:
    def __init__(self, bootstrap: str, client_id: str = "raygroups-load") -> None:
        self.bootstrap = [(h, int(p)) for h, p in (a.strip().rsplit(":", 1) for a in bootstrap.split(","))]
        self.client_id = client_id
        self._control: Connection | None = None
        self._partitions: dict[str, tuple[float, int]] = {}
        self._by_id: tuple[float, TopicMetadata] | None = None

    async def control(self) -> Connection:
        if self._control is None or self._control.closed:
            host, port = self.bootstrap[0]
            self._control = await Connection.open(host, port, self.client_id)
        return self._control

    async def open(self, host: str, port: int) -> Connection:
        return await Connection.open(host, port, self.client_id)

    async def find_coordinator(self, key: str, key_type: int = 0) -> tuple[str, int] | None:
        response = await (await self.control()).call(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}
        )
        (entry,) = response.coordinators
        if entry.error_code != ErrorCode.none:
            return None
        return entry.host, entry.port

    async def coordinator_connection(self, group_id: str, backoff_ms: int = 100) -> Connection:
        """A new connection to the group's coordinator, looking it up until one is found."""
        while True:
            address = await self.find_coordinator(group_id)
            if address is not None:
                return await self.open(*address)
            await asyncio.sleep(backoff_ms / 1000)

    async def partitions_for(self, topics: list[str], max_age_s: float = 5.0) -> dict[str, int]:
        now = time.monotonic()
        missing = [t for t in topics if t not in self._partitions or now - self._partitions[t][0] > max_age_s]
        if missing:
            response = await (await self.control()).call(
                ApiKey.METADATA, 12, {"topics": [{"name": t, "topic_id": None} for t in missing], "allow_auto_topic_creation": False}
            )
            for t in response.topics:
                if t.error_code == ErrorCode.none:
                    self._partitions[t.name] = (now, len(t.partitions))
        return {t: self._partitions[t][1] for t in topics if t in self._partitions}

    async def topic_metadata_by_id(self, topic_ids: list[Any], max_age_s: float = 5.0) -> TopicMetadata:
        """Leaders and brokers for topics named by id (as share assignments name them), cached."""
        now = time.monotonic()
        cached = self._by_id
        if cached is not None and now - cached[0] <= max_age_s and all(t in cached[1].leaders for t in topic_ids):
            return cached[1]
        response = await (await self.control()).call(
            ApiKey.METADATA, 12, {"topics": [{"name": None, "topic_id": t} for t in topic_ids], "allow_auto_topic_creation": False}
        )
        meta = TopicMetadata(
            brokers={b.node_id: (b.host, b.port) for b in response.brokers},
            leaders={
                t.topic_id: {p.partition_index: p.leader_id for p in t.partitions if p.leader_id >= 0}
                for t in response.topics
                if t.error_code == ErrorCode.none
            },
            names={t.topic_id: t.name for t in response.topics if t.error_code == ErrorCode.none},
        )
        self._by_id = (now, meta)
        return meta

    async def create_topic(self, name: str, partitions: int) -> Any:
        return await (await self.control()).call(
            ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}]}
        )

    async def close(self) -> None:
        if self._control is not None:
            await self._control.close()
