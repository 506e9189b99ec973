"""The fuzz soak's health watch (tests/fuzz/health.py): a partition without a leader for a moment
(a fuzzed CreateTopics whose first leader is loading) passes; one still without a leader at the
next probe fails the soak."""

from __future__ import annotations

from tests.fuzz import health


def watch_over(monkeypatch, answers: list[set]) -> health.HealthWatch:
    monkeypatch.setattr(health, "probe", lambda *_args: answers.pop(0))
    return health.HealthWatch("127.0.0.1:1", every_s=0, bound_s=5)


def test_a_partition_led_by_the_next_probe_is_a_creation_not_a_failure(monkeypatch):
    watch = watch_over(monkeypatch, [{("t", 0)}, set(), {("u", 1)}, {("t", 0)}])
    for _ in range(4):
        watch.check_once()
    assert not watch.failed.is_set() and len(watch.log.latencies_ms) == 4


def test_a_partition_without_a_leader_at_two_probes_in_a_row_fails_the_soak(monkeypatch):
    watch = watch_over(monkeypatch, [{("t", 0), ("u", 0)}, {("t", 0)}])
    watch.check_once()
    watch.check_once()
    assert watch.failed.is_set() and "('t', 0)" in watch.log.failures[0] and "('u', 0)" not in watch.log.failures[0]
