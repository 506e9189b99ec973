"""double-ownership: a partition owned by two members of a consumer-protocol group at once.

KIP-848's promise (SPEC.md §3b): the coordinator gives a partition to a member only after its
previous owner's heartbeat stopped listing it, and an owner stops listing a partition only once it
has revoked it (committed, stopped fetching, forgotten). So the members' own reports decide: each
consumer member writes an `assignment` row whenever what it owns changes (the owned partitions,
the reason `assigned`, `revoked` or `lost`), and a member owns a partition from the row that adds
it to the row that takes it away. A member that stopped without such a row (its leave timed out
in the driver, or it crashed) owns nothing after its `member_stop`: it reads nothing more. One
clock stamps every row (the runner's), and each step of a handover is causally after the one
before (the old owner's row, then its heartbeat, then the coordinator's answer to the new owner,
then the new owner's row), so a clean handover never overlaps, however close.

One overlap is Kafka working as designed: the coordinator removes a member that stops
heartbeating for its session timeout, or that does not revoke within its rebalance timeout, and
gives its partitions on while the member, cut off, still believes it owns them (it learns it was
fenced from its next heartbeat, and loses them then: reason `lost`; its commits are refused
meanwhile). Such a loss explains an overlap only when the new owner's row came at or after the
earliest instant the coordinator could have removed the member: its last answered heartbeat's
request time plus the session timeout (group.consumer.session.timeout.ms from run.json), or, if it
was asked to revoke, that request's time plus the group's rebalance timeout (the loss row carries
both times). Anything earlier is a coordinator (or member) handing out what is still owned.

Classic groups are not judged here, and differently on purpose. An eager classic member gives up
everything when it hears of a rebalance and owns its next partitions only once the generation's
SyncGroup answers, which comes after every member has rejoined (or been removed): the generation
barrier, not a per-partition handover the members report, keeps owners apart, and the classic
member's rows (rebalance_start/rebalance_end) record generations, not what it still owns while it
commits on its way out (nor, for a cooperative member, the partitions it keeps until it has
revoked them). What a broken barrier shows in a classic group is a record read twice without a
rebalance before its commit: the `duplicate` invariant judges that.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from loadtest.check.rundata import RunData
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "double-ownership"
TITLE = "no partition owned by two members of a consumer group at once"
Row = dict[str, Any]
Partition = tuple[str, str, int]  # group, topic, partition
NEVER = float("inf")


@dataclass(slots=True)
class Span:
    """One member's ownership of one partition: from `start` (its row adding the partition) to
    `end` (its row taking it away, or its member_stop; None: it still owned it at the end)."""

    member: str
    start: Row
    end: Row | None
    removable_from: float  # a loss: the earliest the coordinator may have removed the member (µs); else never

    @property
    def began(self) -> int:
        return self.start["time"]

    @property
    def ended(self) -> float:
        return self.end["time"] if self.end is not None else NEVER


def double_ownership(run: RunData) -> Verdict:
    groups = run.info.consumer_groups
    if not groups:
        return not_applicable(NAME, TITLE, "the run has no groups of the consumer protocol")
    rows = [r for r in run.rows("assignment") if r["group"] in groups and r["role"] == "consumer"]
    if not rows:
        return not_applicable(NAME, TITLE, "no consumer-protocol member reported owning a partition")
    spans = ownership_spans(run, rows)
    evidence = Evidence()
    handovers = violations = excused = 0
    for (group, topic, partition), owned in sorted(spans.items()):
        owned.sort(key=lambda s: s.began)
        handovers += sum(1 for x, y in pairwise(owned) if x.member != y.member)
        for i, a in enumerate(owned):
            for b in owned[i + 1:]:
                if b.began >= a.ended:
                    break  # and so does every later one
                if b.member == a.member:
                    continue
                if b.began >= a.removable_from:
                    excused += 1
                    continue
                violations += 1
                until = "the end of the run" if a.end is None else f"its {_how(a.end)}"
                evidence.add(f"{topic}-{partition} of {group} given to {b.member} while {a.member} owned it "
                             f"(until {until})", a.start, b.start, a.end)
    if violations:
        summary = (f"{violations:,} overlapping ownerships of a partition by two members "
                   f"({plural(len(groups), 'consumer group')})")
    else:
        summary = (f"{plural(sum(len(s) for s in spans.values()), 'ownership')} of {plural(len(spans), 'partition')} "
                   f"in {plural(len(groups), 'consumer group')}, {plural(handovers, 'handover')}, none overlapping")
    if excused:
        summary += (f"; {plural(excused, 'overlap')} after a member the coordinator could already have removed "
                    f"lost its partitions")
    return judged(NAME, TITLE, sum(len(s) for s in spans.values()), violations, evidence, summary)


def ownership_spans(run: RunData, rows: list[Row]) -> dict[Partition, list[Span]]:
    """(group, topic, partition) -> every member's ownership of it, from the members' rows (by time)."""
    stops: dict[str, list[Row]] = defaultdict(list)
    for row in run.rows("member_stop"):
        stops[row["member"]].append(row)
    by_member: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_member[row["member"]].append(row)
    out: dict[Partition, list[Span]] = defaultdict(list)
    for member, mine in by_member.items():
        held: dict[tuple[str, int], Row] = {}  # (topic, partition) -> the row that gave it
        group = mine[0]["group"]
        for row in mine:
            detail = row["detail"]
            now = {(t, p) for t, ps in (detail.get("assignment") or {}).items() for p in ps}
            removable = _removable_from(run, row) if detail.get("reason") == "lost" else NEVER
            for tp in sorted(held.keys() - now):
                out[(group, *tp)].append(Span(member, held.pop(tp), row, removable))
            for tp in sorted(now - held.keys()):
                held[tp] = row
        for tp, start in held.items():
            end = _stopped(stops.get(member, []), start["time"])
            out[(group, *tp)].append(Span(member, start, end, NEVER))
    return out


def _removable_from(run: RunData, row: Row) -> float:
    """The earliest instant the coordinator may have removed the member that lost its partitions in
    `row`: no earlier than a session timeout after its last answered heartbeat was sent, or a
    rebalance timeout after it was asked to revoke (the member's times are milliseconds)."""
    detail = row["detail"]
    bounds = []
    if detail.get("heartbeat_answered_sent_ms") is not None:
        bounds.append(detail["heartbeat_answered_sent_ms"] * 1000 + run.info.consumer_session_timeout_us)
    if detail.get("revocation_asked_ms") is not None:
        bounds.append(detail["revocation_asked_ms"] * 1000 + run.info.rebalance_timeout(row["group"]))
    return min(bounds) if bounds else NEVER


def _stopped(stops: list[Row], since: int) -> Row | None:
    times = [r["time"] for r in stops]
    i = bisect.bisect_left(times, since)
    return stops[i] if i < len(stops) else None


def _how(row: Row) -> str:
    if row["kind"] == "member_stop":
        return "member_stop"
    return f"{row['detail'].get('reason', 'assignment')} row"
