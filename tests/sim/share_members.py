"""Share consumers as the simulation drives them, and the ledger of what they were told.

A member has at most one ShareFetch outstanding. What an answer says it acquired becomes a
*hold*: valid while the host that handed it out still serves the partition and the acquisition
lock, counted from when the request was sent (never later than the real lock, so a hold ends no
later than it really does), has not expired. A successful ACCEPT or REJECT makes its offsets
*done* for good: no share partition may deliver them again, whatever crashes follow.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sharestate.inflight import AcknowledgeType as A
from sharestate.state_batches import AcknowledgementBatch

ACK_KINDS = (A.ACCEPT, A.ACCEPT, A.ACCEPT, A.RELEASE, A.REJECT)


@dataclass
class Hold:
    member: str
    host: Any  # the SharePartitionHost that acquired it for the member
    since: int  # when the request was sent
    delivery_count: int


@dataclass
class ShareMember:
    name: str
    session_open: bool = False
    outstanding: Any = None  # the ShareFetch in flight
    sent: dict[int, list[AcknowledgementBatch]] = field(default_factory=dict)  # per partition index


@dataclass
class Ledger:
    partitions: int
    lock_ms: int
    holds: dict[tuple[int, int], Hold] = field(default_factory=dict)  # (partition index, offset)
    done: list[set[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.done = [set() for _ in range(self.partitions)]

    def valid(self, hold: Hold | None, current_host: Any, now: int) -> bool:
        return (
            hold is not None
            and hold.host is current_host
            and current_host is not None
            and current_host.active
            and now < hold.since + self.lock_ms
        )

    def held_by(self, member: str, tpi: int, current_host: Any, now: int) -> list[int]:
        return sorted(
            o for (i, o), hold in self.holds.items()
            if i == tpi and hold.member == member and self.valid(hold, current_host, now)
        )

    def drop_member(self, member: str) -> None:
        for key in [k for k, h in self.holds.items() if h.member == member]:
            del self.holds[key]


def ranges_of(offsets: list[int], rng: random.Random) -> list[AcknowledgementBatch]:
    """Acknowledge some of the held offsets: runs of consecutive ones, each with one type."""
    out: list[AcknowledgementBatch] = []
    run: list[int] = []
    kind = rng.choice(ACK_KINDS)
    for offset in offsets:
        if rng.random() < 0.3:
            continue
        if run and (offset != run[-1] + 1 or rng.random() < 0.3):
            out.append(AcknowledgementBatch(run[0], run[-1], (int(kind),)))
            run, kind = [], rng.choice(ACK_KINDS)
        run.append(offset)
    if run:
        out.append(AcknowledgementBatch(run[0], run[-1], (int(kind),)))
    return out


def odd_ack(
    member: ShareMember, tpi: int, start: int | None, end: int | None, held: list[int], rng: random.Random
) -> list[AcknowledgementBatch]:
    """A duplicated acknowledgement, one below the start offset, one from a held offset to a later
    one over whatever lies between (others' records, or a gap never fetched since recovery, which
    is skipped), or one of records not held."""
    roll = rng.random()
    earlier = member.sent.get(tpi)
    if roll < 0.4 and earlier:
        return [rng.choice(earlier)]
    if roll < 0.7 and start:
        lo = rng.randint(0, start - 1)
        return [AcknowledgementBatch(lo, rng.randint(lo, start - 1), (int(rng.choice(ACK_KINDS)),))]
    if roll < 0.85 and len(held) >= 2:
        lo, hi = sorted(rng.sample(held, 2))
        return [AcknowledgementBatch(lo, hi, (int(rng.choice(ACK_KINDS)),))]
    if start is not None and end is not None and end >= start:
        offset = rng.randint(start, end)
        return [AcknowledgementBatch(offset, offset, (int(rng.choice(ACK_KINDS)),))]
    return []
