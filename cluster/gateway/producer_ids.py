"""A gateway's producer ids: handed out one by one from a block the controller allocated.

Kafka's brokers do the same (`RPCProducerIdManager`): each asks the controller for a block of
1000 ids, serves InitProducerId from it without a round trip, and asks for the next block once
90% of the current one is used (`PidPrefetchThreshold`), so that a busy gateway rarely waits.
When the block is used up and the next has not arrived, callers wait for it; if the controller
cannot be reached the caller gets `NoProducerIdBlock` and the client a retriable error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cluster.metadata import ProducerIdBlock

log = logging.getLogger(__name__)

PREFETCH_THRESHOLD = 0.9
CONTROLLER_TIMEOUT_S = 10


class NoProducerIdBlock(Exception):
    """The controller did not hand out a block (unreachable, or its write failed)."""


class ProducerIdAllocator:
    def __init__(self, request_block: Callable[[], Awaitable[ProducerIdBlock]]) -> None:
        self._request_block = request_block
        self.block: ProducerIdBlock | None = None
        self.next_producer_id = -1
        # The block being fetched (or fetched ahead and not yet in use), shared by every waiter.
        self._fetching: asyncio.Task | None = None

    async def next_id(self) -> int:
        while True:
            block = self.block
            if block is not None and self.next_producer_id <= block.last_producer_id:
                producer_id = self.next_producer_id
                self.next_producer_id += 1
                if producer_id == block.first_producer_id + int(block.size * PREFETCH_THRESHOLD):
                    self._fetch()
                return producer_id
            fetching = self._fetch()
            new_block = await asyncio.shield(fetching)
            if self._fetching is fetching:  # the first waiter to wake installs it; the others claim from it
                self._fetching = None
                if new_block is None:
                    raise NoProducerIdBlock("the controller did not hand out producer ids; retry")
                self.block, self.next_producer_id = new_block, new_block.first_producer_id
            elif new_block is None:
                raise NoProducerIdBlock("the controller did not hand out producer ids; retry")

    def _fetch(self) -> asyncio.Task:
        if self._fetching is None:
            self._fetching = asyncio.ensure_future(self._fetch_block())
        return self._fetching

    async def _fetch_block(self) -> ProducerIdBlock | None:
        try:
            return await self._request_block()
        except Exception as exc:  # a dead or slow controller: the client retries InitProducerId
            log.warning("no producer id block from the controller: %s", exc)
            return None


def from_controller(controller: Any, gateway_name: str) -> ProducerIdAllocator:
    """An allocator whose blocks come from the controller (a ControllerClient)."""

    async def request_block() -> ProducerIdBlock:
        reply = asyncio.ensure_future(controller.allocate_producer_ids(gateway_name))
        return await asyncio.wait_for(reply, CONTROLLER_TIMEOUT_S)

    return ProducerIdAllocator(request_block)
