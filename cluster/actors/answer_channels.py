"""Answers to parked operations (JoinGroup, SyncGroup), one long-lived channel per gateway.

A stream per gateway tick carried each tick's answers in its own Ray item, so the 1,001 JoinGroup
answers that one completed join phase releases crossed in as many items as there were ticks that
carried joins. Here a gateway opens one stream per coordinator actor and keeps it; whatever is
answered while the stream's reader is busy or asleep goes out as the next single item, so answers
released together (in one shard pass) travel together.

Answers for a channel not connected are kept until it connects: a gateway's call and its
channel's opening race, and a channel that is reopened takes over what its predecessor had not
sent. (A gateway that never comes back leaves the answers it was owed: at most one per operation
it had started.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class _Outbox:
    answers: list[tuple[int, Any]] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reader: object | None = None  # the stream that sends it; a newer one replaces it


class AnswerChannels:
    def __init__(self) -> None:
        self._outboxes: dict[str, _Outbox] = {}

    def put(self, channel: str, ticket: int, outcome: Any) -> None:
        outbox = self._outboxes.get(channel)
        if outbox is None:
            outbox = self._outboxes[channel] = _Outbox()
        outbox.answers.append((ticket, outcome))
        outbox.ready.set()

    async def stream(self, channel: str, incarnation: str) -> AsyncIterator[tuple[str, list[tuple[int, Any]]]]:
        """(incarnation, answers) items: the first at once and maybe empty (the gateway learns whom it
        reached), then one item per wake-up with every answer put since the last."""
        outbox = self._outboxes.get(channel)
        if outbox is None:
            outbox = self._outboxes[channel] = _Outbox()
        me = object()
        if outbox.reader is not None:
            outbox.ready.set()  # the previous reader wakes, sees it was replaced and ends
        outbox.reader = me
        try:
            while True:
                answers, outbox.answers = outbox.answers, []
                outbox.ready.clear()
                yield incarnation, answers
                await outbox.ready.wait()
                if outbox.reader is not me:
                    return
        finally:
            if outbox.reader is me:
                outbox.reader = None
                if not outbox.answers:
                    del self._outboxes[channel]
