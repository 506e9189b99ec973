"""The replication simulations' network (replication_world's state machines, log_replication_world's
real logs): messages between replicas and the controller, delivered one at a time in an order the
world's seeded random picks, dropped, duplicated (a call retried after its answer was lost, as Ray
may), and cut by isolations, which leave the controller's links up (it is the metadata quorum;
isolating a replica from it is a session that lapses, which the worlds model as fencing)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

CONTROLLER = 100  # the controller's address on the network


@dataclass
class Message:
    src: int
    dst: int
    kind: str  # fetch, fetched, alter, altered
    body: tuple


class Network:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = []

    def __len__(self) -> int:
        return len(self.messages)

    def send(self, message: Message) -> None:
        self.messages.append(message)

    def forget(self, dst: int) -> None:
        """A crashed replica's inbox: what was on its way to it is lost with the process."""
        self.messages = [m for m in self.messages if m.dst != dst]

    def take(self, running: Callable[[int], bool]) -> Message | None:
        """A message to deliver now, chosen at random among those whose receiver runs."""
        ready = [m for m in self.messages if m.dst == CONTROLLER or running(m.dst)]
        if not ready:
            return None
        m = self.rng.choice(ready)
        self.messages.remove(m)
        return m

    @staticmethod
    def cut(m: Message, isolated_until: Callable[[int], float], now: float) -> bool:
        """Whether an isolation drops `m` (the controller's links stay up)."""
        if CONTROLLER in (m.src, m.dst):
            return False
        return isolated_until(m.src) > now or isolated_until(m.dst) > now

    def drop(self) -> Message | None:
        if not self.messages:
            return None
        return self.messages.pop(self.rng.randrange(len(self.messages)))

    def duplicate(self) -> Message | None:
        if not self.messages:
            return None
        m = self.rng.choice(self.messages)
        self.messages.append(Message(m.src, m.dst, m.kind, m.body))
        return m
