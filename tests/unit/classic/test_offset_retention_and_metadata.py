"""Offset fixes decided by Kafka 4.x OffsetMetadataManager (issue 9)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.unit.classic.context import Context
from tests.unit.classic.test_rebalance_scenarios import stable_group_of


def test_offsets_with_an_explicit_retention_never_expire_while_their_group_is_not_empty():
    """OffsetCommit v2-v4 retention: Kafka gives a Stable group whose subscriptions it cannot read
    (b"range-meta" is no consumer-protocol subscription) no expiration condition."""
    ctx = Context(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1_000)
    ctx.run(ctx.shard.on_loaded())
    (m1,) = stable_group_of(ctx, 1)
    ctx.commit({("t", 0): 5}, member_id=m1, generation=1, retention=3_000, api_version=2)
    for _ in range(5):
        ctx.advance(2_000)
        ctx.heartbeat(m1, 1)
    assert ctx.fetch(topics=(("t", (0,)),)).topics[0][1][0].offset == 5


def test_the_offset_metadata_limit_counts_characters_not_utf8_bytes():
    ctx = Context(offset_metadata_max_bytes=4)
    accepted = ctx.commit({("t", 0): 1}, metadata="éééé", group_id="s")  # 4 characters, 8 bytes
    refused = ctx.commit({("t", 1): 1}, metadata="ééééé", group_id="s")
    assert accepted.topics[0][1][0][1] == ErrorCode.none
    assert refused.topics[0][1][0][1] == ErrorCode.offset_metadata_too_large


def test_an_accepted_offset_commit_refreshes_the_members_session():
    """Kafka's classic commit path reschedules the member's heartbeat (Stable, PreparingRebalance)."""
    ctx = Context()
    (m1,) = stable_group_of(ctx, 1)
    for offset in range(4):  # 16 s of commits and no heartbeat; the session timeout is 10 s
        ctx.advance(4_000)
        ctx.commit({("t", 0): offset}, member_id=m1, generation=1)
    assert m1 in ctx.group().members and ctx.group().generation_id == 1


def test_a_group_above_group_max_size_when_its_partition_loads_starts_a_rebalance():
    """Kafka's onLoaded: a classic group over capacity (group.max.size lowered) prepares a rebalance."""
    live = Context()
    log = []
    live.run = lambda result, run=live.run: (log.extend(result.records), run(result))[1]  # keep every record
    stable_group_of(live, 2)
    loaded = Context(max_size=1)
    for record in log:
        if not record.key.__class__.__name__.endswith("StateKey"):  # only what the log holds
            loaded.shard.replay(record)
    loaded.run(loaded.shard.on_loaded())
    assert loaded.group().state.value == "PreparingRebalance" and loaded.group().generation_id == 1
