"""An idle member's memory (issue 12): members of a group that send equal subscriptions, client ids
and hosts share one copy of each, whatever objects their decoded requests brought."""

from __future__ import annotations

from tests.unit.classic.context import Context


def fresh(protocols):
    return tuple(("".join(list(name)), bytes(bytearray(meta))) for name, meta in protocols)


def test_equal_subscriptions_are_kept_once_per_group() -> None:
    ctx = Context()
    subscription = (("range", b"\x00\x01topic"),)
    first = ctx.join_new(protocols=fresh(subscription), client_id="".join(["app", "-1"]))
    second = ctx.join_new(protocols=fresh(subscription), client_id="".join(["app", "-1"]))
    other = ctx.join_new(protocols=fresh((("range", b"\x00\x01other"),)))
    ctx.advance(1)
    members = ctx.group().members
    a, b, c = (members[p.answer.member_id] for p in (first, second, other))
    assert a.protocols is b.protocols and a.client_id is b.client_id and a.client_host is b.client_host
    assert c.protocols is not a.protocols and c.protocols == (("range", b"\x00\x01other"),)


def test_a_rejoin_with_an_equal_subscription_shares_it_too() -> None:
    ctx = Context()
    subscription = (("range", b"\x00\x01topic"),)
    first = ctx.join_new(protocols=fresh(subscription))
    second = ctx.join_new(protocols=fresh(subscription))
    assert ctx.group().state.value == "PreparingRebalance"
    leader, follower = ctx.group().leader_id, next(m for m in ctx.group().members if m != ctx.group().leader_id)
    ctx.join("g", follower, protocols=fresh(subscription))  # its JoinGroup again, still PreparingRebalance
    ctx.advance(1)
    assert first.answer.error_code.name == "none"
    members = ctx.group().members
    assert members[follower].protocols is members[leader].protocols


def test_a_stable_group_holds_each_member_at_most_one_and_a_half_times():
    # The copy-on-write members map keeps replaced members in its base until it folds: replay
    # folds a version whose changes reach half its base when it installs it.
    ctx = Context()
    joins = [ctx.join_new() for _ in range(10)]
    ctx.advance(1)
    generation = joins[0].answer.generation_id
    leader = joins[0].answer.leader
    ids = [j.answer.member_id for j in joins]
    ctx.sync(leader, generation, assignments=[(m, b"a") for m in ids])
    for m in ids:
        if m != leader:
            ctx.sync(m, generation)
    assert ctx.group().state.value == "Stable"
    members = ctx.group().members
    held = len(members._base) + len(members._layer)
    assert held <= 1.5 * len(ids), (len(members._base), len(members._layer))
