"""A gateway's end of the parked-answer channels (cluster/actors/answer_channels.py).

An operation that may park (JoinGroup, SyncGroup) is started with a ticket; its answer comes on
the long-lived stream this gateway keeps open to the coordinator actor that started it, one
stream per actor incarnation. When that stream fails (the actor died) every ticket it owed fails
with the actor's error, as a failed call would, and the caller retries or answers the error.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from ray.exceptions import RayActorError



@dataclass(slots=True)
class _Channel:
    incarnation: str
    owed: set[int] = field(default_factory=set)
    reader: asyncio.Task | None = None


class ParkedAnswers:
    def __init__(self, router: Any) -> None:
        self.router = router
        self.channel_id = uuid.uuid4().hex
        self._tickets = itertools.count()
        self._waiting: dict[int, asyncio.Future] = {}
        self._channels: dict[tuple[str, str], _Channel] = {}

    def expect(self) -> tuple[int, asyncio.Future]:
        """A ticket to start an operation with, and the future its answer will settle."""
        ticket = next(self._tickets)
        future = self._waiting[ticket] = asyncio.get_running_loop().create_future()
        return ticket, future

    def started(self, ticket: int, actor: str, incarnation: str) -> None:
        """The actor (this incarnation of it) started the ticket's operation: it owes the answer."""
        key = (actor, incarnation)
        channel = self._channels.get(key)
        if channel is None:
            handle = self.router.handle(actor)
            if handle is None:
                self._settle(ticket, RayActorError())
                return
            channel = self._channels[key] = _Channel(incarnation)
            channel.reader = asyncio.ensure_future(self._read(key, channel, handle))
        if ticket in self._waiting:
            channel.owed.add(ticket)

    def forget(self, ticket: int) -> None:
        """The caller stopped waiting (cancelled, or answered otherwise): a late answer is dropped."""
        self._waiting.pop(ticket, None)

    def close(self) -> None:
        for channel in self._channels.values():
            if channel.reader is not None:
                channel.reader.cancel()
        self._channels.clear()

    async def _read(self, key: tuple[str, str], channel: _Channel, handle: Any) -> None:
        error: Exception = RayActorError()
        try:
            stream = handle.answers_stream.options(num_returns="streaming").remote(self.channel_id)
            async for ref in stream:
                incarnation, answers = await ref
                if incarnation != channel.incarnation:
                    break  # the name now belongs to a successor: the one that owed these is gone
                for ticket, outcome in answers:
                    channel.owed.discard(ticket)
                    self._settle(ticket, outcome)
        except Exception as exc:
            error = exc
        except asyncio.CancelledError:
            # Closed with the gateway, or the actor went away under the await: as a failed call.
            if self._channels.get(key) is not channel:
                raise
        finally:
            if self._channels.get(key) is channel:
                del self._channels[key]
            for ticket in channel.owed:
                self._settle(ticket, error)
            channel.owed.clear()

    def _settle(self, ticket: int, outcome: Any) -> None:
        future = self._waiting.pop(ticket, None)
        if future is None or future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
