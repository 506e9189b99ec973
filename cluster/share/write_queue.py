"""ShareStateWriteQueue: the writes of one share partition's state, in order.

Writes go out one at a time, and those queued meanwhile go together in the next write: the
start offset written never moves backwards (each is computed when its write is sent, once every
earlier write is answered), and a busy partition costs one call per round trip, not one per
acknowledgement. An answered write commits or rolls back the transitions it carried; a fenced
answer (a newer leader, or the group's state reset) ends this copy of the share partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from sharestate import messages as m
from sharestate.partition import SharePartition, StateWrite

log = logging.getLogger(__name__)

FENCED = frozenset({ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch})


class ShareStateWriteQueue:
    def __init__(
        self,
        share: SharePartition,
        persister: Any,
        leader_epoch: int,
        on_change: Callable[[], None],
        on_fenced: Callable[[], None],
    ) -> None:
        self.share = share
        self.persister = persister
        self.leader_epoch = leader_epoch
        self._on_change = on_change  # records may have become available
        self._on_fenced = on_fenced
        self._queue: list[tuple[StateWrite, asyncio.Future | None]] = []
        self.sending = False
        self.sent = 0

    def submit(self, write: StateWrite | None, answer: bool = False) -> asyncio.Future | None:
        """Queue a write; with `answer`, a future of (error code, message) once it is answered."""
        if write is None:
            return None
        future = asyncio.get_running_loop().create_future() if answer else None
        self._queue.append((write, future))
        if not self.sending:
            self.sending = True
            asyncio.ensure_future(self._drain())
        self._on_change()  # released records may be acquirable already
        return future

    async def _drain(self) -> None:
        share = self.share
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                transitions = [w.transition for w, _ in batch if w.transition is not None]
                request = m.WriteShareGroupStateRequest(
                    share.group_id,
                    share.topic_id,
                    share.partition,
                    state_epoch=share.state_epoch,
                    leader_epoch=self.leader_epoch,
                    start_offset=share.persisted_start_offset(transitions),
                    delivery_complete_count=share.delivery_complete_count(transitions),
                    state_batches=tuple(b for w, _ in batch for b in w.batches),
                )
                try:
                    response = await self.persister.write(request)
                except Exception as exc:
                    log.exception("writing share state of %s failed", _name(share))
                    response = m.WriteShareGroupStateResponse(ErrorCode.unknown_server_error, str(exc))
                self.sent += 1
                committed = response.error_code == ErrorCode.none
                for write, future in batch:
                    if write.transition is not None:
                        follow_up = share.complete(write.transition, committed)
                        if follow_up is not None:
                            self._queue.append((follow_up, None))
                    if future is not None and not future.done():
                        future.set_result((response.error_code, response.error_message))
                if response.error_code in FENCED:
                    log.warning("share state of %s fenced: %s", _name(share), response.error_message)
                    self._on_fenced()
                elif not committed:
                    log.warning("share state write of %s failed: %s", _name(share), response.error_code.name)
                self._on_change()
        finally:
            self.sending = False


def _name(share: SharePartition) -> str:
    return f"{share.group_id}/{share.topic_id}-{share.partition}"
