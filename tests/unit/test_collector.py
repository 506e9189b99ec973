"""The collector's policy (cluster/runtime/collector.py). settle_at_start: what a process held at
start is out of the passes, full passes are rarer, and garbage made later is still collected.
full_collections_paused: the collector's full passes are off while any replay runs, the thresholds
come back when the last one ends, and thresholds something else set meanwhile stay."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading

import pytest

from cluster.runtime.collector import full_collections_paused


@pytest.fixture(autouse=True)
def thresholds_back():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_nested_replays_on_two_threads_bring_them_back_only_when_the_last_ends():
    before = gc.get_threshold()
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[tuple[int, ...]] = []

    def first() -> None:
        with full_collections_paused():
            first_in.set()
            second_done.wait(10)
            seen.append(gc.get_threshold())

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with full_collections_paused():
        paused = gc.get_threshold()
        assert paused[:2] == before[:2] and paused[2] > 1_000_000
    second_done.set()
    thread.join(10)
    assert seen == [paused] and gc.get_threshold() == before and gc.isenabled()


def test_they_come_back_after_a_replay_that_failed():
    before = gc.get_threshold()
    with pytest.raises(ValueError), full_collections_paused():
        raise ValueError
    assert gc.get_threshold() == before


def test_thresholds_set_by_something_else_meanwhile_stay():
    with full_collections_paused():
        gc.set_threshold(500, 5, 5)
    assert gc.get_threshold() == (500, 5, 5)


def test_settle_at_start_freezes_the_start_heap_and_keeps_collecting_later_garbage():
    # In a process of its own: a frozen heap would stay frozen in the test runner's.
    script = textwrap.dedent("""
        import gc, weakref
        from cluster.runtime.collector import FULL_PASS_AFTER, full_collections_paused, settle_at_start

        class Node:
            pass

        held = [Node() for _ in range(100)]  # alive at start: frozen
        settle_at_start()
        assert gc.get_freeze_count() >= 100, gc.get_freeze_count()
        assert gc.get_threshold()[2] == FULL_PASS_AFTER == 100
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle made after start
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None, "a cycle made after start is never collected"
        with full_collections_paused():
            pass
        assert gc.get_threshold()[2] == FULL_PASS_AFTER  # a replay puts the policy's threshold back
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
