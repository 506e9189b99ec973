"""TimerTable keeps one wakeup per partition: re-arming a key (every heartbeat re-arms a session
timer) creates no event-loop handle and fires only the latest arming."""

from kernel.clock import ManualClock

from cluster.runtime.timers import TimerTable
from cluster.runtime.wakeups import ManualWakeups


class CountingWakeups(ManualWakeups):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.handles = 0

    def call_at(self, deadline_ms, callback):
        self.handles += 1
        return super().call_at(deadline_ms, callback)


def _table():
    clock = ManualClock(0)
    wakeups = CountingWakeups(clock)
    fired: list[tuple[str, int]] = []
    table = TimerTable(wakeups, lambda key, seq: fired.append((key, seq)))
    return clock, wakeups, table, fired


def test_rearming_a_later_deadline_creates_no_wakeup():
    clock, wakeups, table, fired = _table()
    table.arm("a", 100, lambda shard: None, clock.now_ms())
    for i in range(1, 1000):
        table.arm("a", 100 + i, lambda shard: None, clock.now_ms())
    assert wakeups.handles == 1
    wakeups.advance(100)
    assert fired == []  # the first arming is stale
    wakeups.advance(999)
    assert fired == [("a", table["a"].seq)]


def test_expiries_fire_in_deadline_order_and_cancelled_ones_never():
    clock, wakeups, table, fired = _table()
    table.arm("late", 300, lambda shard: None, 0)
    table.arm("early", 100, lambda shard: None, 0)
    table.arm("gone", 50, lambda shard: None, 0)
    table.cancel("gone")
    wakeups.advance(1000)
    assert [key for key, _ in fired] == ["early", "late"]


def test_stale_entries_do_not_pile_up_and_due_ones_do_not_fire_twice():
    clock, wakeups, table, fired = _table()
    table.arm("due", 10, lambda shard: None, 0)
    wakeups.advance(10)
    assert fired == [("due", table["due"].seq)]
    for i in range(10_000):
        table.arm(f"k{i % 10}", 1_000 + i, lambda shard: None, clock.now_ms())
    assert len(table._heap) <= 2 * len(table) + 1024 + 1
    wakeups.advance(100_000)
    assert [key for key, _ in fired].count("due") == 1
    assert sorted(key for key, _ in fired[1:]) == [f"k{i}" for i in range(10)]
