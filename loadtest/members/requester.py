"""A machine with no protocol of its own: it sends what its owner asks and hands back the answer.

The experiment's monitor and runner use it for one-off requests (DescribeGroups, ListOffsets,
CreateTopics) through the same drivers, connections and observations as every member.
"""

from __future__ import annotations

from typing import Any

from loadtest.members.machine import Broker, Machine, Millis, Reply


class Requester(Machine):
    role = "runner"

    def start(self, now: Millis) -> None:
        pass

    def request(self, now: Millis, api: int, version: int, body: dict[str, Any], to: Broker, on_reply: Reply,
                timeout_ms: float = 30_000, lane: str = "admin") -> int:
        return self.send(now, api, version, body, to, lane, on_reply, timeout_ms=timeout_ms)
